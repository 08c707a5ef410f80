"""Does 10 % more work show as 10 % more time? Wall time against CPU time, idle and with one core busy.

In one process, alternating: ``torch.rms_norm`` on the default shape (8, 1024, 1024) and on 10 % more rows
(the same op and threads, 10 % more data). Each call is timed by the wall clock and by the CPU time of all the
process's threads (``getrusage`` user + sys). The medians of both are compared, idle and then with one extra
Python process spinning on one core (the ``busy`` load of ``ab_noise.py``). A lead for a CPU-time clock in
``reportgen ab``, which times wall-clock time; nothing in reportgen uses CPU time yet.

    .venv/bin/python benchmarks/cpu_time_probe.py --out benchmarks/results/cpu_time_probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ab_noise import start_load, stop_load  # benchmarks/ab_noise.py, beside this script
from machine import reference_loop_s

ROOT = Path(__file__).resolve().parent.parent


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def calls(extra: float) -> dict[str, Callable[[], object]]:
    import torch

    torch.manual_seed(0)
    x = torch.randn(8 * 1024, 1024)
    w = torch.ones(1024)
    more = torch.cat([x, x[: round(extra * x.shape[0])]])
    return {"base": lambda: torch.rms_norm(x, (1024,), w, 1e-6),
            "more": lambda: torch.rms_norm(more, (1024,), w, 1e-6)}


def measure(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, Any]:
    """``rounds`` rounds of 2 calls of each function in turn; medians and coefficients of variation per clock."""
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(rounds):
        for name, f in fns.items():
            for _ in range(2):
                c0, t0 = cpu_s(), time.perf_counter()
                f()
                t1, c1 = time.perf_counter(), cpu_s()
                wall[name].append(t1 - t0)
                cpu[name].append(c1 - c0)
    out: dict[str, Any] = {}
    for clock, data in (("wall", wall), ("cpu", cpu)):
        med = {k: statistics.median(v) * 1e3 for k, v in data.items()}
        out[clock] = {"median_ms": {k: round(v, 2) for k, v in med.items()},
                      "ratio": round(med["more"] / med["base"], 3),
                      "cv_pct": {k: round(statistics.pstdev(v) / statistics.mean(v) * 100, 1) for k, v in data.items()}}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--extra", type=float, default=0.10, help="extra rows, as a fraction (default 0.10)")
    p.add_argument("--rounds", type=int, default=150)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu_time_probe.json")
    opts = p.parse_args()
    fns = calls(opts.extra)
    doc: dict[str, Any] = {"schema_version": 1, "machine": {"hostname": platform.node(), "cpu_count": os.cpu_count()},
                           "settings": {"extra": opts.extra, "rounds": opts.rounds, "shape": [8, 1024, 1024]},
                           "loads": {}}
    for load in ("idle", "busy"):
        loader = start_load(load)
        try:
            before = {"utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      "reference_loop_s": reference_loop_s()}
            doc["loads"][load] = {"before": before, **measure(fns, opts.rounds)}
        finally:
            stop_load(loader)
        print(load, json.dumps(doc["loads"][load]), flush=True)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"written: {opts.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
