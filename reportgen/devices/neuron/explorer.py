"""neuron-explorer on one capture session: the device summary and the system-trace counters.

The documented call (SDK ``tools/neuron-explorer``) is ``neuron-explorer view -d <session dir>``
with ``--output-format summary-json`` (the device summary: the Summary table's fields, SCH) or
``json`` (the legacy full export, which holds the system-trace events: SystemProfileEvents, SCH).
``--output-file`` names where it writes; where it printed to stdout instead, stdout is read.

What the documents give is each record's FIELDS, not the JSON nesting around them. So a record
is recognised by its documented required fields (a Summary record carries ``total_time``; a
SystemProfileEvents record carries ``name`` and ``trace_event_source``), wherever it sits, and
reportgen refuses to guess when there is not exactly one Summary record. Nothing here has run
against a real NTFF: it is tested against a fake executable that follows those documents.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.model.run import DeviceEvidence

EXPLORER = "neuron-explorer"
TIMEOUT_S = 600
SUMMARY_FIELDS = ("total_time", "hbm_read_bytes", "hbm_write_bytes", "mbu_estimated_percent",
                  "mbu_min_read_util_percent", "dma_transfer_count", "spill_save_bytes", "spill_reload_bytes")
ENGINE_FIELD_SUFFIXES = ("_engine_active_time_percent", "_engine_instruction_count")
COUNTER_EVENTS = ("nc_exec_running", "nrt_model_submit", "dmem_buf_copyin", "dmem_buf_copyout",
                  "nc_model_switch", "nrt_model_switch")
"""System-trace events that show fusion (per profiled step): executions, NEFF submissions, copies, switches."""
SUMMARY_FILE = "neuron-explorer-summary.json"
SYSTEM_FILE = "neuron-explorer-system.json"
_MAX_DEPTH = 64

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
    """The capture session under ``folder``: the newest ``<instance>_pid_<pid>/<timestamp>/`` holding an .ntff."""
    candidates = sorted({p.parent for p in folder.glob("*_pid_*/*/*.ntff")})
    if not candidates and any(folder.glob("*.ntff")):
        return folder
    return candidates[-1] if candidates else None


def explore(session: Path, steps: int, scratch: Path, which: Callable[[str], str | None] | None = None,
            run: Runner | None = None) -> Exploration:
    """Run neuron-explorer twice on ``session`` (summary-json, then json) and read both by their documented fields."""
    exe = (which or shutil.which)(EXPLORER)
    run = run or subprocess.run
    if exe is None:
        return Exploration({}, {}, steps, "", ("neuron-explorer is not installed: no device summary and no "
                                                "system-trace counters (install the Neuron tools and profile or "
                                                "import again)",), {})
    scratch.mkdir(parents=True, exist_ok=True)
    summary_out = view(exe, session, "summary-json", scratch / SUMMARY_FILE, run)
    system_out = view(exe, session, "json", scratch / SYSTEM_FILE, run, "--ignore-device-profile")
    notes: list[str] = []
    raw: dict[str, bytes] = {}
    summary: dict[str, float] = {}
    counters: dict[str, float] = {}
    if summary_out.output is not None:
        raw[SUMMARY_FILE] = summary_out.output
        summary, note = parse_summary(summary_out.output)
        notes.append(note)
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


def view(exe: str, session: Path, fmt: str, out_file: Path, run: Runner, *extra: str) -> ToolOutput:
    """``neuron-explorer view -d SESSION --output-format FMT --output-file OUT``: the file's bytes, else stdout."""
    argv = (exe, "view", "-d", str(session), "--output-format", fmt, "--output-file", str(out_file), *extra)
    out_file.unlink(missing_ok=True)
    try:
        proc = run(list(argv), capture_output=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ToolOutput(argv, None, f"neuron-explorer could not run ({type(exc).__name__})")
    if proc.returncode != 0:
        err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:300]
        return ToolOutput(argv, None, f"neuron-explorer failed (exit {proc.returncode}: {err})")
    if out_file.is_file():
        return ToolOutput(argv, out_file.read_bytes(), None)
    if proc.stdout.strip():
        return ToolOutput(argv, proc.stdout, None)
    return ToolOutput(argv, None, "neuron-explorer wrote nothing (no --output-file and no stdout)")


def parse_summary(raw: bytes) -> tuple[dict[str, float], str]:
    """The one Summary record's numeric fields (SUMMARY_FIELDS and per-engine ones), and a note saying so."""
    data = _load(raw)
    if data is None:
        return {}, "summary-json is not JSON: no device summary"
    records = [r for r in _records(data) if _number(r.get("total_time")) is not None]
    if len(records) != 1:
        return {}, (f"summary-json holds {len(records)} Summary records (objects with total_time); reportgen reads "
                    "exactly one and does not combine or pick: no device summary (its schema may have changed)")
    (record,) = records
    figures = {k: v for k in SUMMARY_FIELDS if (v := _number(record.get(k))) is not None}
    figures.update({k: v for k, value in sorted(record.items())
                    if k.endswith(ENGINE_FIELD_SUFFIXES) and (v := _number(value)) is not None})
    absent = [k for k in SUMMARY_FIELDS if k not in figures]
    return figures, ("device summary from neuron-explorer summary-json" +
                     (f" (absent: {', '.join(absent)})" if absent else ""))


def parse_system_counts(raw: bytes) -> tuple[dict[str, float], str]:
    """Counts of COUNTER_EVENTS among the SystemProfileEvents records of NeuronCore 0 (nc_idx 0 or absent)."""
    data = _load(raw)
    if data is None:
        return {}, "json export is not JSON: no system-trace counters"
    events = [r for r in _records(data) if isinstance(r.get("name"), str)
              and isinstance(r.get("trace_event_source"), str) and r.get("nc_idx", 0) in (0, "0")]
    if not events:
        return {}, ("json export holds no system-trace events (objects with name and trace_event_source): "
                    "no counters")
    names = Counter(str(r["name"]) for r in events)
    counts = {name: float(names.get(name, 0)) for name in COUNTER_EVENTS}
    counts["system_trace_events"] = float(len(events))
    return counts, f"system-trace counters from {len(events)} events of NeuronCore 0 in the json export"


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


def _load(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _records(data: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``data`` (iteratively, depth-bounded): candidates for a documented record."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > _MAX_DEPTH:
            continue
        if isinstance(item, dict):
            yield item
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def timing_source(exploration: Exploration | None, device_events_per_step: int | None, *,
                  imported: bool = False, why_none: str = "") -> str:
    """Where a neuron variant's times come from, in words (never zeros presented as data)."""
    host = ("per-step times: the ProfilerStep durations on the host clock" if imported
            else "per-call times: wall clock between torch.neuron.synchronize() calls")
    if device_events_per_step:
        return f"{host}; device time: the device events in trace.json"
    table = "trace.json has no device events (documented as a framework-level trace), so the op table shows host CPU time"
    total = exploration.summary.get("total_time") if exploration else None
    if total is not None and exploration is not None:
        steps = f"over {exploration.steps} profiled step(s)" if exploration.steps > 0 else "for the whole capture"
        return (f"{host}; device time: the NTFF via neuron-explorer (total_time {total:.6g} s {steps}, idle gaps "
                f"included); {table}")
    reason = exploration.notes[0] if exploration and exploration.notes else (why_none or "no device summary")
    return f"{host} only; no device time ({reason}); {table}"
