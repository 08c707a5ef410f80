"""neuron-explorer on one capture session: the device summary, the executions and the system-trace counters.

The documented call (SDK ``tools/neuron-explorer``) is ``neuron-explorer view -d <session dir>``.
First its default and recommended output, Parquet (``--output-format parquet --output-file DIR``:
one file per table in DIR), read by parquet.py: Summary, ExecutionInfo (every execution of every
NEFF), Metadata (the schema version, refused if its major is unknown), SystemProfileEvents (the
counters). Where Parquet gives nothing (pyarrow not installed: ``pip install "reportgen[neuron]"``;
the tool failed; an unknown schema), the fallback is ``--output-format summary-json`` (read by
summary.py, every record counted) and ``json`` (the legacy full export, for the system-trace
events); ``--output-file`` names where they write, and where they printed to stdout instead (as
scripts in the wild read summary-json), stdout is read, log lines before the JSON skipped.

The legacy json export is documented (SDK ``tools/neuron-explorer/get-started.rst``, and the archived Profiler
2.0 guide) to write ``system_profile.json`` and one ``device_profile_model_<id>.json`` per compiled model; the
system profile holds ``trace_events`` (Neuron Runtime API and framework events: ``name``, ``group`` such as
``nrt-nc-000``, ``lnc_idx`` as a string, ``timestamp``, ``duration``), ``mem_usage`` and ``cpu_util``. Where it
writes is not documented beyond ``--output-file``: reportgen names ``<empty folder>/system_profile.json`` and runs
the tool in that folder, so the file is found whichever of the two it follows. Its records are recognised by
``name`` with ``group`` (legacy json) or ``trace_event_source`` (Parquet's SystemProfileEvents), the core by
``lnc_idx`` or ``nc_idx``; hardware events are not among its documented contents, so an event name the export does
not hold is left out (not known), never counted as zero. Tested against a fake executable that writes Parquet
fixtures written from the schema reference, a legacy json in the documented layout, and a summary-json with the
counter names of a real inf2 capture (tests/stand_ins/).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reportgen.devices.neuron import parquet
from reportgen.devices.neuron.summary import load_json, parse_summary, records
from reportgen.devices.spec import first_link
from reportgen.model.run import DEVICE_TIME_FIELDS, DeviceEvidence

EXPLORER = "neuron-explorer"
TIMEOUT_S = 600
COUNTER_EVENTS = ("nc_exec_running", "nrt_model_submit", "dmem_buf_copyin", "dmem_buf_copyout",
                  "nc_model_switch", "nrt_model_switch")
"""System-trace events that show fusion (per profiled step): executions, NEFF submissions, copies, switches."""
SUMMARY_FILE = "neuron-explorer-summary.json"
SYSTEM_FILE = "neuron-explorer-system.json"
"""The legacy json's system profile as kept with the run."""
LEGACY_DIR = "neuron-explorer-json"
LEGACY_SYSTEM = "system_profile.json"
"""The file the legacy ``--output-format json`` writes for the system profile (documented name)."""
PARQUET_DIR = "neuron-explorer-parquet"
"""The folder named to ``--output-file`` for Parquet; the tables read are kept as ``<PARQUET_DIR>-<file>``."""
EXECUTIONS = "executions"
"""The per-step counter of ExecutionInfo rows: device programs per call."""

Runner = Callable[..., "subprocess.CompletedProcess[bytes]"]


@dataclass(frozen=True)
class ToolOutput:
    """One neuron-explorer call: its argv, and what it wrote (or why nothing)."""

    argv: tuple[str, ...]
    output: bytes | None
    problem: str | None


@dataclass(frozen=True)
class Exploration:
    """The device evidence of one session, and the raw outputs to keep beside it (file name -> bytes)."""

    summary: dict[str, float]
    counters: dict[str, float]
    steps: int
    tool: str
    notes: tuple[str, ...]
    raw: dict[str, bytes]

    def evidence(self, timing_source: str) -> DeviceEvidence:
        """As stored in the run: per-step counters and the summary as the tool reported it."""
        return DeviceEvidence(timing_source=timing_source, summary=dict(self.summary),
                              counters_per_step=dict(self.counters), profiled_steps=self.steps,
                              tool=self.tool, notes=self.notes)


def session_dir(folder: Path) -> Path | None:
    """The capture session at ``folder``: the newest folder holding an .ntff, as TorchNeuron writes it
    (``<instance>_pid_<pid>/<timestamp>/``), or as the runtime's inspect capture writes it (``<instance>_pid_<pid>/``)."""
    if any(not p.is_symlink() for p in folder.glob("*.ntff")):
        return folder
    for pattern in ("*_pid_*/*/*.ntff", "*_pid_*/*.ntff", "*/*.ntff"):
        candidates = sorted({p.parent for p in folder.glob(pattern) if first_link(folder, p) is None})
        if candidates:
            return candidates[-1]
    return None


