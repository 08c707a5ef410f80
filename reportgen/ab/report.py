"""The pair's report: the PR comment (Markdown, through ``templates/ab.md.j2``) and the versioned JSON document."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reportgen import __version__
from reportgen.ab.pair import PairResult, SideReport, VariantKind, VariantPair
from reportgen.ab.settings import CPU_DEFAULT_THREADS
from reportgen.analysis.paired import AbVerdict
from reportgen.analysis.stats import median
from reportgen.compare.memory import MemoryChange
from reportgen.model.codec import to_jsonable
from reportgen.model.run import GitInfo
from reportgen.render.jinja import MdSafe, render_md
from reportgen.text.formatting import fmt_bytes, fmt_change_pct, fmt_int

AB_SCHEMA_VERSION = 1
"""Version of the ``--format json`` document."""
MARKER = "<!-- reportgen-ab -->"
TEMPLATE = "ab.md.j2"

HEADLINES = {
    AbVerdict.REGRESSION: ":x: reportgen A/B: time regression",
    AbVerdict.IMPROVEMENT: ":white_check_mark: reportgen A/B: faster",
    AbVerdict.NO_CHANGE: ":white_check_mark: reportgen A/B: no change",
    AbVerdict.INCONCLUSIVE: ":grey_question: reportgen A/B: inconclusive after the time budget",
}
KIND_TEXT = {
    VariantKind.NEW: "new in head (not compared)",
    VariantKind.REMOVED: "removed in head",
    VariantKind.BROKEN_IN_HEAD: ":red_circle: broken in head",
    VariantKind.FAILED_IN_BASE: "failed in base (not compared)",
    VariantKind.FAILED_BOTH: "failed on both sides",
}
VERDICT_TEXT = {
    AbVerdict.REGRESSION: ":red_circle: regression",
    AbVerdict.IMPROVEMENT: ":green_circle: faster",
    AbVerdict.NO_CHANGE: "no change",
    AbVerdict.INCONCLUSIVE: ":grey_question: inconclusive",
}


def _pct(value: float) -> str:
    """A signed percentage with a real minus sign: '+1.6 %', '−0.4 %'."""
    return f"{'+' if value >= 0 else '−'}{abs(value):.1f} %"


def _us(value: float) -> str:
    return f"{value:,.4g} µs" if abs(value) < 1e4 else f"{value:,.0f} µs"


def _row(v: VariantPair) -> dict[str, Any]:
    """One table row: numbers formatted here (MdSafe: digits and units only), names escaped by the template."""
    s = v.stats
    if s is None:
        error = v.head_error if v.kind in (VariantKind.BROKEN_IN_HEAD, VariantKind.NEW) else v.base_error
        return {"name": v.name, "base": None, "head": None, "change": None, "noise": None,
                "result": MdSafe(KIND_TEXT.get(v.kind, v.kind.value)), "error": error}
    base_us, head_us = median(s.base_round_medians_us), median(s.head_round_medians_us)
    return {"name": v.name, "base": MdSafe(_us(base_us)), "head": MdSafe(_us(head_us)),
            "change": MdSafe(f"{_pct(s.change_pct)} ({_pct(s.ci_low_pct)} to {_pct(s.ci_high_pct)}, "
                             f"{s.coverage * 100:.1f} %)"),
            "noise": MdSafe(f"{s.base_noise_pct:.1f} % / {s.head_noise_pct:.1f} %"),
            "result": MdSafe(VERDICT_TEXT[s.verdict]), "error": None}


def _memory_row(m: MemoryChange) -> dict[str, Any]:
    """One row of the memory table: base → head of each figure (formatted here), the result in words."""
    cells = []
    for f in m.figures:
        show = fmt_int if f.figure == "allocation_count" else fmt_bytes
        change = "" if f.base == f.head else f" ({fmt_change_pct(f.change_pct) if f.change_pct is not None else 'from 0'})"
        cells.append(MdSafe(f"{show(f.base)} → {show(f.head)}{change}"))
    exact = " (exact)" if m.figures and m.figures[0].exact else ""
    result = {"more memory": ":red_circle: memory regression", "less memory": ":green_circle: less memory",
              "unchanged": "unchanged"}.get(m.outcome.value)
    return {"name": m.name, "cells": cells, "result": MdSafe(result + exact) if result else None, "reason": m.reason}


def _memory_named(m: MemoryChange) -> str:
    grown = " and ".join(f"{f.label} {fmt_change_pct(f.change_pct) if f.change_pct is not None else 'from 0'}"
                         for f in m.grown)
    return f"{m.name} {grown}"


def _headline(result: PairResult, failed: bool) -> tuple[str, list[str]]:
    """The headline (time, memory or both when a regression) and the variants it names."""
    verdict = result.verdict
    named = [v.name for v in result.variants if v.verdict is verdict] if verdict is not AbVerdict.NO_CHANGE else []
    if failed:
        return ":warning: reportgen A/B: a side failed", named
    mems = [_memory_named(m) for m in result.memory_regressions]
    if not mems:
        return HEADLINES[verdict], named
    if verdict is AbVerdict.REGRESSION:
        return ":x: reportgen A/B: time and memory regression", [*named, *mems]
    return ":x: reportgen A/B: memory regression", mems


def _params_text(base: Mapping[str, str], head: Mapping[str, str]) -> str:
    """The scenario parameters both sides measured with (``eps=1e-05, dim=-1``); each side's where they differ."""
    def show(params: Mapping[str, str]) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))

    if base and head and base != head:
        return f"base {show(base)}; head {show(head)}"
    return show(head or base)


