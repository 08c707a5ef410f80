"""How many samples per block and rounds per session: A/A pairs of ``reportgen ab`` on one of ``ab_noise.py``'s ops.

Each configuration is a list of ``reportgen ab`` flags (for example ``--samples 1 --rounds 64``). Every configuration
measures the same A/A pair (the op's checkout against an identical copy) for exactly ``--sessions`` sessions
(``--precision 0``: no stopping rule before them), and records per variant the standard deviation of the sessions'
changes (100 x the log of each session's ratio) and the mean later session's seconds (from ``session_s``, the first
session left out: it loads, compiles and calibrates). Configurations are taken in turn, ``--repeats`` times, so drift
of the machine spreads over all of them.

What a configuration costs for a verdict of a given width is about sd² × seconds per session (the sessions needed
scale with sd², each costs its seconds); lower is better.

    .venv/bin/python benchmarks/ab_block_shape.py --scenario reduction --repeats 4 \\
        --config A= --config "E=--samples 1 --rounds 64" --out benchmarks/results/ab_block_shape_reduction.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ab_noise import KINDS, SCENARIO_NAME, make_checkout, reportgen  # beside this script
from machine import reference_loop_s


def one_pair(base: Path, head: Path, shape: str, sessions: int, flags: list[str], store: Path) -> dict[str, Any]:
    """One A/A pair of exactly ``sessions`` sessions with these extra flags."""
    proc, wall = reportgen("ab", "--base", str(base), "--head", str(head), "--scenario", SCENARIO_NAME, "--device",
                           "cpu", "--shape", shape, "--variants", "naive,fused", "--sessions", str(sessions),
                           "--precision", "0", "--format", "json", "--quiet", "--store", str(store), *flags)
    if proc.returncode not in (0, 7):
        raise SystemExit(f"ab exited {proc.returncode}: {proc.stderr[-1000:]}")
    doc = json.loads(proc.stdout)
    out: dict[str, Any] = {"wall_s": round(wall, 3), "later_session_s": round(statistics.mean(doc["session_s"][1:]), 3),
                           "rounds_s": round(doc["rounds_s"], 3), "sessions": doc["sessions"]}
    for v in doc["variants"]:
        logs = [100 * math.log(x) for x in v["stats"]["session_ratios"]]
        out[v["name"]] = {"sd_session_pct": round(statistics.stdev(logs), 3), "mean_pct": round(statistics.mean(logs), 3)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=sorted(KINDS), default="reduction")
    p.add_argument("--config", action="append", required=True, metavar="NAME=FLAGS",
                   help='a name and the reportgen ab flags it adds, e.g. "E=--samples 1 --rounds 64" (repeatable; '
                        '"A=" is the defaults)')
    p.add_argument("--sessions", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, required=True)
    opts = p.parse_args()
    configs = {name: flags.split() for name, _, flags in (c.partition("=") for c in opts.config)}
    shape = ",".join(map(str, KINDS[opts.scenario]["shape"]))
    doc: dict[str, Any] = {"schema_version": 1, "machine": platform.platform(), "python": platform.python_version(),
                           "scenario": opts.scenario, "shape": shape, "configs": configs,
                           "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                           "reference_loop_s_before": reference_loop_s(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="ab_block_shape-") as tmp:
        parent = Path(tmp)
        base = make_checkout(parent, "base", 0.0, kind=opts.scenario)
        head = make_checkout(parent, "head", 0.0, kind=opts.scenario)
        for _ in range(opts.repeats):
            for name, flags in configs.items():
                run = {"config": name, **one_pair(base, head, shape, opts.sessions, flags,
                                                  parent / f"store-{len(doc['runs'])}")}
                doc["runs"].append(run)
                print(json.dumps(run), flush=True)
                opts.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    doc["reference_loop_s_after"] = reference_loop_s()
    doc["summary"] = summary(doc["runs"])
    opts.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(doc["summary"], indent=1))


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per configuration and variant: the root mean square of the pairs' session sd, the mean later session's
    seconds, and their cost figure sd² × seconds."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r["config"] for r in runs):
        mine = [r for r in runs if r["config"] == name]
        seconds = statistics.mean(r["later_session_s"] for r in mine)
        entry: dict[str, Any] = {"pairs": len(mine), "later_session_s": round(seconds, 3)}
        for variant in ("naive", "fused"):
            sd = math.sqrt(statistics.mean(r[variant]["sd_session_pct"] ** 2 for r in mine))
            entry[variant] = {"sd_session_pct_rms": round(sd, 2), "sd2_x_seconds": round(sd * sd * seconds, 1)}
        out[name] = entry
    return out


if __name__ == "__main__":
    main()
