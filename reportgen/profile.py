"""``reportgen profile``: run a scenario's variants on one device and store one run bundle.

Order: validate arguments (no torch yet) -> pick the backend -> measure the peak -> make
inputs and the reference -> measure each variant -> write the bundle atomically -> summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from reportgen import __version__
from reportgen.backends import import_torch, select_backend
from reportgen.backends.base import Backend, artifact_for
from reportgen.bundle import TMP_PREFIX, check_label, make_run_id, safe_component, write_bundle
from reportgen.config import Config, load_config
from reportgen.environment import fingerprint, git_info
from reportgen.errors import ExitCode, ScenarioError, UsageError
from reportgen.measure import MeasureSettingsIn, VariantInputs, VariantOutcome, measure_variant
from reportgen.model import (
    SCHEMA_VERSION,
    MeasureSettings,
    Run,
    RunSource,
    ScenarioInfo,
    VariantStatus,
)
from reportgen.scenario import Scenario, call_scenario, load_scenario, parse_dtype, parse_shape
from reportgen.stats import summarize


@dataclass(frozen=True)
class ProfileRequest:
    """A validated ``reportgen profile`` invocation."""

    device: str
    scenario: Scenario
    shape: tuple[int, ...]
    dtype: str
    seed: int
    label: str
    variants: tuple[str, ...]
    settings: MeasureSettingsIn
    threads: int | None
    store: Path
    quiet: bool
    params: dict[str, Any] = field(default_factory=dict)
    """The scenario's declared parameters, typed (``--param``, then config ``params``, then declared defaults)."""
    machine: str | None = None
    baseline: str | None = None
    """``--baseline``/config override of the scenario's declared baseline (validated to be one of its variants)."""

    @staticmethod
    def from_cli(args: argparse.Namespace, store: Path, config: Config | None = None,
                 scenario_ref: str | None = None) -> ProfileRequest:
        """Validate every argument before profiling starts; errors name the flag and the fix."""
        import_torch()  # scenario files import torch: say how to install it, not that the scenario failed
        config = config or load_config(flags={"store": store})
        ref = scenario_ref or (args.scenario[0] if isinstance(args.scenario, list) else args.scenario) or "rmsnorm"
        scenario = load_scenario(ref, config_sources=config.scenarios, project_root=config.root)
        params = scenario.resolve_params(getattr(args, "param_values", None) or {}, config.params)
        baseline = config.baseline
        if baseline is not None and baseline not in scenario.variant_names():
            if config.origin("baseline").startswith("flag"):
                raise ScenarioError(f"--baseline {baseline}: scenario {scenario.name!r} has no such variant; "
                                    f"choose one of {', '.join(scenario.variant_names())}")
            baseline = None  # a config-wide baseline another scenario has
        shape = parse_shape(args.shape) if args.shape else scenario.default_shape
        dtype = parse_dtype(args.dtype) if args.dtype else scenario.default_dtype
        if dtype not in scenario.tolerances:
            raise ScenarioError(f"--dtype {dtype}: scenario {scenario.name!r} declares no tolerance for it; "
                                f"use one of {', '.join(sorted(scenario.tolerances))} or add it to the scenario")
        names = scenario.variant_names()
        chosen = tuple(x.strip() for x in args.variants.split(",")) if args.variants else tuple(names)
        unknown = [x for x in chosen if x not in names]
        if unknown or not chosen:
            raise ScenarioError(f"--variants {args.variants!r}: unknown {unknown}; scenario "
                                f"{scenario.name!r} has {', '.join(names)}")
        _check_positive("--samples", args.samples, minimum=2)
        _check_positive("--warmup", args.warmup, minimum=0)
        _check_positive("--threads", args.threads, minimum=1)
        check_label(args.label)
        settings = MeasureSettingsIn(samples=args.samples or 50,
                                     warmup=3 if args.warmup is None else args.warmup)
        return ProfileRequest(config.device if getattr(args, "device", None) is None else args.device, scenario,
                              shape, dtype, args.seed, args.label, chosen, settings, args.threads, store, args.quiet,
                              params, config.machine, baseline)


