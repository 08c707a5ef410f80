"""Scenario plug-ins: one file in ``scenarios/`` per workload, loaded by name or path.

A scenario file defines ``SCENARIO = Scenario(...)``. It may import torch (it only runs
under ``reportgen profile``); this module does not.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from reportgen.errors import ScenarioError, UsageError

SCENARIOS_DIR = Path(str(resources.files("reportgen.scenarios")))
"""The built-in scenarios: package data (the repository's scenarios/ folder, shipped as reportgen.scenarios)."""
DTYPES = ("float32", "bfloat16", "float16")
_NAME_RE = re.compile(r"[A-Za-z0-9_]+")
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
MAX_DIMENSION = 2**31 - 1
MAX_DIMS = 8
"""Most dimensions a shape may have (PyTorch kernels of interest take at most 4 to 6; 40 is a typo)."""
SEED_RANGE = (-(2**63), 2**64 - 1)
"""What ``torch.Generator.manual_seed`` accepts."""
THREADS_PER_CPU = 4
ITEM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


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
    baseline: str | None = None
    """The variant speedups are measured against; None: the first variant."""
    default_sweep: tuple[tuple[int, ...], ...] = ()
    """The shapes ``--sweep default`` measures (smallest first); empty: the scenario declares no sweep."""

    def variant_names(self) -> list[str]:
        """Names of the variants in declaration order."""
        return [v.name for v in self.variants]

    def param(self, name: str) -> Param | None:
        """The declared parameter called ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    def baseline_among(self, chosen: tuple[str, ...]) -> str | None:
        """The declared baseline (else the first variant) when it is among ``chosen``, else the first chosen."""
        declared = self.baseline or (self.variants[0].name if self.variants else None)
        return declared if declared in chosen else (chosen[0] if chosen else None)

    def resolve_params(self, given: Mapping[str, str], defaults: Mapping[str, str],
                       flag: str = "parameter") -> dict[str, Any]:
        """Typed values of every declared parameter: ``given`` values, then config defaults, then declared defaults.

        A given value naming an undeclared parameter is an error (``flag`` names where it came from); a config
        default for one is ignored (it may belong to another scenario).
        """
        unknown = sorted(set(given) - {p.name for p in self.params})
        if unknown:
            declared = ", ".join(p.name for p in self.params) or "none"
            raise ScenarioError(f"{flag} {unknown[0]}: scenario {self.name!r} declares no such parameter "
                                f"(it declares: {declared})")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in given:
                out[p.name] = p.parse(given[p.name], flag)
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
    if not ref.endswith(".py") and not _NAME_RE.fullmatch(ref):
        raise ScenarioError(f"scenario {ref!r}: use a name from {scenarios_dir} (letters, digits, _) or a .py path",
                            field="scenario")
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
    except (Exception, SystemExit) as exc:  # a user's file: any error (sys.exit too) is theirs to fix, in one line
        raise ScenarioError(f"{where_in_scenario(exc, path) or path}: failed to load ({type(exc).__name__}: {exc}); "
                            "fix the scenario file") from None
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise ScenarioError(f"{path}: must define SCENARIO = reportgen.scenario.loader.Scenario(...)")
    check_scenario(scenario, path)
    return dataclasses.replace(scenario, source_file=str(path))


def _put_on_sys_path(folders: list[Path]) -> None:
    for folder in reversed(folders):
        text = str(folder)
        if text not in sys.path:
            sys.path.insert(0, text)


def check_scenario(scenario: Scenario, path: Path) -> None:
    """Refuse what would make a run its own loader rejects: NUL or lone surrogates in text, repeated variant names."""
    problem = _text_problem(scenario.name, "name") or _text_problem(scenario.description, "description")
    seen: set[str] = set()
    for i, v in enumerate(scenario.variants, 1):
        problem = problem or _text_problem(v.name, f"variant {i}: name {v.name!r}")
        if problem:
            break
        problem = _text_problem(v.description, f"variant {v.name!r}: description")
        if not problem and v.name in seen:
            problem = f"variant name {v.name!r} appears twice; variant names must be unique"
        seen.add(v.name)
    if problem:
        raise ScenarioError(f"{path}: {problem}; fix the scenario file")


def _text_problem(value: object, what: str) -> str | None:
    if not isinstance(value, str) or (what.endswith("name") and not value):
        return f"{what} must be a non-empty string" if what.endswith("name") else f"{what} must be a string"
    found = _NOT_TEXT.search(value)
    if found is None:
        return None
    return f"{what} contains a NUL character" if found.group() == "\x00" else f"{what} contains a lone surrogate"


def where_in_scenario(exc: BaseException, path: Path | str) -> str | None:
    """``file:line`` of the deepest frame of ``exc`` in the scenario file ``path``; None when none is in it."""
    target = os.path.realpath(path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == target]
    return f"{path}:{frames[-1].lineno}" if frames else None


def call_scenario(scenario_fn: Callable[..., Any], what: str, *args: Any, source_file: str = "") -> Any:
    """Call a scenario's function; anything it raises (sys.exit too) is the scenario's error, with file and line.

    ``source_file``: the scenario's file, when ``scenario_fn`` is not itself defined there (``Scenario.make``).
    """
    try:
        return scenario_fn(*args)
    except (Exception, SystemExit) as exc:
        code = getattr(scenario_fn, "__code__", None)
        path = source_file or (code.co_filename if code is not None else getattr(scenario_fn, "__module__", "scenario"))
        raise ScenarioError(f"{where_in_scenario(exc, path) or path}: {what} raised {type(exc).__name__}: {exc}; "
                            "fix the scenario file") from None


def parse_shape(text: str) -> tuple[int, ...]:
    """``"4,2048,4096"`` -> (4, 2048, 4096); every dimension a positive integer up to MAX_DIMENSION."""
    shown = repr(text if len(text) <= 40 else text[:30] + "...")
    if text.count(",") + text.count("x") >= MAX_DIMS:
        raise ScenarioError(f"shape {shown}: more than {MAX_DIMS} dimensions; give at most {MAX_DIMS}", field="shape")
    try:
        dims = tuple(int(x) for x in text.replace("x", ",").split(","))
    except ValueError:  # also an integer past Python's 4,300-digit limit
        raise ScenarioError(f"shape {shown}: expected comma-separated positive integers, e.g. 4,2048,4096",
                            field="shape") from None
    if not dims or any(d <= 0 for d in dims):
        raise ScenarioError(f"shape {shown}: every dimension must be a positive integer", field="shape")
    big = next((d for d in dims if d > MAX_DIMENSION), None)
    if big is not None:
        raise ScenarioError(f"shape {shown}: dimension {big} is larger than {MAX_DIMENSION}; use a smaller shape", field="shape")
    return dims


MAX_SWEEP_POINTS = 32
DEFAULT_SWEEP = "default"


def parse_sweep(text: str, scenario: Scenario) -> tuple[tuple[int, ...], ...]:
    """``"1,4096; 64,4096"`` (``;`` or spaces between shapes) or ``default`` (the scenario's) -> the shapes.

    A shape given twice is refused (it would be measured once: a typo), as is a control character (a newline is
    no separator); at most MAX_SWEEP_POINTS shapes.
    """
    control = re.search(r"[\x00-\x1f\x7f]", text)
    if control:
        raise ScenarioError(f"sweep {text[:40]!r}: has the control character {control.group()!r}; separate shapes "
                            "with ';'", field="sweep")
    if text.strip() == DEFAULT_SWEEP:
        if not scenario.default_sweep:
            raise ScenarioError(f"sweep default: scenario {scenario.name!r} declares no default sweep; give the "
                                "shapes, e.g. --sweep '1,4096; 64,4096; 1024,4096'", field="sweep")
        shapes: list[tuple[int, ...]] = list(scenario.default_sweep)
    else:
        parts = [p for p in re.split(r"[;\s]+", text) if p]
        if not parts:
            raise ScenarioError("sweep: expected shapes separated by ';', e.g. 1,4096; 64,4096, or 'default'",
                                field="sweep")
        try:
            shapes = [parse_shape(p) for p in parts[: MAX_SWEEP_POINTS + 1]]
        except ScenarioError as exc:  # the shape came from the sweep, not from a shape of its own
            raise ScenarioError(f"sweep {exc.message}", field="sweep") from None
        twice = next((s for i, s in enumerate(shapes) if s in shapes[:i]), None)
        if twice is not None:
            raise ScenarioError(f"sweep: shape {','.join(map(str, twice))} is given more than once; give each "
                                "shape once", field="sweep")
    unique = list(dict.fromkeys(shapes))
    if len(unique) > MAX_SWEEP_POINTS:
        raise ScenarioError(f"sweep: more than {MAX_SWEEP_POINTS} shapes; split the sweep into several runs",
                            field="sweep")
    return tuple(unique)


def parse_sweep_params(items: Iterable[str], scenario: Scenario) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """``["eps=1e-5,1e-6"]`` (repeated ``--sweep-param``) -> ``(("eps", (1e-05, 1e-06)),)``, typed by the
    scenario's declared parameters; every value once, in the order given."""
    out: dict[str, tuple[Any, ...]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        param = scenario.param(name)
        if not sep or not values.strip():
            raise ScenarioError(f"sweep_param {item!r}: expected NAME=V1,V2,..., e.g. eps=1e-5,1e-6", field="sweep_param")
        if param is None:
            declared = ", ".join(p.name for p in scenario.params) or "none"
            raise ScenarioError(f"sweep_param {name}: scenario {scenario.name!r} declares no such parameter (it "
                                f"declares: {declared})", field="sweep_param")
        typed = [param.parse(v.strip(), f"sweep_param {name}:") for v in values.split(",") if v.strip()]
        out[name] = tuple(dict.fromkeys(typed))
    return tuple(out.items())


def physical_memory_bytes() -> int | None:
    """This machine's memory, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_input_size(shape: tuple[int, ...], dtype: str, memory_bytes: int | None = None) -> None:
    """Refuse a shape whose one input tensor would not fit in half of the memory, before anything is allocated."""
    memory = memory_bytes if memory_bytes is not None else physical_memory_bytes()
    elements = 1
    for d in shape:
        elements *= d
    size = elements * ITEM_BYTES.get(dtype, 4)
    if memory and size > memory // 2:
        raise ScenarioError(f"shape {','.join(map(str, shape))}: one {dtype} input of {elements:.3g} elements is "
                            f"{size / 1e9:,.0f} GB, more than half of this machine's {memory / 1e9:,.0f} GB of "
                            "memory; use a smaller shape", field="shape")


def check_seed(seed: int) -> None:
    """Refuse a seed the random generator cannot take."""
    low, high = SEED_RANGE
    if not low <= seed <= high:
        raise UsageError(f"seed {seed}: must be between {low} and {high}", field="seed")


def check_threads(threads: int | None) -> None:
    """Refuse an intra-op thread count below 1 or above THREADS_PER_CPU per CPU (100,000 threads crash torch)."""
    if threads is None:
        return
    limit = THREADS_PER_CPU * (os.cpu_count() or 1)
    if threads < 1:
        raise UsageError(f"threads {threads}: must be at least 1", field="threads")
    if threads > limit:
        raise UsageError(f"threads {threads}: at most {limit} ({THREADS_PER_CPU} per CPU here); use fewer",
                         field="threads")


def parse_dtype(text: str) -> str:
    """A dtype name reportgen supports."""
    if text not in DTYPES:
        raise ScenarioError(f"dtype {text!r}: choose one of {', '.join(DTYPES)}", field="dtype")
    return text
