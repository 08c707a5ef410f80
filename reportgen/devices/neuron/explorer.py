"""neuron-explorer on one capture session: the device summary and the system-trace counters.

The documented call (SDK ``tools/neuron-explorer``) is ``neuron-explorer view -d <session dir>``
with ``--output-format summary-json`` (the device summary: the Summary table's fields, SCH; read
by summary.py, every record counted) or ``json`` (the legacy full export, which holds the
system-trace events). ``--output-file`` names where it writes; where it printed to stdout instead
(as scripts in the wild read summary-json), stdout is read, log lines before the JSON skipped.

The system-trace records are recognised by their fields (``name`` and ``trace_event_source``,
SystemProfileEvents, SCH), wherever they sit: assumed, not checked against a real export (the
facts doc says the legacy json's records carry ``group`` and ``lnc_idx``). Tested against a fake
executable whose summary-json carries the counter names of a real inf2 capture (tests/stand_ins/).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reportgen.devices.neuron.summary import load_json, parse_summary, records
from reportgen.devices.spec import first_link
from reportgen.model.run import DeviceEvidence

EXPLORER = "neuron-explorer"
TIMEOUT_S = 600
COUNTER_EVENTS = ("nc_exec_running", "nrt_model_submit", "dmem_buf_copyin", "dmem_buf_copyout",
                  "nc_model_switch", "nrt_model_switch")
"""System-trace events that show fusion (per profiled step): executions, NEFF submissions, copies, switches."""
SUMMARY_FILE = "neuron-explorer-summary.json"
SYSTEM_FILE = "neuron-explorer-system.json"

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


def parse_system_counts(raw: bytes) -> tuple[dict[str, float], str]:
    """Counts of COUNTER_EVENTS among the SystemProfileEvents records of NeuronCore 0 (nc_idx 0 or absent)."""
    data, _ = load_json(raw)
    if data is None:
        return {}, "json export is not JSON: no system-trace counters"
    events = [r for _, r in records(data) if isinstance(r.get("name"), str)
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


def timing_source(exploration: Exploration | None, device_events_per_step: int | None, *,
                  imported: bool = False, why_none: str = "") -> str:
    """Where a neuron variant's times come from, in words (never zeros presented as data)."""
    host = ("per-step times: the ProfilerStep durations on the host clock" if imported
            else "per-call times: wall clock between torch.neuron.synchronize() calls")
    if device_events_per_step:
        return f"{host}; device time: the device events in trace.json"
    table = "trace.json has no device events (documented as a framework-level trace), so the op table shows host CPU time"
    summary = exploration.summary if exploration else {}
    field = next((f for f in ("total_active_time", "total_time") if f in summary), None)
    if field is not None and exploration is not None:
        steps = f"over {exploration.steps} profiled step(s)" if exploration.steps > 0 else "for the whole capture"
        gaps = "idle gaps excluded" if field == "total_active_time" else "idle gaps included: no total_active_time"
        return (f"{host}; device time: the NTFF via neuron-explorer ({field} {summary[field]:.6g} s {steps}, "
                f"{gaps}); {table}")
    reason = exploration.notes[0] if exploration and exploration.notes else (why_none or "no device summary")
    return f"{host} only; no device time ({reason}); {table}"
