"""A throwaway user repository for tests: its own kernel package and scenarios that import it.

- ``mykernels.fused_add_rmsnorm_``: an in-place fused add + RMSNorm returning ``(out, residual)``;
- ``mykernels.softmax``: a softmax with an ``eps`` added to the denominator (a scenario parameter).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

KERNELS = '''"""The user's own kernels."""
import torch


def fused_add_rmsnorm_(x, residual, weight, eps=1e-6):
    """In place: residual += x, then x = rmsnorm(residual) * weight; returns (x, residual)."""
    residual.add_(x)
    variance = residual.pow(2).mean(dim=-1, keepdim=True)
    torch.mul(residual * torch.rsqrt(variance + eps), weight, out=x)
    return x, residual


def softmax(x, eps):
    """exp(x - max) / (sum + eps) over the last dimension."""
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / (e.sum(dim=-1, keepdim=True) + eps)
'''

ADD_RMSNORM = '''"""Fused add + RMSNorm: the user's in-place kernel against eager ops."""
import math

import torch
from mykernels import fused_add_rmsnorm_

from reportgen.scenario.loader import Scenario, Variant

EPS = 1e-6


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen).to(dtype).to(device)
    residual = torch.randn(shape, generator=gen).to(dtype).to(device)
    weight = (1 + 0.1 * torch.randn(shape[-1], generator=gen)).to(dtype).to(device)
    return (x, residual, weight)


def eager(x, residual, weight):
    h = x + residual
    return h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight, h


def reference(x, residual, weight):
    x, residual, weight = (t.detach().to("cpu", torch.float64) for t in (x, residual, weight))
    h = x + residual
    return (h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight, h)


SCENARIO = Scenario(
    name="add_rmsnorm",
    description="residual add + RMSNorm, returning (out, residual)",
    default_shape=(4, 64),
    default_dtype="float32",
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        Variant("eager", "separate eager ops", eager),
        Variant("fused_inplace", "mykernels.fused_add_rmsnorm_ (writes into x and residual)",
                lambda x, r, w: fused_add_rmsnorm_(x, r, w, EPS), inplace=True),
    ),
    bytes_per_call=lambda shape, itemsize: 4 * math.prod(shape) * itemsize,
    flops_per_call=lambda shape: 6 * math.prod(shape),
)
'''

SOFTMAX = '''"""Softmax with an eps in the denominator: the user's kernel against torch.softmax."""
import math

import torch
from mykernels import softmax

from reportgen.scenario.loader import Param, Scenario, Variant


def make_inputs(shape, dtype, seed, device, params):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen).to(dtype).to(device), params["eps"])


def with_torch(x, eps):
    return torch.softmax(x, dim=-1) * (1 / (1 + eps))


def reference(x, eps):
    x = x.detach().to("cpu", torch.float64)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / (e.sum(dim=-1, keepdim=True) + eps)


SCENARIO = Scenario(
    name="softmax",
    description="softmax over the last dimension with eps in the denominator",
    default_shape=(4, 64),
    default_dtype="float32",
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        Variant("mine", "mykernels.softmax", softmax),
        Variant("torch", "torch.softmax", with_torch),
    ),
    bytes_per_call=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
    flops_per_call=lambda shape: 4 * math.prod(shape),
    params=(Param("eps", float, 1e-6, "added to the denominator"),),
)
'''

GIT_ENV = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com", "GIT_COMMITTER_NAME": "Test",
           "GIT_COMMITTER_EMAIL": "test@example.com", "GIT_CONFIG_NOSYSTEM": "1"}


def write_user_package(root: Path, scenarios: dict[str, str] | None = None) -> None:
    """``mykernels/`` and ``bench/<name>.py`` for each scenario (default: both)."""
    (root / "mykernels").mkdir(parents=True, exist_ok=True)
    (root / "mykernels" / "__init__.py").write_text(KERNELS)
    (root / "bench").mkdir(exist_ok=True)
    for name, text in (scenarios or {"add_rmsnorm": ADD_RMSNORM, "softmax": SOFTMAX}).items():
        (root / "bench" / f"{name}.py").write_text(text)


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity; its stdout."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV},
                          check=True)
    return proc.stdout.strip()
