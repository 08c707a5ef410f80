"""Re-score recorded ``reportgen ab`` verdicts with two intervals over the same recorded sessions.

``ab_noise.py`` records, for every interleaved verdict, each session's change per variant
(``session_changes_pct``). This script replays the coordinator's stopping rule on those
sessions for two interval methods and counts the verdicts:

- ``sign``: the sign-test interval for the median of the session ratios (binomial order
  statistics), which ``reportgen ab`` used up to this change;
- ``signed_rank``: the Wilcoxon signed-rank (Hodges-Lehmann) interval on the logs of the
  session ratios, which ``reportgen ab`` uses now (``reportgen.analysis.paired.session_interval``).

Replay: from the sixth session on, after each session both variants are judged; the pair stops
at the first session count where no variant is inconclusive, else at the last recorded session.
The recorded run stopped where the method it used (``sign``) decided, or at the time budget; a
method that would have needed more sessions than were recorded is scored with the sessions
there are. That under-counts its detections, but also any false alarm it would have raised in
the sessions it did not get: a pair the recorded run ended as decided while the replayed method
was still inconclusive is reported as inconclusive (``unfinished`` counts those).

    .venv/bin/python benchmarks/ab_rescore.py benchmarks/results/ab_noise_sessions_idle_part*.json \\
        --out benchmarks/results/ab_rescore_idle.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL, median, session_interval, verdict_for

Interval = Callable[[Sequence[float]], tuple[float, float, float, float]]


def sign_interval(ratios: Sequence[float]) -> tuple[float, float, float, float]:
    """(median, low, high, coverage): [k-th smallest, k-th largest], k the largest with 2 P(B(n, 1/2) < k) <= 5 %."""
    n, tail, k = len(ratios), 0.0, 0
    while k < n // 2 and 2 * (tail + math.comb(n, k) / 2.0**n) <= 0.05:
        tail, k = tail + math.comb(n, k) / 2.0**n, k + 1
    s = sorted(ratios)
    return (median(s), s[k - 1], s[n - k], 1 - 2 * tail)


METHODS: dict[str, Interval] = {"sign": sign_interval, "signed_rank": session_interval}


def replay(sessions: dict[str, list[float]], interval: Interval, threshold_pct: float, first: int) -> dict[str, Any]:
    """The stopping rule over recorded session ratios (judged from the ``first``-th session on, as ``ab --sessions``):
    the verdicts where the pair stops."""
    last = min(len(r) for r in sessions.values())
    out: dict[str, Any] = {}
    for n in range(max(first, MIN_SESSIONS_FOR_INTERVAL), last + 1):
        out = {"sessions": n, "variants": {}}
        for name, ratios in sessions.items():
            est, low, high, _ = interval(ratios[:n])
            out["variants"][name] = {"verdict": verdict_for(low, high, threshold_pct).value,
                                     "change_pct": round((est - 1) * 100, 2),
                                     "ci_pct": [round((low - 1) * 100, 2), round((high - 1) * 100, 2)]}
        if all(v["verdict"] != "inconclusive" for v in out["variants"].values()):
            break
    return out


def rescore(paths: Sequence[Path]) -> dict[str, Any]:
    counts: dict[str, dict[str, Counter[str]]] = {m: {} for m in METHODS}
    unfinished: dict[str, list[str]] = {m: [] for m in METHODS}
    pairs: list[dict[str, Any]] = []
    for path in paths:
        data = json.loads(path.read_text())
        threshold = float(data["settings"]["threshold"])
        first = int(data["settings"].get("sessions", MIN_SESSIONS_FOR_INTERVAL))
        for group in data["groups"]:
            for cell in group["cells"]:
                if cell["method"] != "interleaved":
                    continue
                for run in cell["runs"]:
                    sessions = {name: [1 + x / 100 for x in v["session_changes_pct"]]
                                for name, v in run.get("variants", {}).items() if v.get("session_changes_pct")}
                    if not sessions or min(len(r) for r in sessions.values()) < MIN_SESSIONS_FOR_INTERVAL:
                        continue
                    recorded = min(len(r) for r in sessions.values())
                    entry = {"file": path.name, "load": group["load"], "case": cell["case"],
                             "recorded_sessions": recorded, "recorded_stop": run.get("stop_reason")}
                    for method, fn in METHODS.items():
                        entry[method] = replay(sessions, fn, threshold, first)
                        open_variants = [f"{n} {v['ci_pct']}" for n, v in entry[method]["variants"].items()
                                         if v["verdict"] == "inconclusive"]
                        if run.get("stop_reason") == "decided" and open_variants:
                            unfinished[method].append(f"{path.name} {cell['case']} ({recorded} sessions): "
                                                      + "; ".join(open_variants))
                        for name, v in entry[method]["variants"].items():
                            key = f"{group['load']} {cell['case']} {name}"
                            counts[method].setdefault(key, Counter())[v["verdict"]] += 1
                    pairs.append(entry)
    return {"schema_version": 1, "command": " ".join(["benchmarks/ab_rescore.py", *sys.argv[1:]]),
            "counts": {m: {k: dict(c) for k, c in sorted(v.items())} for m, v in counts.items()},
            "unfinished": unfinished, "pairs": pairs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path, help="ab_noise.py result files")
    ap.add_argument("--out", type=Path, help="write the re-scored verdicts here (JSON)")
    args = ap.parse_args()
    result = rescore(args.results)
    for method, table in result["counts"].items():
        print(f"== {method}")
        for key, c in table.items():
            print(f"  {key:28s} " + ", ".join(f"{v} {n}" for v, n in sorted(c.items())))
        for line in result["unfinished"][method]:
            print(f"  unfinished: {line}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
