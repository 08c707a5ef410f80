"""``reportgen import``: turn traces a user already has into a run bundle, without re-running anything.

Accepted inputs (docs/importing.md):

- one Chrome/Kineto trace file, ``.json`` or ``.json.gz``;
- a folder of trace files (one per rank or per variant): each file becomes a variant;
- a device profiler's output folder, as a device module declares it (``reportgen.devices``; today
  TorchNeuron's ``profile_output/``: ``<instance>_pid_<pid>/<timestamp>/trace.json`` with
  ``.neff``/``.ntff``/``.pb`` beside it): each trace becomes a variant and the device files are
  kept as downloadable artifacts.

Stages, in order: find the inputs; read and check every trace (each is copied, gzip-compressed,
into a hidden staging folder in the same pass); build the Run; only then write the bundle with
``write_bundle`` (atomic). Any error before the last step leaves the store as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import gzip
import os
import queue
import shutil
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from reportgen import devices
from reportgen.devices.spec import Device, DeviceSummary, ImportLayout
from reportgen.errors import ExitCode, TraceError
from reportgen.model.breakdown import TraceBreakdown
from reportgen.model.run import (
    Artifact,
    DeviceKind,
    DevicePeak,
    Environment,
    GitInfo,
    Run,
    RunSource,
    ScenarioInfo,
    TimeBasis,
    VariantResult,
    VariantStatus,
)
from reportgen.store.bundle import (
    TRACE_SUFFIX,
    artifact_member,
    cannot_write,
    check_store,
    format_utc,
    make_temp_dir,
    new_run,
    safe_component,
    trace_member,
    write_bundle,
)
from reportgen.text.terminal import terminal_safe
from reportgen.traces.breakdown import build_breakdown
from reportgen.traces.optable import OpTable, build_op_table, per_step
from reportgen.traces.reader import Trace, max_trace_bytes, read_trace_copying

MAX_BASE_TIME_NS = 253402300799 * 10**9
"""9999-12-31T23:59:59Z: a larger baseTimeNanoseconds is not a time (and datetime cannot hold it)."""
TRACE_GZIP_LEVEL = 3
"""zlib level of the stored trace copy: 2.6x faster than 6 for about 20 % more bytes on Kineto JSON."""
_TRACE_SUFFIXES = (".gz", ".json", ".trace", ".pt")


class Layout(str, Enum):
    """What the imported path was."""

    FILE = "file"
    FOLDER = "folder"
    DEVICE_FOLDER = "device-folder"
    """A device profiler's output folder (``ImportPlan.device`` says whose)."""


@dataclass(frozen=True)
class TraceInput:
    """One trace file to import, the variant name it will get, and the device files found beside it."""

    path: Path
    variant: str
    artifacts: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ImportPlan:
    """Everything found at the path the user gave, before anything is read."""

    source: Path
    layout: Layout
    inputs: tuple[TraceInput, ...]
    notes: tuple[str, ...] = ()
    device: tuple[Device, ImportLayout] | None = None
    """For a DEVICE_FOLDER: the device and its folder layout."""

    @property
    def layout_name(self) -> str:
        """The layout as stored in the run (``file``, ``folder``, or the device layout's name)."""
        return self.device[1].name if self.device else self.layout.value


# ---------------------------------------------------------------------------------------------
# Stage 1: find the inputs.


