"""How far A/A estimates stray, by how wide their interval was: recorded ``ab_noise.py`` results, no measuring.

For every A/A verdict's variant in the given result files: its point estimate (the gate's Hodges-Lehmann change, in
percent) and the half-width of its interval ((high - low) / 2, percent). Prints, per half-width bin, how many
estimates lay beyond ``--within`` percent of zero.

``--replay 0,2``: the same recorded sessions judged again by ``reportgen ab``'s stopping rule with each
``--precision`` (``reportgen.analysis.paired``: the interval after 6, 7, ... sessions; a pair stops when every variant
is settled). A replay can stop earlier than the recorded pair did, never later: a precision the recorded pair did not
reach stops at its last recorded session (counted as "ran out"). Both precisions then judge the very same sessions,
so their estimates compare side by side, machine noise and all. Prints, per precision, the unchanged variants'
estimates (A/A pairs' both variants, slowdown pairs' ``naive``): their spread, how many lay beyond ``--within``, the
sessions and the seconds (the recorded sessions' own) a verdict took.

    python benchmarks/aa_precision.py benchmarks/results/ab_noise_elementwise_precision_idle.json --replay 0,2
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reportgen.ab.settings import AbSettings
from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL, interval_settled, session_interval

FIRST_LOOK = max(AbSettings().min_sessions, MIN_SESSIONS_FOR_INTERVAL)
"""``reportgen ab``'s first look: after its default ``--sessions``."""

BINS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)


def aa_estimates(doc: dict[str, Any]) -> Iterator[tuple[float, float]]:
    """(change %, half-width %) of each variant of each A/A verdict in one result file."""
    for group in doc["groups"]:
        for cell in group["cells"]:
            if cell.get("case") not in ("aa", "aasame"):
                continue
            for run in cell["runs"]:
                for v in (run.get("variants") or {}).values():
                    if v.get("change_pct") is None or v.get("ci_low_pct") is None:
                        continue
                    yield v["change_pct"], (v["ci_high_pct"] - v["ci_low_pct"]) / 2.0


def table(estimates: list[tuple[float, float]], within: float) -> list[str]:
    lines = [f"| half-width at most | estimates | beyond ±{within:g} % | share |", "|---|---|---|---|"]
    for top in (*BINS, float("inf")):
        inside = [c for c, hw in estimates if hw <= top]
        out = sum(1 for c in inside if abs(c) > within)
        label = "any" if top == float("inf") else f"{top:g} %"
        share = f"{100.0 * out / len(inside):.1f} %" if inside else "-"
        lines.append(f"| {label} | {len(inside)} | {out} | {share} |")
    wide = [c for c, hw in estimates if hw > 2.0]
    lines.append(f"\nwider than ±2 %: {len(wide)} estimates, {sum(1 for c in wide if abs(c) > within)} beyond "
                 f"±{within:g} %; largest |estimate| overall: {max((abs(c) for c, _ in estimates), default=0):.2f} %")
    return lines


def replay(run: dict[str, Any], precision: float, threshold: float) -> tuple[dict[str, float], int, bool]:
    """Per variant, the estimate (percent) at which ``reportgen ab`` with ``precision`` would have stopped this
    recorded pair; the sessions it took; and whether the recording ran out first."""
    changes = {name: v["session_changes_pct"] for name, v in run["variants"].items()}
    last = min(len(c) for c in changes.values())
    for n in range(FIRST_LOOK, last + 1):
        looks = {name: session_interval([1.0 + x / 100.0 for x in c[:n]]) for name, c in changes.items()}
        if all(interval_settled(low, high, threshold, precision) for _est, low, high, _ in looks.values()):
            return {name: (est - 1.0) * 100.0 for name, (est, *_rest) in looks.items()}, n, False
    return {name: (est - 1.0) * 100.0 for name, (est, *_rest) in looks.items()}, last, True


def replay_table(docs: list[dict[str, Any]], precisions: list[float], within: float) -> list[str]:
    lines = [f"| --precision | unchanged estimates | sd | range | beyond ±{within:g} % | sessions, median | "
             "verdict's sessions' seconds, median (max) | recordings ran out |", "|---|---|---|---|---|---|---|---|"]
    for precision in precisions:
        estimates: list[float] = []
        sessions: list[int] = []
        seconds: list[float] = []
        ran_out = 0
        for doc in docs:
            threshold = doc["settings"]["threshold"]
            for group in doc["groups"]:
                for cell in group["cells"]:
                    for run in cell["runs"]:
                        if not run.get("variants") or any(not v.get("session_changes_pct")
                                                          for v in run["variants"].values()):
                            continue
                        found, n, out = replay(run, precision, threshold)
                        unchanged = found if cell["case"] in ("aa", "aasame") else {"naive": found["naive"]}
                        estimates += unchanged.values()
                        sessions.append(n)
                        seconds.append(sum(run["session_s"][:n]))
                        ran_out += out
        beyond = sum(1 for e in estimates if abs(e) > within)
        lines.append(f"| {precision:g} | {len(estimates)} | {statistics.stdev(estimates):.2f} % | "
                     f"{min(estimates):+.2f} to {max(estimates):+.2f} % | {beyond} | {statistics.median(sessions):g} | "
                     f"{statistics.median(seconds):.1f} s ({max(seconds):.1f} s) | {ran_out} of {len(sessions)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", type=Path, help="ab_noise.py result files")
    p.add_argument("--within", type=float, default=1.5, help="how far from zero an estimate may lie (default 1.5)")
    p.add_argument("--replay", default="", help="precisions to replay the recorded sessions with, e.g. 0,2")
    opts = p.parse_args(argv)
    docs = [json.loads(path.read_text()) for path in opts.results]
    estimates = [e for doc in docs for e in aa_estimates(doc)]
    print("\n".join(table(estimates, opts.within)))
    if opts.replay:
        print()
        print("\n".join(replay_table(docs, [float(x) for x in opts.replay.split(",")], opts.within)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