def _check_positive(flag: str, value: int | None, minimum: int) -> None:
    if value is not None and value < minimum:
        raise UsageError(f"{flag} {value}: must be at least {minimum}")


class ProgressPrinter:
    """One line per phase on stderr, with the elapsed time: readable in a terminal and in CI logs.

    In a terminal each line carries a bar of the variants done so far. Only these lines reach the
    terminal while profiling: third-party output goes to the run's log (see ``captured_output``).
    """

    BAR_WIDTH = 20

    def __init__(self, total: int, quiet: bool, stream: TextIO | None = None) -> None:
        self.total, self.quiet, self.stream = total, quiet, stream if stream is not None else sys.stderr
        self.index = 0
        self.t0 = time.monotonic()

    def start_variant(self) -> None:
        self.index += 1

    def bar(self) -> str:
        """``[#####---------------] `` for the variants finished so far (in a terminal only)."""
        if not self.index or not _is_tty(self.stream):
            return ""
        filled = round(self.BAR_WIDTH * (self.index - 1) / max(self.total, 1))
        return "[" + "#" * filled + "-" * (self.BAR_WIDTH - filled) + "] "

    def __call__(self, message: str) -> None:
        if not self.quiet:
            where = f"[{self.index}/{self.total}] " if self.index else ""
            print(f"{time.monotonic() - self.t0:6.1f}s {self.bar()}{where}{message}", file=self.stream, flush=True)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def captured_output(log_path: Path) -> Iterator[TextIO]:
    """Send file descriptors 1 and 2 (C++ libraries such as Kineto included) to ``log_path``; yield a stream
    on the original stderr for reportgen's own progress lines. Everything is restored on exit."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = os.fdopen(os.dup(saved[2]), "w", buffering=1, encoding="utf-8", errors="replace")
    with open(log_path, "ab") as log:
        try:
            for fd in (1, 2):
                os.dup2(log.fileno(), fd)
            yield terminal
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            terminal.close()


LOG_FILE = "profile.log"
"""The bundle member holding what libraries printed while profiling (Kineto, inductor, the scenario)."""


def run_profile(request: ProfileRequest) -> int:
    """Profile, store the bundle, print a summary; exit code 4 when any variant failed."""
    backend = select_backend(request.device)
    import torch

    if request.threads:
        torch.set_num_threads(request.threads)
    created = datetime.now(timezone.utc).replace(microsecond=0)
    with tempfile.TemporaryDirectory(prefix=TMP_PREFIX + "work-") as work:
        log = Path(work) / LOG_FILE
        with captured_output(log) as terminal:
            progress = ProgressPrinter(len(request.variants), request.quiet, terminal)
            params = ", ".join(f"{k}={v}" for k, v in request.params.items())
            progress(f"device {backend.kind.value} ({backend.device_name()}), scenario {request.scenario.name}, "
                     f"shape {request.shape}, {request.dtype}" + (f", {params}" if params else "")
                     + (f", machine {request.machine}" if request.machine else ""))
            progress("measuring the bandwidth ceiling")
            peak = backend.measure_peak()
            outcomes = _measure_all(request, backend, Path(work), progress)
        run = _assemble(request, backend, peak, created, outcomes, torch)
        files = _bundle_files(outcomes)
        if log.stat().st_size:
            files[LOG_FILE] = log.read_bytes()
        folder = write_bundle(request.store, _with_artifacts(run, outcomes, files), files)
    _print_summary(run, folder)
    return ExitCode.OK if run.ok else ExitCode.VARIANT_FAILED


def _measure_all(request: ProfileRequest, backend: Backend, work: Path, progress: ProgressPrinter
                 ) -> list[VariantOutcome]:
    import torch

    from reportgen.measure import clone_args

    sc = request.scenario
    dtype = getattr(torch, request.dtype)
    args = call_scenario(sc, "make_inputs", sc.make, request.shape, dtype, request.seed, backend.torch_device(),
                         request.params)
    reference = call_scenario(sc, "reference", sc.reference, *clone_args(args))
    itemsize = torch.empty((), dtype=dtype).element_size()
    inputs = VariantInputs(args, reference, sc.tolerances[request.dtype],
                           call_scenario(sc, "bytes_per_call", sc.bytes_per_call, request.shape, itemsize),
                           call_scenario(sc, "flops_per_call", sc.flops_per_call, request.shape),
                           sc.source_file)
    outcomes = []
    for variant in sc.variants:
        if variant.name not in request.variants:
            continue
        progress.start_variant()
        outcomes.append(measure_variant(backend, variant, inputs, request.settings,
                                        work / safe_component(variant.name), progress))
    return outcomes


def _assemble(request: ProfileRequest, backend: Backend, peak: Any, created: datetime,
              outcomes: list[VariantOutcome], torch: Any) -> Run:
    created_utc = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    s = request.settings
    return Run(
        schema_version=SCHEMA_VERSION,
        run_id=make_run_id(created, backend.kind.value, request.label, secrets.token_hex(4)),
        created_utc=created_utc,
        label=request.label,
        source=RunSource.PROFILE,
        reportgen_version=__version__,
        device=backend.kind,
        git=git_info(),
        environment=dataclasses.replace(fingerprint(torch, backend.device_name(), backend.environment_extras()),
                                        machine=request.machine),
        peak=peak,
        scenario=ScenarioInfo(request.scenario.name, request.scenario.description, {
            "shape": ",".join(str(d) for d in request.shape), "dtype": request.dtype, "seed": str(request.seed),
            **{p.name: p.show(request.params[p.name]) for p in request.scenario.params}}),
        variants=tuple(o.result for o in outcomes),
        settings=MeasureSettings(warmup_iters=s.warmup, samples=s.samples, calls_per_sample=s.calls_per_sample or 0,
                                 profile_wait=s.profile_wait, profile_warmup=s.profile_warmup,
                                 profile_active=s.profile_active),
    )


def _bundle_files(outcomes: list[VariantOutcome]) -> dict[str, Path | bytes]:
    """Bundle-relative path -> content: each trace gzip-compressed, device artifacts copied."""
    files: dict[str, Path | bytes] = {}
    for o in outcomes:
        name = safe_component(o.result.name)
        if o.trace_file is not None:
            files[f"traces/{name}.pt.trace.json.gz"] = gzip.compress(o.trace_file.read_bytes(), mtime=0)
        for path, _kind in o.artifacts:
            files[f"artifacts/{name}/{safe_component(path.name)}"] = path
    return files


def _with_artifacts(run: Run, outcomes: list[VariantOutcome], files: dict[str, Path | bytes]) -> Run:
    variants = []
    for o in outcomes:
        name = safe_component(o.result.name)
        trace_rel = f"traces/{name}.pt.trace.json.gz"
        arts = tuple(artifact_for(p, f"artifacts/{name}/{safe_component(p.name)}", kind) for p, kind in o.artifacts)
        variants.append(dataclasses.replace(o.result, trace_path=trace_rel if trace_rel in files else None,
                                            artifacts=arts))
    return dataclasses.replace(run, variants=tuple(variants))


def _print_summary(run: Run, folder: Path) -> None:
    base = run.variant("naive") or (run.variants[0] if run.variants else None)
    base_summary = summarize(base.samples_us) if base else None
    print(f"run {run.run_id} ({run.device.value}, {run.scenario.parameters['shape']} {run.scenario.parameters['dtype']})")
    for v in run.variants:
        s = summarize(v.samples_us)
        if v.status is VariantStatus.FAILED or s is None:
            print(f"  {v.name:<10} FAILED  {v.error}")
            continue
        speed = f"{base_summary.median_us / s.median_us:5.2f}x vs {base.name}" if base_summary and base else ""
        mark = "ok" if v.status is VariantStatus.OK else "WRONG RESULT"
        print(f"  {v.name:<10} {s.median_us:12.1f} us/call  (n={s.n}, p10-p90 {s.p10_us:.1f}-{s.p90_us:.1f})"
              f"  {speed}  {mark}")
    print(f"stored in {folder}")