def plan_import(path: Path) -> ImportPlan:
    """Find the trace files (and Neuron artifacts) at ``path``; nothing is read yet."""
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder; pass a trace (.json, .json.gz) or a profile_output/ folder")
    if path.is_file():
        return ImportPlan(path, Layout.FILE, (TraceInput(path, variant_name_for(path)),))
    if not path.is_dir():  # a FIFO, socket or device: reading it could block forever, listing it fails
        raise TraceError(f"{path}: is not a regular file or a folder; pass a trace file (.json, .json.gz) or a "
                         "profile_output/ folder")
    for device, layout in devices.import_layouts():
        found = layout.find_traces(path)
        if found:
            inputs = _unique([TraceInput(t, _folder_variant(path, t), layout.artifacts(t.parent)) for t in found])
            skipped = [p.name for t in found for p in t.parent.iterdir() if p.is_symlink()]
            notes = (f"skipped symbolic links in the profile folder: {', '.join(sorted(skipped))}",) if skipped else ()
            return ImportPlan(path, Layout.DEVICE_FOLDER, inputs, notes, (device, layout))
    named = sorted(p for p in path.iterdir() if not p.name.startswith(".") and p.name.lower().endswith((".json", ".json.gz")))
    files = [p for p in named if p.is_file() and not p.is_symlink()]  # a link could pull in a file from anywhere
    if not files:
        layouts = " or ".join(layout.description for _, layout in devices.import_layouts())
        raise TraceError(f"{path}: no trace files (*.json, *.json.gz) and no {layouts} "
                         "in this folder; pass a trace file or a profile_output/ folder")
    links = [p.name for p in named if p.is_symlink()]
    notes = (f"skipped symbolic links in the folder: {', '.join(links)}",) if links else ()
    return ImportPlan(path, Layout.FOLDER, _unique([TraceInput(p, variant_name_for(p)) for p in files]), notes)


def variant_name_for(path: Path) -> str:
    """A variant name from a trace file name: ``rank0.pt.trace.json.gz`` -> ``rank0``, made path-safe."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in _TRACE_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return safe_component(name)


def _folder_variant(root: Path, trace_file: Path) -> str:
    """A device folder's variant name: the trace's folder path below the root (``pid_1-20260101``)."""
    rel = trace_file.parent.relative_to(root).parts
    return safe_component("-".join(rel) if rel else root.name)


def _unique(inputs: list[TraceInput]) -> tuple[TraceInput, ...]:
    """Make variant names unique by numbering repeats (``a``, ``a-2``, ``a-3``)."""
    seen: set[str] = set()
    out = []
    for item in inputs:
        name, n = item.variant, 1
        while name in seen:
            n += 1
            name = f"{item.variant}-{n}"
        seen.add(name)
        out.append(TraceInput(item.path, name, item.artifacts))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Stage 2: read every trace, copying it compressed into the staging folder in the same pass.


class _GzipWriter:
    """Compresses bytes into a gzip file (mtime 0, no name) on a second thread while the parser runs."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="reportgen-gzip", daemon=True)
        self.thread.start()

    def __call__(self, block: bytes) -> None:
        if self.error is None:
            self.blocks.put(block)

    def _run(self) -> None:
        got_end = False
        try:
            with open(self.dest, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                             compresslevel=TRACE_GZIP_LEVEL) as gz:
                while (block := self.blocks.get()) is not None:
                    gz.write(block)
                got_end = True  # closing can still fail (a full disk): the end marker is already taken
        except BaseException as exc:  # noqa: BLE001 - reported by close()
            self.error = exc
            while not got_end and self.blocks.get() is not None:
                pass

    def close(self) -> None:
        """Finish the file; raise if writing failed."""
        self.blocks.put(None)
        self.thread.join()
        if isinstance(self.error, OSError):
            raise cannot_write(self.error, self.dest)
        if self.error is not None:
            raise TraceError(f"{self.dest}: cannot write the trace copy ({self.error})")


def read_and_stage(item: TraceInput, staging: Path, limit: int) -> tuple[Trace, Path]:
    """Read one trace and leave a gzip copy of it in ``staging``; the copy is deleted with ``staging``."""
    dest = staging / f"{item.variant}{TRACE_SUFFIX}"
    writer = _GzipWriter(dest)
    try:
        trace = read_trace_copying(item.path, limit, writer)
    finally:
        writer.close()
    return trace, dest


# ---------------------------------------------------------------------------------------------
# Stage 3: the Run.


@dataclass(frozen=True)
class ImportRequest:
    """What to import and how to label it."""

    path: Path
    label: str = ""
    device: str = "auto"


