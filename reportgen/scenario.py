"""Scenario plug-ins: one file in ``scenarios/`` per workload, loaded by name or path.

A scenario file defines ``SCENARIO = Scenario(...)``. It may import torch (it only runs
under ``reportgen profile``); this module does not.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

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
    inplace: bool = False
    """True when ``fn`` writes into its inputs: every call then gets fresh clones, made outside the timed region."""


PARAM_TYPES: dict[type, str] = {int: "int", float: "float", str: "str", bool: "bool"}


@dataclass(frozen=True)
class Param:
    """A scenario parameter beyond shape, dtype and seed (``eps``, ``dim``, ``causal`` ...), set by ``--param``."""

    name: str
    type: type
    default: Any
    help: str = ""

    def parse(self, text: str, where: str) -> Any:
        """``text`` as this parameter's type; ScenarioError naming ``where`` (the flag or config key) otherwise."""
        try:
            if self.type is bool:
                lowered = text.strip().lower()
                if lowered not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(text)
                return lowered in ("true", "1", "yes")
            return self.type(text)
        except (TypeError, ValueError):
            raise ScenarioError(f"{where} {self.name}={text!r}: expected {PARAM_TYPES.get(self.type, self.type.__name__)}"
                                f" ({self.help or 'see reportgen scenarios'})") from None

    def show(self, value: Any) -> str:
        """The value as recorded in the run (``ScenarioInfo.parameters``): the same text for equal values."""
        if self.type is bool:
            return "true" if value else "false"
        return repr(value) if self.type is float else str(value)


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
    params: tuple[Param, ...] = ()
    """Declared parameters; when any, ``make_inputs`` gets a fifth argument: ``{name: typed value}``."""
    source_file: str = ""
    """The file the scenario was loaded from (set by load_scenario): errors in its functions name it."""

    def variant_names(self) -> list[str]:
        """Names of the variants in declaration order."""
        return [v.name for v in self.variants]

    def param(self, name: str) -> Param | None:
        """The declared parameter called ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    def resolve_params(self, flags: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, Any]:
        """Typed values of every declared parameter: ``--param`` flags, then config defaults, then declared defaults.

        A flag naming an undeclared parameter is an error; a config default for one is ignored (it may
        belong to another scenario).
        """
        unknown = sorted(set(flags) - {p.name for p in self.params})
        if unknown:
            declared = ", ".join(p.name for p in self.params) or "none"
            raise ScenarioError(f"--param {unknown[0]}: scenario {self.name!r} declares no such parameter "
                                f"(it declares: {declared})")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in flags:
                out[p.name] = p.parse(flags[p.name], "--param")
            elif p.name in defaults:
                out[p.name] = p.parse(defaults[p.name], "config params:")
            else:
                out[p.name] = p.default
        return out

    def make(self, shape: tuple[int, ...], dtype: Any, seed: int, device: Any,
             params: Mapping[str, Any]) -> tuple[Any, ...]:
        """``make_inputs`` with the parameters when the scenario declares any."""
        if self.params:
            return tuple(self.make_inputs(shape, dtype, seed, device, dict(params)))  # type: ignore[call-arg]
        return tuple(self.make_inputs(shape, dtype, seed, device))


T = TypeVar("T")


def call_scenario(scenario: Scenario, what: str, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, a function of the scenario's own; an exception becomes the scenario's one-line error
    with the file and line of the last frame inside the scenario file (never an internal error)."""
    try:
        return fn(*args)
    except ScenarioError:
        raise
    except Exception as exc:  # the user's code: any error is theirs to fix
        raise ScenarioError(f"{where_in_scenario(exc, scenario.source_file)}: {what} raised "
                            f"{type(exc).__name__}: {exc}; fix the scenario") from None


def where_in_scenario(exc: BaseException, source_file: str) -> str:
    """``file:line`` of the innermost traceback frame in ``source_file`` (else the innermost frame at all)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return source_file or "scenario"
    target = str(Path(source_file).resolve()) if source_file else ""
    inside = [f for f in frames if target and str(Path(f.filename).resolve()) == target]
    frame = (inside or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"


def scenario_files(sources: Iterable[Path]) -> dict[str, Path]:
    """Scenario name (file stem) -> file, from files and folders (a folder: its ``*.py`` not starting with ``_``).

    The first source to name a scenario wins.
    """
    found: dict[str, Path] = {}
    for src in sources:
        files = sorted(p for p in src.glob("*.py") if not p.stem.startswith("_")) if src.is_dir() else [src]
        for f in files:
            found.setdefault(f.stem, f)
    return found


def available_scenarios(config_sources: Iterable[Path] = ()) -> dict[str, Path]:
    """The scenarios a name can refer to: the config's, then reportgen's built-in ones."""
    found = scenario_files(config_sources)
    for name, path in scenario_files([SCENARIOS_DIR]).items():
        found.setdefault(name, path)
    return found


def load_scenario(ref: str, scenarios_dir: Path = SCENARIOS_DIR, config_sources: Iterable[Path] = (),
                  project_root: Path | None = None) -> Scenario:
    """Load the scenario ``ref`` names (a config scenario, ``scenarios/<ref>.py``, or the file ``ref``).

    The scenario's folder and ``project_root`` (the config's folder) are put on ``sys.path`` first, so a
    scenario can import the user's own package.
    """
    named = scenario_files(config_sources) if not ref.endswith(".py") else {}
    path = Path(ref) if ref.endswith(".py") else named.get(ref, scenarios_dir / f"{ref}.py")
    if not ref.endswith(".py") and not _NAME_RE.match(ref):
        raise ScenarioError(f"--scenario {ref!r}: use a name from {scenarios_dir} (letters, digits, _) or a .py path")
    if not path.is_file():
        known = sorted({*(p.stem for p in scenarios_dir.glob("*.py") if not p.stem.startswith("_")), *named})
        raise ScenarioError(f"{path}: no such scenario file; known scenarios: {', '.join(known) or 'none'}")
    spec = importlib.util.spec_from_file_location(f"reportgen_scenario_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ScenarioError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    _put_on_sys_path([path.resolve().parent, *([project_root.resolve()] if project_root else [])])
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: any error is theirs to fix, reported in one line
        raise ScenarioError(f"{path}: failed to load ({type(exc).__name__}: {exc}); fix the scenario file") from None
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise ScenarioError(f"{path}: must define SCENARIO = reportgen.scenario.Scenario(...)")
    return dataclasses.replace(scenario, source_file=str(path))


def _put_on_sys_path(folders: list[Path]) -> None:
    for folder in reversed(folders):
        text = str(folder)
        if text not in sys.path:
            sys.path.insert(0, text)


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