def explore(session: Path, steps: int, scratch: Path, which: Callable[[str], str | None] | None = None,
            run: Runner | None = None) -> Exploration:
    """neuron-explorer on ``session``: its Parquet where that gives device figures, else summary-json and json."""
    exe = (which or shutil.which)(EXPLORER)
    run = run or subprocess.run
    if exe is None:
        return Exploration({}, {}, steps, "", ("neuron-explorer is not installed: no device summary and no "
                                                "system-trace counters (install the Neuron tools and profile or "
                                                "import again)",), {})
    scratch.mkdir(parents=True, exist_ok=True)
    tried = explore_parquet(exe, session, steps, scratch, run)
    if isinstance(tried, Exploration):
        return tried
    found = explore_summary_json(exe, session, steps, scratch, run)
    return replace(found, notes=(*found.notes, f"summary-json used because Parquet gave no device figures: {tried}"))


def explore_parquet(exe: str, session: Path, steps: int, scratch: Path, run: Runner) -> Exploration | str:
    """``view -d SESSION --output-format parquet --output-file DIR`` read by parquet.py; else why not, in words."""
    missing = parquet.pyarrow_missing()
    if missing:
        return missing
    out_dir = scratch / PARQUET_DIR
    argv = (exe, "view", "-d", str(session), "--output-format", "parquet", "--output-file", str(out_dir))
    if out_dir.is_dir():
        shutil.rmtree(out_dir)  # reportgen's own scratch folder: no table of an earlier call may be read
    problem = call(argv, run)[1]
    if problem:
        return problem
    read = parquet.read_profile(out_dir)
    if not read.figures:
        return "; ".join(read.notes)
    notes = list(read.notes)
    counts: dict[str, float] = {}
    if read.events is None:
        notes.append("the Parquet has no SystemProfileEvents table: no system-trace counters")
    else:
        counts, note = count_events(read.events, "SystemProfileEvents")
        notes.append(note)
    if "execution_count" in read.figures:
        counts[EXECUTIONS] = read.figures["execution_count"]
    if steps <= 0:
        notes.append("no profiled steps known: the counters are totals for the whole capture")
    raw = {f"{PARQUET_DIR}-{p.relative_to(out_dir).as_posix().replace('/', '-')}": p.read_bytes() for p in read.files}
    return Exploration(dict(read.figures), {k: v / max(steps, 1) for k, v in counts.items()}, steps,
                       _shown(argv, session), tuple(notes), raw)


def explore_summary_json(exe: str, session: Path, steps: int, scratch: Path, run: Runner) -> Exploration:
    """The fallback: neuron-explorer twice on ``session`` (summary-json, then json), read by their documented fields."""
    summary_out = view(exe, session, "summary-json", scratch / SUMMARY_FILE, run)
    legacy = scratch / LEGACY_DIR
    if legacy.is_dir():
        shutil.rmtree(legacy)  # reportgen's own scratch folder: no file of an earlier call may be read
    legacy.mkdir(parents=True)
    system_out = view(exe, session, "json", legacy / LEGACY_SYSTEM, run, "--ignore-device-profile", cwd=legacy)
    notes: list[str] = []
    raw: dict[str, bytes] = {}
    summary: dict[str, float] = {}
    counters: dict[str, float] = {}
    if summary_out.output is not None:
        raw[SUMMARY_FILE] = summary_out.output
        read = parse_summary(summary_out.output)
        summary = read.figures
        notes.extend(read.notes)
    else:
        notes.append(f"summary-json: {summary_out.problem}")
    if system_out.output is not None:
        raw[SYSTEM_FILE] = system_out.output
        counts, note = parse_system_counts(system_out.output)
        counters = {k: v / max(steps, 1) for k, v in counts.items()}
        notes.append(note)
    else:
        notes.append(f"json (system trace): {system_out.problem}")
    if steps <= 0:
        notes.append("no profiled steps known: the counters are totals for the whole capture")
    tool = "; ".join(_shown(o.argv, session) for o in (summary_out, system_out))
    return Exploration(summary, counters, steps, tool, tuple(notes), raw)


def view(exe: str, session: Path, fmt: str, out_file: Path, run: Runner, *extra: str,
         cwd: Path | None = None) -> ToolOutput:
    """``neuron-explorer view -d SESSION --output-format FMT --output-file OUT`` (run in ``cwd``): the file's bytes,
    else stdout."""
    argv = (exe, "view", "-d", str(session), "--output-format", fmt, "--output-file", str(out_file), *extra)
    out_file.unlink(missing_ok=True)
    proc, problem = call(argv, run, cwd)
    if proc is None:
        return ToolOutput(argv, None, problem)
    if out_file.is_file():
        return ToolOutput(argv, out_file.read_bytes(), None)
    if proc.stdout.strip():
        return ToolOutput(argv, proc.stdout, None)
    return ToolOutput(argv, None, "neuron-explorer wrote nothing (no --output-file and no stdout)")


