"""The rmsnorm scenario as a pull request might change it: ``naive`` now calls torch.rms_norm
(faster) and ``fused`` round-trips through float64 (slower). Used only to regenerate the real
CPU-profiled bundles in this folder (see README.md); same scenario name, so they compare."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scenarios"))
import rmsnorm  # noqa: E402

from reportgen.scenario import Variant  # noqa: E402


def faster_naive(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The PR's 'naive': one fused call."""
    return torch.rms_norm(x, (x.shape[-1],), weight, rmsnorm.EPS)


def slower_fused(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The PR's 'fused': the same maths in float64, then back, plus a copy."""
    y = torch.rms_norm(x.double(), (x.shape[-1],), weight.double(), rmsnorm.EPS)
    return y.to(x.dtype).clone()


SCENARIO = replace(
    rmsnorm.SCENARIO,
    variants=(
        Variant("naive", "PR: torch.rms_norm", faster_naive),
        Variant("fused", "PR: float64 round trip", slower_fused),
    ),
)
