"""LayerNorm over the last dimension: a second, small scenario showing that workloads are plug-ins.

Added as a file only; nothing in reportgen/ names it.
"""

from __future__ import annotations

import math

import torch

from reportgen.scenario import Scenario, Variant

EPS = 1e-5


def make_inputs(shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x ~ N(0, 1), weight near 1, bias near 0 (fixed seed, made on the CPU)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen).to(dtype)
    weight = (1.0 + 0.1 * torch.randn(shape[-1], generator=gen)).to(dtype)
    bias = (0.1 * torch.randn(shape[-1], generator=gen)).to(dtype)
    return (x.to(device), weight.to(device), bias.to(device))


def naive(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Separate eager ops: mean, sub, mul, mean, add, rsqrt, mul, mul, add."""
    mu = x.mean(dim=-1, keepdim=True)
    centred = x - mu
    var = (centred * centred).mean(dim=-1, keepdim=True)
    return centred * torch.rsqrt(var + EPS) * weight + bias


def fused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """torch.nn.functional.layer_norm (aten::native_layer_norm)."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The textbook formula in float64 on the CPU."""
    x64 = x.detach().to("cpu", torch.float64)
    mu = x64.mean(dim=-1, keepdim=True)
    var = ((x64 - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x64 - mu) / torch.sqrt(var + EPS) * weight.to("cpu", torch.float64) + bias.to("cpu", torch.float64)


def bytes_per_call(shape: tuple[int, ...], itemsize: int) -> int:
    """Read x, weight and bias once, write y once."""
    return (2 * math.prod(shape) + 2 * shape[-1]) * itemsize


def flops_per_call(shape: tuple[int, ...]) -> int:
    """About 8 flops per element."""
    return 8 * math.prod(shape)


SCENARIO = Scenario(
    name="layernorm",
    description="LayerNorm over the last dimension (eps 1e-5, with weight and bias)",
    default_shape=(4, 256, 512),
    default_dtype="float32",
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        Variant("naive", "separate eager ops: mean, sub, mul, mean, add, rsqrt, mul, mul, add", naive),
        Variant("fused", "torch.nn.functional.layer_norm (aten::native_layer_norm)", fused),
    ),
    bytes_per_call=bytes_per_call,
    flops_per_call=flops_per_call,
)