def call(argv: tuple[str, ...], run: Runner,
         cwd: Path | None = None) -> tuple[subprocess.CompletedProcess[bytes] | None, str | None]:
    """One neuron-explorer run (in ``cwd`` where given): the finished process, or None and why it failed."""
    where = {"cwd": str(cwd)} if cwd is not None else {}
    try:
        proc = run(list(argv), capture_output=True, timeout=TIMEOUT_S, check=False, **where)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"neuron-explorer could not run ({type(exc).__name__})"
    if proc.returncode != 0:
        err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:300]
        return None, f"neuron-explorer failed (exit {proc.returncode}: {err})"
    return proc, None


def parse_system_counts(raw: bytes) -> tuple[dict[str, float], str]:
    """Counts of COUNTER_EVENTS among the system-trace records of the legacy json export (objects with ``name`` and
    ``group``, as documented, or ``trace_event_source``, wherever they sit); names it does not hold are left out."""
    data, _ = load_json(raw)
    if data is None:
        return {}, "json export is not JSON: no system-trace counters"
    return count_events((r for _, r in records(data)), "json export", only_present=True)


def count_events(rows: Iterable[dict[str, Any]], where: str,
                 only_present: bool = False) -> tuple[dict[str, float], str]:
    """Counts of COUNTER_EVENTS among the system-trace rows of NeuronCore 0 (``_core``); with ``only_present``, an
    event name absent from the rows is left out rather than counted 0."""
    events = [r for r in rows if _is_event(r) and _core(r) in (0, "0")]
    if not events:
        return {}, (f"{where} holds no system-trace events of NeuronCore 0 (name with group or trace_event_source; "
                    "lnc_idx or nc_idx): no counters")
    names = Counter(str(r["name"]) for r in events)
    counts = {name: float(names.get(name, 0)) for name in COUNTER_EVENTS if names.get(name) or not only_present}
    counts["system_trace_events"] = float(len(events))
    absent = [n for n in COUNTER_EVENTS if n not in counts]
    note = f"system-trace counters from {len(events)} events of NeuronCore 0 in the {where}"
    return counts, note + (f"; not in it, so not known: {', '.join(absent)}" if absent else "")


def _core(row: dict[str, Any]) -> object:
    """The row's NeuronCore: ``nc_idx`` (Parquet; absent taken as 0), or the legacy json's ``lnc_idx`` (absent on
    its framework events, which belong to no core and are not counted)."""
    if "group" in row and "trace_event_source" not in row:
        return row.get("lnc_idx")
    return row.get("nc_idx", 0)


def _is_event(row: dict[str, Any]) -> bool:
    """A system-trace event: a ``name``, and its source as Parquet (``trace_event_source``) or the legacy json
    (``group``) names it."""
    return isinstance(row.get("name"), str) and (isinstance(row.get("trace_event_source"), str)
                                                 or isinstance(row.get("group"), str))


def _shown(argv: tuple[str, ...], session: Path) -> str:
    """An argv as the report shows it: the tool's name, the session as <instance>_pid_<pid>/<timestamp>, file names."""
    shown = [EXPLORER]
    for arg in argv[1:]:
        if arg == str(session):
            arg = f"{session.parent.name}/{session.name}"
        elif arg.startswith("/"):
            arg = Path(arg).name
        shown.append(arg)
    return " ".join(shown)


def timing_source(exploration: Exploration | None, device_events_per_step: int | None, *,
                  imported: bool = False, why_none: str = "") -> str:
    """Where a neuron variant's times come from, in words (never zeros presented as data)."""
    host = ("per-step times: the ProfilerStep durations on the host clock" if imported
            else "per-call times: wall clock between torch.neuron.synchronize() calls")
    if device_events_per_step:
        return f"{host}; device time: the device events in trace.json"
    table = "trace.json has no device events (documented as a framework-level trace), so the op table shows host CPU time"
    summary = exploration.summary if exploration else {}
    field = next((f for f in DEVICE_TIME_FIELDS if f in summary), None)
    if field is not None and exploration is not None:
        steps = f"over {exploration.steps} profiled step(s)" if exploration.steps > 0 else "for the whole capture"
        gaps = {"execution_time": f"the sum of {summary.get('execution_count', 0):g} executions' spans in "
                                  "ExecutionInfo, idle gaps between executions excluded",
                "total_active_time": "idle gaps excluded"}.get(field, "idle gaps included: no total_active_time")
        return (f"{host}; device time: the NTFF via neuron-explorer ({field} {summary[field]:.6g} s {steps}, "
                f"{gaps}); {table}")
    reason = exploration.notes[0] if exploration and exploration.notes else (why_none or "no device summary")
    return f"{host} only; no device time ({reason}); {table}"