def import_run(request: ImportRequest, store: Path, now: datetime | None = None) -> Path:
    """Import ``request.path`` into ``store`` as one new run bundle; returns the bundle folder."""
    plan = plan_import(request.path)
    limit = max_trace_bytes()
    check_store(store)
    store_existed = store.exists()
    try:
        store.mkdir(parents=True, exist_ok=True)
        staging = make_temp_dir(store, "import")  # named for this process: a killed import's is removed later
    except OSError as exc:
        raise cannot_write(exc, store) from None
    try:
        staged: list[tuple[TraceInput, Trace, Path, OpTable]] = []
        breakdowns: dict[str, TraceBreakdown | None] = {}
        for item in plan.inputs:
            trace, copy = read_and_stage(item, staging, limit)
            with _gc_paused():  # events and op frames hold no cycles; a collection would only rescan them
                table = build_op_table(trace)
                breakdowns[item.variant] = build_breakdown(trace, table.device_launchers, table.steps)
            # Keep what the run needs from the trace, not its events: a folder may hold many big ranks.
            staged.append((item, dataclasses.replace(trace, events=()), copy,
                           dataclasses.replace(table, device_launchers=(), steps=())))
            del trace
        summarize = plan.device[1].summarize if plan.device else None
        summaries = ({item.variant: summarize(item.path, len(table.step_durations_us),
                                              staging / "device-summary" / item.variant)
                      for item, _, _, table in staged} if summarize else {})
        run, files = build_run(plan, staged, summaries, request, now or datetime.now(timezone.utc))
        run = dataclasses.replace(run, variants=tuple(dataclasses.replace(v, breakdown=breakdowns.get(v.name))
                                                      for v in run.variants),
                                  notes=run.notes + tuple(f"{name}: no breakdown: the trace's times overflow a float"
                                                          for name, b in breakdowns.items() if b is None))
        return write_bundle(store, run, files)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not store_existed:
            _remove_if_empty(store)


def build_run(plan: ImportPlan, staged: list[tuple[TraceInput, Trace, Path, OpTable]],
              summaries: Mapping[str, DeviceSummary], request: ImportRequest, now: datetime
              ) -> tuple[Run, dict[str, Path | bytes]]:
    """The Run and the files of its bundle, from traces already read (no disk access)."""
    device, device_notes = _device_kind(plan, [t for _, t, _, _ in staged], request.device)
    files: dict[str, Path | bytes] = {}
    variants = []
    notes = [f"imported from {plan.source} ({plan.layout_name}, {len(staged)} trace file(s)) by reportgen import",
             "not recorded in a trace, so shown as 'unknown': host name, platform, Python, CPU model, git revision",
             *plan.notes, *device_notes]
    for item, trace, copy, table in staged:
        trace_rel = trace_member(item.variant)
        files[trace_rel] = copy
        artifacts = []
        for art in item.artifacts:
            rel = artifact_member(item.variant, art.name)
            files[rel] = art
            artifacts.append(Artifact(rel, art.suffix.lstrip(".").lower(), art.stat().st_size))
        summary = summaries.get(item.variant)
        for name, raw in (summary.raw.items() if summary else ()):
            rel = artifact_member(item.variant, name)
            files[rel] = raw
            artifacts.append(Artifact(rel, summary.artifact_kind if summary else "", len(raw)))
        result = variant_result(item, trace, table, trace_rel, tuple(artifacts))
        if summary is not None:
            result = dataclasses.replace(result, device_evidence=summary.evidence(result.device_event_count))
        variants.append(result)
        notes.extend(_trace_notes(item, trace, table, summary))
    first = staged[0][1]
    run = new_run(
        now, device, request.label, RunSource.IMPORT, f"{plan.source}|{os.getpid()}|{now.timestamp()}",
        git=GitInfo(None, None),
        environment=Environment(hostname="unknown", platform="unknown", python_version="unknown",
                                cpu_model="unknown", cpu_count=0,
                                device_name=first.device_names[0] if first.device_names else None,
                                device_extras=devices.extras_from_trace(first)),
        peak=DevicePeak(None, None, "not known for imported traces"),
        scenario=ScenarioInfo("import", plan.source.name, {"source": plan.source.name, "layout": plan.layout_name,
                                                           "traces": str(len(staged))}),
        variants=tuple(variants),
        settings=None,
        notes=tuple(notes),
    )
    return run, files