def commit_text(git: GitInfo) -> str:
    if git.sha is None:
        return "not a git checkout"
    return git.sha[:12] + (" (with uncommitted changes)" if git.dirty else "")


def _on_cpu(result: PairResult) -> bool:
    return (result.base.device or result.head.device) == "cpu"


def _cpu_overrides(result: PairResult) -> MdSafe | None:
    """The flags by which a CPU pair left reportgen's measured CPU defaults (one thread, huge pages), if any."""
    s = result.settings
    flags = [f"--threads {s.threads}"] if s.threads not in (None, CPU_DEFAULT_THREADS) else []
    flags += ["--no-huge-pages"] if s.huge_pages is False else []
    flags += ["--no-same-cpu"] if not s.same_cpu else []
    return MdSafe(" ".join(flags)) if flags and _on_cpu(result) else None


def _machine(side: SideReport, threads_set: bool) -> str:
    """The machine in words; the threads say whether ``--threads`` or reportgen's CPU default set them."""
    env = side.environment or {}
    parts = [str(env.get("device_name") or env.get("cpu_model") or "unknown device"), f"host {env.get('hostname', '?')}"]
    if env.get("torch_version"):
        parts.append(f"torch {env['torch_version']}")
    if env.get("torch_threads"):
        n = env["torch_threads"]
        default = side.device == "cpu" and n == CPU_DEFAULT_THREADS
        why = " (--threads)" if threads_set else " (reportgen ab's CPU default)" if default else ""
        parts.append(f"{n} {'thread' if n == 1 else 'threads'}{why}")
    allocator = env.get("allocator_env") or {}
    if allocator:
        parts.append("allocator " + " ".join(f"{k}={v}" for k, v in allocator.items()))
    return ", ".join(parts)


