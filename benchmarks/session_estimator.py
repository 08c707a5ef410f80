"""How a session's ratio is made from its rounds: the same A/A sessions scored three ways.

Runs ``--pairs`` A/A pairs of ``reportgen ab`` (the base checkout against a copy of itself, ``--sessions`` sessions
each, ``--precision 0``) on one of ``ab_noise.py``'s ops, and scores every session's rounds as

- ``median_rounds``: the median of the rounds' ratios (``reportgen ab`` before 2026-12-06);
- ``median_pairs``: the median of the ABBA pairs' geometric mean ratios;
- ``hl_pairs``: the Hodges-Lehmann centre of the pairs' log ratios (``analysis.paired.session_ratio`` itself, since).

Same code on both sides, so the sessions' spread (sd of their log ratios, percent) is the noise each way; lower is
better. Also per pair: how much faster the side that runs first in a round is than the other (the position effect
that the pairs cancel), and the spread of the pairs' ratios within sessions. Each session's rounds' log ratios are
recorded, so other estimators can be scored on the same sessions later.

    .venv/bin/python benchmarks/session_estimator.py --scenario reduction --pairs 6 --sessions 30 \\
        --out benchmarks/results/session_estimator_reduction.json
    .venv/bin/python benchmarks/session_estimator.py --replay benchmarks/results/session_estimator_*.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ab_noise import KINDS, SCENARIO_NAME, make_checkout, reportgen  # beside this script
from machine import reference_loop_s

from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL, interval_settled, session_interval, session_ratio


def _pairs(logs: Sequence[float]) -> list[float]:
    return [sum(logs[i:i + 2]) / len(logs[i:i + 2]) for i in range(0, len(logs), 2)]


ESTIMATORS: dict[str, Callable[[Sequence[float]], float]] = {
    "median_rounds": statistics.median,
    "median_pairs": lambda logs: statistics.median(_pairs(logs)),
    "hl_pairs": lambda logs: math.log(session_ratio({i: math.exp(x) for i, x in enumerate(logs)})),
}


def round_logs(doc: dict[str, Any], variant: str) -> tuple[list[list[float]], list[float]]:
    """Per session, its rounds' log ratios head/base of block medians, in round order; and per round, the log of
    (first side's block median / second side's)."""
    by_session: dict[int, list[dict[str, Any]]] = {}
    for r in doc["rounds"]:
        by_session.setdefault(r["session"], []).append(r)
    sessions, position = [], []
    for rounds in by_session.values():
        rounds.sort(key=lambda r: r["index"])
        logs = []
        for r in rounds:
            med = {side: statistics.median(r["samples_us"][side][variant]) for side in ("base", "head")}
            logs.append(math.log(med["head"] / med["base"]))
            second = "base" if r["first_side"] == "head" else "head"
            position.append(math.log(med[r["first_side"]] / med[second]))
        sessions.append(logs)
    return sessions, position


def score(sessions: list[list[float]], position: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {f"{name}_sd_pct": round(100 * statistics.pstdev([fn(s) for s in sessions]), 3)
                           for name, fn in ESTIMATORS.items()}
    within = [x - statistics.fmean(_pairs(s)) for s in sessions for x in _pairs(s)]
    out["pair_sd_within_sessions_pct"] = round(100 * math.sqrt(sum(x * x for x in within) / len(within)), 2)
    out["first_side_vs_second_pct"] = round(100 * (math.exp(statistics.median(position)) - 1), 2)
    out["round_logs"] = [[round(x, 5) for x in s] for s in sessions]
    return out


def settled_after(pair: dict[str, Any], estimator: Callable[[Sequence[float]], float], threshold_pct: float,
                  precision_pct: float) -> int | None:
    """The sessions after which ``reportgen ab``'s stopping rule (every variant's interval settled, as
    ``analysis.paired.interval_settled``) would have ended this recorded pair, scoring sessions by ``estimator``;
    None: not within its sessions."""
    variants = list(pair["variants"].values())
    for n in range(MIN_SESSIONS_FOR_INTERVAL, len(variants[0]["round_logs"]) + 1):
        ends = [session_interval([math.exp(estimator(s)) for s in v["round_logs"][:n]])[1:3] for v in variants]
        if all(interval_settled(low, high, threshold_pct, precision_pct) for low, high in ends):
            return n
    return None


def replay(paths: Sequence[Path], threshold_pct: float, precision_pct: float) -> None:
    """Print, per result file and estimator, after how many sessions each recorded pair would have stopped."""
    for path in paths:
        doc = json.loads(path.read_text())
        for name, fn in ESTIMATORS.items():
            print(f"{path.name} {name}: " + ", ".join(str(settled_after(p, fn, threshold_pct, precision_pct) or "-")
                                                      for p in doc["pairs"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replay", type=Path, nargs="+", default=None,
                    help="recorded result files: after how many sessions each pair would have stopped at "
                         "--precision 1 (5 %% threshold), by each estimator ('-': not within its sessions)")
    ap.add_argument("--scenario", choices=sorted(KINDS), default="reduction")
    ap.add_argument("--shape", default=None, help="input shape (default: the scenario's)")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--out", type=Path)
    opts = ap.parse_args()
    if opts.replay:
        replay(opts.replay, 5.0, 1.0)
        return 0
    if opts.out is None:
        ap.error("--out is required to measure")
    shape = opts.shape or ",".join(map(str, KINDS[opts.scenario]["shape"]))
    doc: dict[str, Any] = {"schema_version": 1, "command": " ".join(["benchmarks/session_estimator.py", *sys.argv[1:]]),
                           "machine": {"cpu_count": len(os.sched_getaffinity(0)),
                                       "python": platform.python_version()},
                           "scenario": opts.scenario, "shape": shape, "pairs": []}
    with tempfile.TemporaryDirectory(prefix="session_estimator-") as tmp:
        parent = Path(tmp)
        base = make_checkout(parent, "base", 0.0, kind=opts.scenario)
        head = make_checkout(parent, "head", 0.0, kind=opts.scenario)
        for k in range(opts.pairs):
            doc["before_reference_loop_s"] = doc.get("before_reference_loop_s") or reference_loop_s()
            proc, wall = reportgen("ab", "--base", str(base), "--head", str(head), "--scenario", SCENARIO_NAME,
                                   "--device", "cpu", "--shape", shape, "--variants", "naive,fused", "--sessions",
                                   str(opts.sessions), "--precision", "0", "--format", "json", "--quiet",
                                   "--store", str(parent / f"store-{k}"))
            if proc.returncode not in (0, 7):
                print(proc.stderr[-2000:], file=sys.stderr)
                return 1
            result = json.loads(proc.stdout)
            entry = {"wall_s": round(wall, 2), "sessions": result["sessions"], "utc": _now(),
                     "variants": {v: score(*round_logs(result, v)) for v in ("naive", "fused")}}
            doc["pairs"].append(entry)
            print(f"pair {k + 1}: " + "; ".join(
                f"{v}: " + ", ".join(f"{n} {s[f'{n}_sd_pct']:.2f} %" for n in ESTIMATORS)
                + f", first side {s['first_side_vs_second_pct']:+.1f} %" for v, s in entry["variants"].items()),
                flush=True)
            opts.out.write_text(json.dumps(doc, indent=1) + "\n")
    doc["after_reference_loop_s"] = reference_loop_s()
    doc["summary"] = {v: {n: round(statistics.fmean(p["variants"][v][f"{n}_sd_pct"] for p in doc["pairs"]), 3)
                          for n in ESTIMATORS} for v in ("naive", "fused")}
    opts.out.write_text(json.dumps(doc, indent=1) + "\n")
    print("mean sessions' sd, percent:", json.dumps(doc["summary"]))
    return 0


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


if __name__ == "__main__":
    raise SystemExit(main())