def variant_result(item: TraceInput, trace: Trace, table: OpTable, trace_rel: str,
                   artifacts: tuple[Artifact, ...]) -> VariantResult:
    """One imported trace as a variant: op table, counts, and ProfilerStep durations as samples."""
    device_basis = table.device_work_count > 0
    return VariantResult(
        name=item.variant,
        status=VariantStatus.OK,
        description=_describe(item, trace, table),
        samples_us=table.step_durations_us,
        calls_per_sample=1,
        correctness=None,
        ops=table.rows,
        time_basis=TimeBasis.DEVICE if device_basis else TimeBasis.CPU,
        profiled_steps=len(table.step_durations_us),
        op_dispatch_count=per_step(table.op_dispatch_count, len(table.step_durations_us)),
        aten_op_count=per_step(table.aten_op_count, len(table.step_durations_us)),
        device_event_count=per_step(table.device_work_count, len(table.step_durations_us))
        if trace.has_device_lane else None,
        trace_path=trace_rel,
        artifacts=artifacts,
    )


def _describe(item: TraceInput, trace: Trace, table: OpTable) -> str:
    parts = [f"imported from {item.path.name}: {table.host_op_count} host ops"]
    if table.step_durations_us:
        parts.append(f"timing samples are the {len(table.step_durations_us)} ProfilerStep durations "
                     "(one sample per step, not per call)")
    else:
        parts.append("no ProfilerStep events, so no timing samples")
    if not trace.has_device_lane:
        parts.append("the trace has no device lane: device time is not measured, the table shows CPU time")
    elif table.device_work_count == 0:
        parts.append("the device lane holds no kernels or copies: the table shows CPU time")
    else:
        parts.append(f"{table.device_work_count} device kernels/copies, "
                     f"{table.device_work_us:.1f} µs of device time")
    return "; ".join(parts)


def _trace_notes(item: TraceInput, trace: Trace, table: OpTable, summary: DeviceSummary | None) -> list[str]:
    notes = []
    if not trace.has_device_lane:
        notes.append(f"{item.variant}: no device lane in the trace; device time is not shown as data")
    if table.unattributed_device_count:
        notes.append(f"{item.variant}: {table.unattributed_device_count} device event(s) link to no host op; "
                     "they are one row of their own")
    if trace.rank is not None:
        notes.append(f"{item.variant}: rank {trace.rank} of {trace.world_size}" if trace.world_size is not None
                     else f"{item.variant}: rank {trace.rank} (world size not recorded in the trace)")
    if trace.base_time_ns is not None and 0 < trace.base_time_ns < MAX_BASE_TIME_NS:
        captured = format_utc(datetime.fromtimestamp(trace.base_time_ns // 10**9, timezone.utc))
        notes.append(f"{item.variant}: captured at {captured} (the trace's baseTimeNanoseconds)")
    if item.artifacts:
        names = ", ".join(a.name for a in item.artifacts)
        notes.append(f"{item.variant}: Neuron files kept as artifacts: {names}")
    if summary is not None:
        notes.extend(f"{item.variant}: {note}" for note in summary.notes)
    return notes


def _device_kind(plan: ImportPlan, traces: list[Trace], override: str) -> tuple[DeviceKind, list[str]]:
    """The run's device: --device if given, else the traces' common hint (neuron for a profile_output/)."""
    if override and override != "auto":
        return DeviceKind(override), [f"device set by --device {override}"]
    hints = {t.device_kind_hint for t in traces}
    if plan.device is not None:
        device, layout = plan.device
        return device.kind, [f"device is {device.kind.value}: the folder has the {layout.description} layout"]
    if len(hints) == 1 and (hint := hints.pop()) in {k.value for k in DeviceKind}:
        return DeviceKind(hint), [f"device {hint} inferred from the trace contents (override with --device)"]
    return DeviceKind.UNKNOWN, [f"the traces disagree on the device ({', '.join(sorted(hints))}); "
                                "set it with --device"]


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a block (restored afterwards, even on error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------
# The CLI edge.


def run_import_command(request: ImportRequest, store: Path) -> int:
    """``reportgen import``: import ``request`` into ``store``, print the new run id and its folder."""
    folder = import_run(request, store)
    print(f"imported run {terminal_safe(folder.name)}")
    print(terminal_safe(folder))
    return int(ExitCode.OK)
