"""``reportgen profile``: run a scenario's variants on one device and store one run bundle.

Order: validate arguments (no torch yet) -> pick the backend -> measure the peak -> make
inputs and the reference -> measure each variant -> write the bundle atomically -> summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from reportgen import catalog
from reportgen.analysis.run_view import baseline_name
from reportgen.analysis.stats import summarize
from reportgen.devices import select_backend
from reportgen.devices.backend import Backend, artifact_for
from reportgen.devices.host import fingerprint, git_info
from reportgen.errors import BundleError, ExitCode
from reportgen.model.run import DevicePeak, MeasureSettings, Run, RunSource, ScenarioInfo, SweepPoint, VariantStatus
from reportgen.profile.measure import MeasureContext, MeasureSettingsIn, VariantInputs, VariantOutcome, measure_variants
from reportgen.profile.timing import round_blocks
from reportgen.scenario.loader import Scenario, call_scenario
from reportgen.store.layout import NewRunRequest, artifact_member, new_run, safe_component, trace_member
from reportgen.store.writer import TMP_PREFIX, StoreWriteError, cannot_write, make_temp_dir, remove_stale_temp_dirs, write_bundle
from reportgen.text.terminal import terminal_safe


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
    """The user's name for the machine (recorded in the run's environment); None: unnamed."""
    sweep: tuple[tuple[int, ...], ...] = ()
    """Shapes timed besides the profiled one (``--sweep``); empty: no sweep."""
    sweep_params: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    """Declared parameters swept (``--sweep-param``): every combination at every sweep shape (or the shape)."""

    def sweep_points(self) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
        """(shape, parameter values) of every sweep point: the shapes × every combination of swept parameters."""
        if not self.sweep and not self.sweep_params:
            return []
        shapes = self.sweep or (self.shape,)
        combos: list[dict[str, Any]] = [{}]
        for name, values in self.sweep_params:
            combos = [{**c, name: v} for c in combos for v in values]
        return [(shape, combo) for shape in shapes for combo in combos]


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
        """The next unit of work starts: a variant's preparation, the timing rounds, a profile, a sweep shape."""
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
            print(f"{time.monotonic() - self.t0:6.1f}s {self.bar()}{where}{terminal_safe(message)}",
                  file=self.stream, flush=True)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
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
    with _work_folder() as work:
        log = work / LOG_FILE
        with captured_output(log) as terminal:
            progress = ProgressPrinter(2 * len(request.variants) + 1 + len(request.sweep_points()), request.quiet,
                                       terminal)
            params = ", ".join(f"{k}={v}" for k, v in request.params.items())
            progress(f"device {backend.kind.value} ({backend.device_name()}), scenario {request.scenario.name}, "
                     f"shape {request.shape}, {request.dtype}" + (f", {params}" if params else "")
                     + (f", machine {request.machine}" if request.machine else ""))
            progress("measuring the bandwidth and compute ceilings")
            peak = _with_compute_roof(backend.measure_peak(), backend, request.dtype)
            outcomes = _measure_all(request, backend, work, progress)
            points = _measure_sweep(request, backend, progress)
        run = dataclasses.replace(_assemble(request, backend, peak, created, outcomes, torch), sweep=points)
        files = _bundle_files(outcomes)
        if log.stat().st_size:
            files[LOG_FILE] = log.read_bytes()
        folder = _store_or_keep(request.store, _with_artifacts(run, outcomes, files), files)
    _print_summary(run, folder)
    return ExitCode.OK if run.ok else ExitCode.VARIANT_FAILED


WORK_PREFIX = TMP_PREFIX + "work-"
UNSAVED_FOLDER = "reportgen-unsaved-runs"


@contextlib.contextmanager
def _work_folder() -> Iterator[Path]:
    """A folder for raw traces in the system temp folder, named for this process; a killed profile's is removed."""
    tmp = Path(tempfile.gettempdir())
    try:
        remove_stale_temp_dirs(tmp, WORK_PREFIX)
        work = make_temp_dir(tmp, "profile", WORK_PREFIX)
    except OSError as exc:
        raise cannot_write(exc, tmp) from None
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _store_or_keep(store: Path, run: Run, files: dict[str, Path | bytes]) -> Path:
    """Write the bundle to the store; if the store cannot be written, keep the measurement elsewhere and say where."""
    try:
        bundle = write_bundle(store, run, files)
    except StoreWriteError as exc:
        fallback = Path(tempfile.gettempdir()) / UNSAVED_FOLDER
        try:
            kept = write_bundle(fallback, run, files)
        except StoreWriteError as again:
            raise StoreWriteError(exc.path, f"{exc.reason}; saving the run to {fallback} failed too "
                                            f"({again.reason}), so the measurement is lost") from None
        raise BundleError(f"{exc.path}: cannot write ({exc.reason}); the run was saved to {kept} instead: "
                          "move that folder into the store when there is room") from None
    catalog.record(store, run, bundle)
    return bundle


def _measure_all(request: ProfileRequest, backend: Backend, work: Path, progress: ProgressPrinter
                 ) -> list[VariantOutcome]:
    import torch

    from reportgen.profile.timing import clone_args

    sc = request.scenario
    dtype = getattr(torch, request.dtype)
    src = sc.source_file
    args = call_scenario(sc.make, "make_inputs", request.shape, dtype, request.seed, backend.torch_device(),
                         request.params, source_file=src)
    reference = call_scenario(sc.reference, "reference", *clone_args(args), source_file=src)
    itemsize = torch.empty((), dtype=dtype).element_size()
    inputs = VariantInputs(args, reference, sc.tolerances[request.dtype],
                           call_scenario(sc.bytes_per_call, "bytes_per_call", request.shape, itemsize, source_file=src),
                           call_scenario(sc.flops_per_call, "flops_per_call", request.shape, source_file=src),
                           src)
    chosen = [(v, work / safe_component(v.name)) for v in sc.variants if v.name in request.variants]
    return measure_variants(MeasureContext(backend, inputs, request.settings, progress), chosen,
                            step=progress.start_variant)


