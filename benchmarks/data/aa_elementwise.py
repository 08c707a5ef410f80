"""One elementwise op over a 16 MiB float32 tensor (the issue's A/A case)."""

from __future__ import annotations

import math

import torch

from reportgen.scenario import Scenario, Variant


def make_inputs(shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen).to(dtype).to(device),)


def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 1.5


def shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1.0


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to("cpu", torch.float64) * 1.5


SCENARIO = Scenario(
    name="elementwise",
    description="x * 1.5 over a 16 MiB float32 tensor",
    default_shape=(4, 1024, 1024),
    default_dtype="float32",
    make_inputs=make_inputs,
    reference=reference,
    variants=(Variant("scale", "x * 1.5", scale), Variant("shift", "x + 1.0 (checked against x * 1.5: skipped)", shift)),
    bytes_per_call=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
    flops_per_call=lambda shape: math.prod(shape),
)
