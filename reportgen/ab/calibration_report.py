"""What a calibration says, in words: its own report (``reportgen ab --calibrate``) and its lines in a pair's comment."""

from __future__ import annotations

import json
from typing import Any

from reportgen import __version__
from reportgen.ab.calibration import StoredCalibration
from reportgen.ab.pair import PairResult
from reportgen.ab.report import commit_text
from reportgen.analysis.calibration import DECIDE_RATE, MAX_PCT, Calibration, VariantCalibration
from reportgen.model.codec import to_jsonable
from reportgen.model.run import GitInfo
from reportgen.render.jinja import MdSafe, render_md

CALIBRATION_SCHEMA_VERSION = 1
"""Version of ``reportgen ab --calibrate --format json``."""
MARKER = "<!-- reportgen-ab-calibration -->"
TEMPLATE = "ab_calibration.md.j2"


def _pct(value: float | None) -> str:
    return f"more than {MAX_PCT:g} %" if value is None else f"{value:.1f} %"


def _figures(c: Calibration) -> dict[str, Any]:
    """The worst variant's figures for the gate, formatted."""
    resolution = c.resolution_pct
    return {
        "budget": MdSafe(f"{c.budget_s:g} s"),
        "budget_flag": MdSafe(f"{c.budget_s:g}"),
        "sessions_in_budget": c.gate.budget_sessions,
        "threshold": MdSafe(f"{c.gate.threshold_pct:g} %"),
        "resolution": MdSafe(_pct(resolution)),
        "slowdown": MdSafe(_pct(c.detectable_slowdown_pct)),
        "false_alarm": MdSafe(f"{max((v.false_alarm_pct for v in c.variants), default=0.0):.1f} %"),
        "rate": MdSafe(f"{DECIDE_RATE * 100:g} %"),
        "simulations": c.simulations,
        "below": resolution is None or c.gate.threshold_pct < resolution,
    }


def comment_calibration(found: StoredCalibration | None, looked: bool) -> dict[str, Any] | None:
    """The pair comment's calibration lines: the runner's figures for this pair's gate, or (``looked`` in a store
    without one) how to get them; None when no lookup was made (nothing stored)."""
    if not looked:
        return None
    if found is None:
        return {"found": False}
    return {"found": True, "run": found.base_run_id, "when": found.created_utc[:10], "sessions": found.sessions,
            **_figures(found.calibration)}


def _row(v: VariantCalibration) -> dict[str, Any]:
    return {"name": v.name,
            "aa": MdSafe(f"{v.aa_change_pct:+.1f} % ({v.aa_ci_low_pct:+.1f} to {v.aa_ci_high_pct:+.1f} %)"),
            "false_alarm": MdSafe(f"{v.false_alarm_pct:.1f} %"), "resolution": MdSafe(_pct(v.resolution_pct)),
            "slowdown": MdSafe(_pct(v.detectable_slowdown_pct))}


def render_calibration(result: PairResult, calibration: Calibration | None, commits: dict[str, GitInfo],
                       stored: dict[str, str] | None, fmt: str) -> str:
    """``reportgen ab --calibrate``'s report (Markdown or JSON)."""
    if fmt == "json":
        return json.dumps({"schema_version": CALIBRATION_SCHEMA_VERSION, "calibration": to_jsonable(calibration),
                           "sessions": result.sessions, "session_s": list(result.session_s), "method": result.method,
                           "commit": to_jsonable(commits["base"]), "stored_runs": stored,
                           "failed_sides": [{"side": s.side, "stage": s.error_stage, "error": s.error}
                                            for s in result.failed_sides]}, indent=1, allow_nan=False) + "\n"
    side = result.loaded_side
    env = side.environment or {}
    return render_md(TEMPLATE, marker=MdSafe(MARKER), scenario=side.scenario_name or "", device=side.device or "",
                     machine=str(env.get("device_name") or env.get("cpu_model") or "unknown device"),
                     commit=commit_text(commits["base"]), sessions=result.sessions,
                     first_s=MdSafe(f"{result.session_s[0]:.1f} s") if result.session_s else None,
                     later_s=MdSafe(f"{calibration.later_session_s:.1f} s") if calibration else None,
                     figures=_figures(calibration) if calibration and calibration.variants else None,
                     rows=[_row(v) for v in calibration.variants] if calibration else [],
                     min_sessions=calibration.gate.min_sessions if calibration else None,
                     failed=[{"side": s.side, "stage": s.error_stage, "error": s.error} for s in result.failed_sides],
                     method=result.method, stored=stored, version=__version__)
