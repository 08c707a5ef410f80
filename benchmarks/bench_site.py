"""Time ``reportgen build`` over N synthetic runs: a cold build, then adding one run (the append case).

    .venv/bin/python benchmarks/bench_site.py 100 --out benchmarks/results/bench_site.json

Prints seconds and peak RSS, and writes them (with the command and the machine) to --out.
Targets of a later issue: adding one run to a 1,000-run site < 2 s; a 1,000-run cold build
< 60 s and < 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from factories import synthetic_run, write_synthetic  # noqa: E402

from reportgen.site import build_site  # noqa: E402


def _run_id(i: int) -> tuple[str, str]:
    day, hour = divmod(i, 24)
    return f"2026{(day // 28) % 12 + 1:02d}{day % 28 + 1:02d}T{hour:02d}0000Z-cpu-bench-{i:06d}", \
        f"2026-{(day // 28) % 12 + 1:02d}-{day % 28 + 1:02d}T{hour:02d}:00:00Z"


def main(n: int, out_json: Path | None) -> None:
    """Build a store of ``n`` runs, time a cold build and a one-run incremental build."""
    root = Path(tempfile.mkdtemp(prefix="bench-site-"))
    store, out = root / "results", root / "site"
    for i in range(n):
        run_id, created = _run_id(i)
        write_synthetic(store, synthetic_run(run_id=run_id, created_utc=created, with_traces=True,
                                             times_us={"naive": 100.0 + i % 7, "fused": 60.0, "compiled": 30.0}))
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    cold = build_site(store, out, "/")
    t1 = time.perf_counter()
    run_id, created = _run_id(n)
    write_synthetic(store, synthetic_run(run_id=run_id, created_utc=created, with_traces=True))
    t2 = time.perf_counter()
    warm = build_site(store, out, "/")
    t3 = time.perf_counter()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "command": " ".join(sys.argv), "runs": n, "cold_build_s": round(t1 - t0, 2),
        "add_one_run_s": round(t3 - t2, 2), "peak_rss_mib": round(rss_mib), "cold_summary": cold.summary(),
        "add_one_summary": warm.summary(), "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
        "load_average_1min_at_start": round(load_before, 2),
    }
    print(json.dumps(result, indent=1))
    if out_json is not None:
        out_json.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int, nargs="?", default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    main(args.runs, args.out)