def _with_compute_roof(peak: DevicePeak, backend: Backend, dtype: str) -> DevicePeak:
    """``peak`` with the device's compute roof for ``dtype`` (measured or vendor), where it has one."""
    flops, source = backend.compute_peak(dtype)
    return dataclasses.replace(peak, flops_per_s=flops if flops is not None else peak.flops_per_s, flops_source=source)


def _measure_sweep(request: ProfileRequest, backend: Backend, progress: ProgressPrinter) -> tuple[SweepPoint, ...]:
    """Every shape of ``request.sweep``, each point's variants interleaved (see ``measure_sweep``)."""
    wanted = request.sweep_points()
    if not wanted:
        return ()
    from reportgen.profile.sweep import SweepPlan, compiled_variants, measure_point

    plan = SweepPlan(request.scenario, compiled_variants(backend, request.scenario, request.variants),
                     request.dtype, request.seed, request.params, warmup=request.settings.warmup)
    points = []
    for i, (shape, overrides) in enumerate(wanted, 1):
        progress.start_variant()
        shown = {p.name: p.show(overrides[p.name]) for p in request.scenario.params if p.name in overrides}
        progress(f"sweep {i}/{len(wanted)}: shape {','.join(str(d) for d in shape)}"
                 + "".join(f", {k}={v}" for k, v in shown.items()))
        plan_here = dataclasses.replace(plan, params={**request.params, **overrides})
        points.append(dataclasses.replace(measure_point(backend, plan_here, shape, progress), params=shown))
    return tuple(points)


def _assemble(request: ProfileRequest, backend: Backend, peak: Any, created: datetime,
              outcomes: list[VariantOutcome], torch: Any) -> Run:
    s = request.settings
    return new_run(NewRunRequest(
        created, backend.kind, request.label, RunSource.PROFILE, secrets.token_hex(4),
        git=git_info(),
        environment=dataclasses.replace(fingerprint(torch, backend.device_name(), backend.environment_extras()),
                                        machine=request.machine),
        peak=peak,
        scenario=ScenarioInfo(request.scenario.name, request.scenario.description, {
            "shape": ",".join(str(d) for d in request.shape), "dtype": request.dtype, "seed": str(request.seed),
            **{p.name: p.show(request.params[p.name]) for p in request.scenario.params}},
            baseline=request.scenario.baseline_among(request.variants)),
        variants=tuple(o.result for o in outcomes),
        settings=MeasureSettings(warmup_iters=s.warmup, samples=s.samples, calls_per_sample=s.calls_per_sample or 0,
                                 profile_wait=s.profile_wait, profile_warmup=s.profile_warmup,
                                 profile_active=s.profile_active, cache_flush_bytes=backend.cache_flush_bytes(),
                                 timing_rounds=len(round_blocks(s.samples))),
    ))


def _bundle_files(outcomes: list[VariantOutcome]) -> dict[str, Path | bytes]:
    """Bundle-relative path -> content: each trace gzip-compressed, device artifacts copied."""
    files: dict[str, Path | bytes] = {}
    for o in outcomes:
        if o.trace_file is not None:
            files[trace_member(o.result.name)] = gzip.compress(o.trace_file.read_bytes(), mtime=0)
        for path, _kind in o.artifacts:
            files[artifact_member(o.result.name, path.name)] = path
    return files


def _with_artifacts(run: Run, outcomes: list[VariantOutcome], files: dict[str, Path | bytes]) -> Run:
    variants = []
    for o in outcomes:
        trace_rel = trace_member(o.result.name)
        arts = tuple(artifact_for(p, artifact_member(o.result.name, p.name), kind) for p, kind in o.artifacts)
        variants.append(dataclasses.replace(o.result, trace_path=trace_rel if trace_rel in files else None,
                                            artifacts=arts))
    return dataclasses.replace(run, variants=tuple(variants))


def _print_summary(run: Run, folder: Path) -> None:
    """The run's table on stdout; every string from the scenario or the run through ``terminal_safe``."""
    base_name = baseline_name(run)
    base = run.variant(base_name) if base_name else None
    base_summary = summarize(base.samples_us) if base else None
    params = run.scenario.parameters
    print(terminal_safe(f"run {run.run_id} ({run.device.value}, {params['shape']} {params['dtype']})"))
    for v in run.variants:
        s = summarize(v.samples_us)
        name = terminal_safe(v.name)
        if v.status is VariantStatus.FAILED or s is None:
            print(f"  {name:<10} FAILED  {terminal_safe(v.error)}")
            continue
        speed = (f"{base_summary.median_us / s.median_us:5.2f}x vs {terminal_safe(base.name)}"
                 if base_summary and base else "")
        mark = "ok" if v.status is VariantStatus.OK else "WRONG RESULT"
        print(f"  {name:<10} {s.median_us:12.1f} us/call  (n={s.n}, p10-p90 {s.p10_us:.1f}-{s.p90_us:.1f})"
              f"  {speed}  {mark}")
    print(f"stored in {terminal_safe(folder)}")