def comment_context(result: PairResult, commits: dict[str, GitInfo], stored: dict[str, str] | None) -> dict[str, Any]:
    """Everything the template prints; strings from the checkouts stay raw (the environment escapes them)."""
    measured = [v.stats for v in result.variants if v.stats is not None]
    failed = [{"side": s.side, "stage": "import" if s.error_stage == "load" else "compile/warm-up"
               if s.error_stage == "warm" else s.error_stage, "error": s.error} for s in result.failed_sides]
    verdict = result.verdict
    headline, named = _headline(result, bool(failed))
    return {
        "marker": MdSafe(MARKER),
        "headline": MdSafe(headline),
        "named": named,
        "memory_rows": [_memory_row(m) for m in result.memory],
        "memory_threshold": MdSafe(f"{result.settings.memory_threshold_pct:g} %"),
        "failed": failed,
        "scenario": result.head.scenario_name or result.base.scenario_name or "",
        "shape": ",".join(str(d) for d in result.shape or ()),
        "dtype": result.dtype or "",
        "params": _params_text(result.base.params, result.head.params),
        "device": result.base.device or result.head.device or "",
        "machine": _machine(result.base if result.base.environment else result.head, result.settings.threads is not None),
        "base_commit": commit_text(commits["base"]),
        "head_commit": commit_text(commits["head"]),
        "rounds": len(result.rounds),
        "sessions": result.sessions,
        "rounds_per_session": result.settings.rounds_per_session,
        "samples": result.settings.samples_per_block,
        "rounds_s": MdSafe(f"{result.rounds_s:.1f} s"),
        "warm_s": MdSafe(f"{result.warm_s:.1f} s"),
        "stop": result.stop_reason,
        "still_inconclusive": verdict is AbVerdict.INCONCLUSIVE and not failed,
        "cpu_hint": _cpu_overrides(result),
        "one_thread": _on_cpu(result) and result.settings.threads in (None, CPU_DEFAULT_THREADS),
        "same_cpu": result.base.cpu is not None and result.base.cpu == result.head.cpu,
        "budget": MdSafe(f"{result.settings.max_seconds:g}"),
        "threshold": MdSafe(f"{result.settings.threshold_pct:g} %"),
        "precision": MdSafe(f"{result.settings.precision_pct:g} %") if result.settings.precision_pct else None,
        "max_noise": MdSafe(f"{max(max(s.base_noise_pct, s.head_noise_pct) for s in measured):.1f} %")
        if measured else None,
        "process_noise": MdSafe(f"{max(s.process_noise_pct for s in measured):.1f} %") if measured else None,
        "rows": [_row(v) for v in result.variants],
        "notes": list(result.notes),
        "method": result.method,
        "stored": stored,
        "version": __version__,
    }


def render_ab_markdown(result: PairResult, commits: dict[str, GitInfo], stored: dict[str, str] | None,
                       calibration: dict[str, Any] | None = None) -> str:
    """The PR comment for a measured (or failed) pair; ``calibration``: the runner's lines
    (``calibration_report.comment_calibration``)."""
    return render_md(TEMPLATE, only=None, calibration=calibration, **comment_context(result, commits, stored))


def render_scenario_only(scenario: str, kind: str, commits: dict[str, GitInfo], fmt: str) -> str:
    """The comment when the scenario exists on one side only: new or removed, never a failure."""
    if fmt == "json":
        return json.dumps({"schema_version": AB_SCHEMA_VERSION, "scenario": scenario, "scenario_status": kind,
                           "commits": {s: to_jsonable(g) for s, g in commits.items()}}, indent=1) + "\n"
    return render_md(TEMPLATE, only={"scenario": scenario, "kind": kind}, marker=MdSafe(MARKER),
                     base_commit=commit_text(commits["base"]), head_commit=commit_text(commits["head"]), version=__version__)


def ab_json(result: PairResult, commits: dict[str, GitInfo], stored: dict[str, str] | None,
            calibration: Any = None) -> str:
    """The pair as a versioned JSON document (every round's samples included); ``calibration``: the runner's
    (``ab.calibration.StoredCalibration``), if one was found."""
    doc = {
        "schema_version": AB_SCHEMA_VERSION,
        "verdict": result.verdict.value,
        "exit_code": int(result.exit_code),
        "memory_regressions": [m.name for m in result.memory_regressions],
        "memory": [to_jsonable(m) for m in result.memory],
        "method": result.method,
        "threshold_pct": result.settings.threshold_pct,
        "precision_pct": result.settings.precision_pct,
        "stop_reason": result.stop_reason,
        "sessions": result.sessions,
        "rounds_s": result.rounds_s,
        "warm_s": result.warm_s,
        "session_s": list(result.session_s),
        "shape": list(result.shape or ()),
        "dtype": result.dtype,
        "params": {"base": result.base.params, "head": result.head.params},
        "commits": {s: to_jsonable(g) for s, g in commits.items()},
        "failed_sides": [{"side": s.side, "stage": s.error_stage, "error": s.error} for s in result.failed_sides],
        "variants": [{"name": v.name, "kind": v.kind.value, "verdict": v.verdict.value if v.verdict else None,
                      "stats": to_jsonable(v.stats) if v.stats else None, "base_error": v.base_error,
                      "head_error": v.head_error} for v in result.variants],
        "order_seed": result.order_seed,
        "orders": [to_jsonable(o) for o in result.orders],
        "rounds": [to_jsonable(r) for r in result.rounds],
        "notes": list(result.notes),
        "stored_runs": stored,
        "calibration": to_jsonable(calibration) if calibration is not None else None,
    }
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
