"""RMSNorm over the last dimension, three ways: naive eager ops, fused torch.rms_norm, compiled.

y = x * rsqrt(mean(x^2, -1) + eps) * weight
"""

from __future__ import annotations

import math

import torch

from reportgen.scenario import Scenario, Variant

EPS = 1e-6


def make_inputs(shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x ~ N(0, 1) and a weight near 1, made on the CPU with a fixed seed, then moved to ``device``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    weight = (1.0 + 0.1 * torch.randn(shape[-1], generator=gen, dtype=torch.float32)).to(dtype)
    return (x.to(device), weight.to(device))


def naive(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Separate eager ops: mul, mean, add, rsqrt, mul, mul."""
    variance = (x * x).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(variance + EPS) * weight


def fused(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """One call to torch.rms_norm (aten::_fused_rms_norm where the device has it)."""
    return torch.rms_norm(x, (x.shape[-1],), weight, EPS)


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The naive formula in float64 on the CPU."""
    x64, w64 = x.detach().to("cpu", torch.float64), weight.detach().to("cpu", torch.float64)
    return x64 * torch.rsqrt((x64 * x64).mean(dim=-1, keepdim=True) + EPS) * w64


def bytes_per_call(shape: tuple[int, ...], itemsize: int) -> int:
    """Read x and weight once, write y once: the minimum traffic of any implementation."""
    return (2 * math.prod(shape) + shape[-1]) * itemsize


def flops_per_call(shape: tuple[int, ...]) -> int:
    """About 4 flops per element (square, sum, scale, weight)."""
    return 4 * math.prod(shape)


SCENARIO = Scenario(
    name="rmsnorm",
    description="RMSNorm over the last dimension (eps 1e-6, with weight)",
    default_shape=(8, 1024, 1024),
    default_dtype="float32",
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        Variant("naive", "separate eager ops: mul, mean, add, rsqrt, mul, mul", naive),
        Variant("fused", "torch.rms_norm (aten::_fused_rms_norm)", fused),
        Variant("compiled", "the naive function under torch.compile (inductor; neuron on Trainium)", naive, compile=True),
    ),
    bytes_per_call=bytes_per_call,
    flops_per_call=flops_per_call,
    # --sweep default: decode-like rows (1-64 tokens) to prefill-like blocks, hidden 4096 and 8192; sized so the
    # whole sweep stays under 3 minutes on a 2-core CPU with a warm compile cache (see benchmarks/README.md).
    default_sweep=((1, 4096), (8, 4096), (64, 4096), (512, 4096), (4096, 4096), (4096, 8192)),
)
