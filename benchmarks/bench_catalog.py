"""Time reading one history series from a large catalog (Parquet), without bundles beside it.

    .venv/bin/python benchmarks/bench_catalog.py --runs 1000 10000 100000 --out benchmarks/results/bench_catalog.json

The catalog is written directly (one compacted part, as a compaction leaves it): run i is the digest of the real
CPU profile in ``benchmarks/data/20261130T052940Z-cpu-286a49`` with its own id, time and medians, in one of
``--series`` history groups (its shape parameter). Timed, each in a fresh Python process so that the
imports count (the median of ``--repeat``): listing every run (the runs table without digests), and one
series' history (the points table filtered by the group key, then the group built: what a history chart draws).
A fixed reference loop is timed beside each figure (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "benchmarks" / "data" / "20261130T052940Z-cpu-286a49"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import reference_loop_s  # noqa: E402

from reportgen.analysis.history import VariantDigest, digest, group_key, group_points, key_text  # noqa: E402
from reportgen.catalog import table  # noqa: E402
from reportgen.model.codec import to_jsonable  # noqa: E402
from reportgen.store.loader import load_run  # noqa: E402

READ_ONE_SERIES = """
import sys, time, json
t0 = time.perf_counter()
from pathlib import Path
from reportgen.catalog import table
from reportgen.analysis.history import groups_from_points
parts = table.list_parts(Path(sys.argv[1]))
points = [p for _, p in table.read_points(parts, sys.argv[2])]
(group,) = groups_from_points(points)
t1 = time.perf_counter()
rows = table.read_runs(parts)
t2 = time.perf_counter()
print(json.dumps({"series_s": t1 - t0, "series_runs": len(group.run_ids),
                  "series_points": sum(len(s.points) for s in group.series), "list_all_s": t2 - t1,
                  "listed": len(rows)}))
"""


def write_catalog(folder: Path, n: int, series: int) -> str:
    """One part of ``n`` runs spread over ``series`` groups; returns the first group's key."""
    base = digest(load_run(TEMPLATE))
    rows, points = [], []
    for i in range(n):
        created = _time(i)
        variants = tuple(replace(v, median_us=(v.median_us or 1.0) * (1 + (i % 7) / 100),
                                 ci_low_us=v.ci_low_us, ci_high_us=v.ci_high_us) for v in base.variants)
        d = replace(base, run_id=f"run-{i:07d}", created_utc=created, variants=tuple(
            VariantDigest(v.name, v.status, v.median_us, v.ci_low_us, v.ci_high_us, v.speedup) for v in variants),
            parameters={**base.parameters, "shape": f"8,{512 + i % series}"})
        rows.append(table.CatalogRun(d.run_id, created, d.scenario, d.device.value, d.machine, "0" * 64, 1000, i,
                                     key_text(group_key(d)), json.dumps(to_jsonable(d), sort_keys=True)))
        points += group_points(d)
    table.write_part(folder, rows, points)
    return points[0].key


def _time(i: int) -> str:
    day, minute = divmod(i, 1440)
    return f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:00Z"


def bench(n: int, series: int, repeat: int, work: Path) -> dict[str, object]:
    folder = work / f"catalog-{n}"
    t0 = time.perf_counter()
    key = write_catalog(folder, n, series)
    written = time.perf_counter() - t0
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", READ_ONE_SERIES, str(folder), key], check=True,
                             capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        figures = json.loads(out.stdout)
        figures["process_wall_s"] = time.perf_counter() - start
        runs.append(figures)
    median = sorted(runs, key=lambda r: r["series_s"])[len(runs) // 2]
    size = sum(p.stat().st_size for p in folder.iterdir())
    return {"runs": n, "series": series, "catalog_bytes": size, "catalog_written_s": round(written, 1),
            "read_one_series_s_median": round(median["series_s"], 3),
            "read_one_series_s_all": [round(r["series_s"], 3) for r in runs],
            "process_wall_s_median": round(sorted(r["process_wall_s"] for r in runs)[len(runs) // 2], 3),
            "series_runs": median["series_runs"], "series_points": median["series_points"],
            "list_all_runs_s_median": round(sorted(r["list_all_s"] for r in runs)[len(runs) // 2], 3),
            "reference_s": reference_loop_s(), "load_average_1min": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--series", type=int, default=10, help="history groups the runs are spread over")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-catalog-") as work:
        for n in args.runs:
            r = bench(n, args.series, args.repeat, Path(work))
            print(json.dumps(r), flush=True)
            results.append(r)
    doc = {"command": " ".join([".venv/bin/python", "benchmarks/bench_catalog.py", *sys.argv[1:]]),
           "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
           "timing": "time.perf_counter in a fresh process, imports included (series_s); median of --repeat",
           "target": "one series of a 100,000-run catalog read in <= 1 s", "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
