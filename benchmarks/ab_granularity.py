"""How finely ``reportgen ab`` should interleave: the spread between sessions of A/A pairs for several block sizes.

Each configuration is ``samples discard rounds``: per round, each side runs one block of ``discard`` untimed then
``samples`` timed samples per variant; a session is one priming round then ``rounds`` rounds in ABBA order. Every
configuration measures the same A/A pair (this checkout's ``rmsnorm``, ``naive`` and ``fused``, on both sides) for
exactly ``--sessions`` sessions (no stopping rule), and records per variant the change of every session (100 x the
log of the session ratio), their standard deviation (the spread the interval over sessions has to beat), the
interval and the seconds per session. Configurations are taken in turn, ``--repeats`` times, so drift of the
machine spreads over all of them.

    .venv/bin/python benchmarks/ab_granularity.py --configs "8 1 4" "2 0 16" "1 0 32" \\
        --out benchmarks/results/ab_granularity_idle.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from machine import reference_loop_s  # benchmarks/machine.py, beside this script

from reportgen.ab.coordinator import coordinate
from reportgen.ab.process import PairSpawner
from reportgen.ab.settings import AbSettings

ROOT = Path(__file__).resolve().parent.parent


def measure(samples: int, discard: int, rounds: int, sessions: int, shape: tuple[int, ...] | None) -> dict[str, Any]:
    """One A/A pair of exactly ``sessions`` sessions with this block size."""
    settings = AbSettings(samples_per_block=samples, discard_per_block=discard, rounds_per_session=rounds,
                          min_sessions=sessions, max_sessions=sessions, max_seconds=1e9, variants=("naive", "fused"),
                          shape=shape, device="cpu")
    t0 = time.monotonic()
    result = coordinate(PairSpawner(settings, os.environ), {"base": str(ROOT), "head": str(ROOT)}, "rmsnorm", settings)
    wall = time.monotonic() - t0
    out: dict[str, Any] = {"settings": [samples, discard, rounds, sessions], "wall_s": wall,
                           "per_session_s": wall / sessions, "rounds_s": result.rounds_s, "warm_s": result.warm_s}
    for v in result.variants:
        assert v.stats is not None
        logs = [100 * math.log(x) for x in v.stats.session_ratios]
        out[v.name] = {"change": round(100 * (v.stats.ratio - 1), 2),
                       "ci": [round(100 * (v.stats.ci_low - 1), 2), round(100 * (v.stats.ci_high - 1), 2)],
                       "sd_session_pct": round(statistics.stdev(logs), 2), "sessions": [round(x, 1) for x in logs],
                       "verdict": v.stats.verdict.value}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", nargs="+", default=["8 1 4", "2 0 16", "1 0 32"],
                   help='each "samples discard rounds"')
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--shape", default=None, help="default: the scenario's")
    p.add_argument("--out", type=Path, required=True)
    opts = p.parse_args()
    shape = tuple(int(d) for d in opts.shape.split(",")) if opts.shape else None
    doc: dict[str, Any] = {"schema_version": 1, "machine": platform.platform(), "python": platform.python_version(),
                           "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                           "reference_loop_s_before": reference_loop_s(), "runs": []}
    for _ in range(opts.repeats):
        for config in opts.configs:
            samples, discard, rounds = (int(x) for x in config.split())
            doc["runs"].append(measure(samples, discard, rounds, opts.sessions, shape))
            print(json.dumps(doc["runs"][-1]), flush=True)
            opts.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    doc["reference_loop_s_after"] = reference_loop_s()
    opts.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
