"""``reportgen import``: turn traces a user already has into a run bundle, without re-running anything.

Accepted inputs (docs/importing.md):

- one Chrome/Kineto trace file, ``.json`` or ``.json.gz``;
- a folder of trace files (one per rank or per variant): each file becomes a variant;
- a device profiler's output folder, as a device module declares it (``reportgen.devices``; today
  TorchNeuron's ``profile_output/``: ``<instance>_pid_<pid>/<timestamp>/trace.json`` with
  ``.neff``/``.ntff``/``.pb`` beside it): each trace becomes a variant and the device files are
  kept as downloadable artifacts.

Stages, in order: find the inputs (``reportgen.traces.import_plan``); read and check every trace (each
is copied, gzip-compressed, into a hidden staging folder in the same pass: ``reportgen.traces.staging``);
build the Run (here); only then write the bundle with ``write_bundle`` (atomic). Any error before the
last step leaves the store as it was.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from reportgen import catalog, devices
from reportgen.devices.spec import DeviceSummary
from reportgen.errors import ExitCode
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
from reportgen.store.layout import NewRunRequest, artifact_member, format_utc, new_run, trace_member
from reportgen.store.writer import cannot_write, check_store, release_staging, staging_temp_dir, write_bundle
from reportgen.text.terminal import terminal_safe
from reportgen.traces.breakdown import build_breakdown
from reportgen.traces.events import Trace
from reportgen.traces.import_plan import ImportPlan, TraceInput, plan_import
from reportgen.traces.optable import OpTable, build_op_table, per_step
from reportgen.traces.reader import gc_paused, max_trace_bytes, max_trace_events
from reportgen.traces.staging import read_and_stage

MAX_BASE_TIME_NS = 253402300799 * 10**9
"""9999-12-31T23:59:59Z: a larger baseTimeNanoseconds is not a time (and datetime cannot hold it)."""


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
    max_trace_events()  # a bad value is refused before any work
    check_store(store)
    store_existed = store.exists()
    try:
        staging = staging_temp_dir(store, "import")  # named for this process: a killed import's is removed later
    except OSError as exc:
        raise cannot_write(exc, store) from None
    try:
        staged: list[tuple[TraceInput, Trace, Path, OpTable]] = []
        breakdowns: dict[str, TraceBreakdown | None] = {}
        for item in plan.inputs:
            trace, copy = read_and_stage(item, staging, limit)
            with gc_paused():  # events and op frames hold no cycles; a collection would only rescan them
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
        bundle = write_bundle(store, run, files)
        catalog.record(store, run, bundle)
        return bundle
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        release_staging(store)
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
    run = new_run(NewRunRequest(
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
    ))
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
