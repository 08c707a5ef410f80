"""``reportgen history``: every history series of the store and its steps (text, or versioned JSON).

The series are the index's (``analysis.history``: one per machine, scenario, parameters and variant, withdrawn
runs left out); the steps are ``analysis.change_points``'. With ``fail_on_step`` a *new* step (the newest run is the
first to show it: ``change_points.NEW_STEP_*``) exits 1: the Action's push mode.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from reportgen.analysis import change_points as cp
from reportgen.analysis.history import history
from reportgen.catalog.listing import selected_runs
from reportgen.errors import ExitCode
from reportgen.store.runs import RunsRequest
from reportgen.text.terminal import printable

HISTORY_SCHEMA_VERSION = 1
"""Version of ``reportgen history --json``'s document."""


@dataclass(frozen=True)
class HistoryRequest:
    """``reportgen history``: which store and runs, the output form, and whether a new step fails."""

    store: Path
    scenario: str | None = None
    machine: str | None = None
    as_json: bool = False
    fail_on_step: bool = False


def store_steps(request: HistoryRequest) -> tuple[tuple[cp.SeriesSteps, ...], list[str]]:
    """Each series of the selected runs with its steps, and one message per bundle that did not load."""
    cat, ids, _ = selected_runs(RunsRequest(request.store, request.scenario, request.machine))
    groups = history(cat.digests(ids))
    return tuple(s for g in groups for s in cp.series_steps(g)), [p.message for p in cat.problems]


def run_history_command(request: HistoryRequest) -> int:
    """Print the series and their steps; exit 1 on a new step with ``fail_on_step``, 3 when a bundle is bad."""
    series, problems = store_steps(request)
    if request.as_json:
        print(json.dumps(history_json(series), indent=1, ensure_ascii=True))
    else:
        for line in history_lines(series):
            print(line)
    for message in problems:
        print(f"reportgen: error: {printable(message)}", file=sys.stderr)
    new = [s for one in series for s in one.steps if s.new]
    if request.fail_on_step and new:
        print(f"reportgen: {len(new)} new step(s) in the history (--fail-on-step)", file=sys.stderr)
        return ExitCode.REGRESSION
    return ExitCode.BAD_INPUT if problems else ExitCode.OK


def step_json(s: cp.SeriesStep) -> dict[str, object]:
    """One step as ``--json`` gives it."""
    return {"index": s.step.index, "before_run": s.before.run_id, "after_run": s.after.run_id,
            "before_commit": s.before_sha, "after_commit": s.after_sha, "commit_range": s.commit_range,
            "ratio": round(s.step.ratio, 5), "ci_low": round(s.step.ci_low, 5), "ci_high": round(s.step.ci_high, 5),
            "change_pct": round(s.change_pct, 3), "z": round(s.step.z, 2), "runs_before": s.step.runs_before,
            "runs_after": s.step.runs_after, "new": s.new}


def history_json(series: tuple[cp.SeriesSteps, ...]) -> dict[str, object]:
    """The versioned ``--json`` document: the method's settings, then each series with its steps."""
    return {
        "schema_version": HISTORY_SCHEMA_VERSION,
        "method": {"detector": "PELT (L2 on log medians) + significance filter", "min_relative": cp.MIN_RELATIVE,
                   "min_segment_runs": cp.MIN_SEGMENT, "min_z": cp.MIN_Z, "penalty_per_log_n": cp.PENALTY_PER_LOG_N},
        "new_steps": sum(1 for one in series for s in one.steps if s.new),
        "series": [{"group": one.group_key, "title": one.title, "variant": one.variant, "runs": one.runs,
                    "noise_pct": None if one.noise_pct is None else round(one.noise_pct, 3),
                    "steps": [step_json(s) for s in one.steps]} for one in series],
    }


def step_text(s: cp.SeriesStep) -> str:
    """``+10.2 % (x1.102, 95 % x1.081-x1.124) between abc..def`` (printable)."""
    return (f"{s.change_pct:+.1f} % (x{s.step.ratio:.3f}, 95 % x{s.step.ci_low:.3f}-x{s.step.ci_high:.3f}) between "
            f"{printable(s.commit_range)}")


def history_lines(series: tuple[cp.SeriesSteps, ...]) -> list[str]:
    """One line per series, then one indented line per step (every text made printable)."""
    if not series:
        return ["no history series in this store; make runs with 'reportgen profile'"]
    out = []
    for one in series:
        noise = f", noise {one.noise_pct:.1f} % per run" if one.noise_pct is not None else ""
        out.append(f"{printable(one.title)} · {printable(one.variant)}: {one.runs} run(s){noise}, "
                   f"{len(one.steps)} step(s)")
        for s in one.steps:
            out.append(f"  {'NEW ' if s.new else ''}step at run {s.step.index + 1}: {step_text(s)}; "
                       f"{s.step.runs_before} run(s) before, {s.step.runs_after} after")
    return out
