"""Milliseconds per ``load_run`` (read, parse, validate and decode one bundle's run.json), the cost a first build
pays twice per run (once for the catalog, once for the page). Run it with another checkout first on PYTHONPATH to
compare two versions of the decoder on the same bundles, e.g.

    .venv/bin/python benchmarks/load_run_cost.py --store STORE --runs 400 --repeat 3
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/load_run_cost.py --store STORE --runs 400

STORE: a results folder, e.g. one bench_site.py made (its runs are copies of benchmarks/data's real CPU run).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import reportgen
from reportgen.store.loader import list_run_dirs, load_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bundles = list_run_dirs(args.store)[: args.runs]
    load_run(bundles[0])  # imports and the decoders made once, as in a build's worker
    per_run_ms = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        for b in bundles:
            load_run(b)
        per_run_ms.append((time.perf_counter() - start) / len(bundles) * 1000)
    print(f"reportgen from {Path(reportgen.__file__).parent}, Python {platform.python_version()}, "
          f"{len(bundles)} bundles x {args.repeat}: {', '.join(f'{x:.3f}' for x in per_run_ms)} ms per load_run, "
          f"median {statistics.median(per_run_ms):.3f} ms", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
