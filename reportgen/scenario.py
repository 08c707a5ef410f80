"""Scenario plug-ins: one file in ``scenarios/`` per workload, loaded by name or path.

A scenario file defines ``SCENARIO = Scenario(...)``. It may import torch (it only runs
under ``reportgen profile``); this module does not.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportgen.errors import ScenarioError

SCENARIOS_DIR = Path(__file__).resolve().parent.parent / "scenarios"
DTYPES = ("float32", "bfloat16", "float16")
_NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class Variant:
    """One way of computing the scenario; ``compile=True`` runs ``fn`` under the backend's torch.compile."""

    name: str
    description: str
    fn: Callable[..., Any]
    compile: bool = False


@dataclass(frozen=True)
class Tolerance:
    """allclose-style bound: |out - ref| <= atol + rtol * |ref|."""

    atol: float
    rtol: float


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(atol=1e-5, rtol=1e-4),
    "float16": Tolerance(atol=2e-3, rtol=2e-3),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
}


@dataclass(frozen=True)
class Scenario:
    """A workload: how to make inputs, the reference, the variants, and the bytes/flops per call."""

    name: str
    description: str
    default_shape: tuple[int, ...]
    default_dtype: str
    make_inputs: Callable[[tuple[int, ...], Any, int, Any], tuple[Any, ...]]
    reference: Callable[..., Any]
    variants: tuple[Variant, ...]
    bytes_per_call: Callable[[tuple[int, ...], int], int]
    flops_per_call: Callable[[tuple[int, ...]], int]
    tolerances: dict[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    baseline: str | None = None
    """The variant speedups are measured against; None: the first variant."""

    def variant_names(self) -> list[str]:
        """Names of the variants in declaration order."""
        return [v.name for v in self.variants]

    def baseline_among(self, chosen: tuple[str, ...]) -> str | None:
        """The declared baseline (else the first variant) when it is among ``chosen``, else the first chosen."""
        declared = self.baseline or (self.variants[0].name if self.variants else None)
        return declared if declared in chosen else (chosen[0] if chosen else None)


def load_scenario(ref: str, scenarios_dir: Path = SCENARIOS_DIR) -> Scenario:
    """Load ``scenarios/<ref>.py`` (or the file ``ref``) and return its ``SCENARIO``."""
    path = Path(ref) if ref.endswith(".py") else scenarios_dir / f"{ref}.py"
    if not ref.endswith(".py") and not _NAME_RE.match(ref):
        raise ScenarioError(f"--scenario {ref!r}: use a name from {scenarios_dir} (letters, digits, _) or a .py path")
    if not path.is_file():
        known = sorted(p.stem for p in scenarios_dir.glob("*.py") if not p.stem.startswith("_"))
        raise ScenarioError(f"{path}: no such scenario file; known scenarios: {', '.join(known) or 'none'}")
    spec = importlib.util.spec_from_file_location(f"reportgen_scenario_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ScenarioError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: any error is theirs to fix, reported in one line
        raise ScenarioError(f"{path}: failed to load ({type(exc).__name__}: {exc}); fix the scenario file") from None
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise ScenarioError(f"{path}: must define SCENARIO = reportgen.scenario.Scenario(...)")
    return scenario


def parse_shape(text: str) -> tuple[int, ...]:
    """``"4,2048,4096"`` -> (4, 2048, 4096); every dimension a positive integer."""
    try:
        dims = tuple(int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise ScenarioError(f"--shape {text!r}: expected comma-separated positive integers, e.g. 4,2048,4096") from None
    if not dims or any(d <= 0 for d in dims):
        raise ScenarioError(f"--shape {text!r}: every dimension must be a positive integer")
    return dims


def parse_dtype(text: str) -> str:
    """A dtype name reportgen supports."""
    if text not in DTYPES:
        raise ScenarioError(f"--dtype {text!r}: choose one of {', '.join(DTYPES)}")
    return text
