"""Storing one run into stores of different sizes: ``write_bundle``, what ``profile``, ``import`` and ``ab`` call for
each run they store, timed in a fresh process per write (medians of ``--repeat``), for each ``--code`` checkout, e.g.

    .venv/bin/python benchmarks/store_one_run.py --store STORE1 --store STORE2 --code /tmp/base --code . --repeat 7

The writes of a round go into one hard-linked copy of each store (bundles are never changed in place; each code's
write adds one run), of synthetic runs as ``bench_site.py`` makes them; codes alternate which writes first, and
stores and rounds alternate, so a busy machine slows every cell alike. Wall times of the
write alone (the process's imports excluded); what grows from the small store to the big one is the work a write
does per stored run.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import sys, time
from pathlib import Path
import reportgen.store.writer  # from PYTHONPATH (the code measured), before bench_site puts this checkout first
sys.path.insert(0, sys.argv[3])
import bench_site
from reportgen.store.loader import load_run
template = load_run(bench_site.TEMPLATE)
traces = {v.trace_path: (bench_site.TEMPLATE / v.trace_path).read_bytes() for v in template.variants if v.trace_path}
run = bench_site.synthetic(template, int(sys.argv[2]))
start = time.perf_counter()
bench_site.write_bundle(Path(sys.argv[1]), run, dict(traces))
print(time.perf_counter() - start)
assert bench_site.write_bundle.__module__ == "reportgen.store.writer" and reportgen.store.writer.__file__.startswith(
    sys.argv[4]), reportgen.store.writer.__file__
"""


def one_write(copy: Path, code: Path, number: int) -> float:
    """Seconds to store run ``number`` into the store ``copy`` with the reportgen of ``code``."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(copy), str(number), str(Path(__file__).parent), str(code)],
                         check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(code)})
    return float(out.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, action="append", required=True)
    parser.add_argument("--code", type=Path, action="append", default=None, help="a reportgen checkout (default: .)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    codes = [c.resolve() for c in args.code or [Path(".")]]
    cells: dict[tuple[Path, Path], list[float]] = {}
    with tempfile.TemporaryDirectory(dir=args.store[0].parent) as tmp:  # beside the stores: hard links need one disk
        copy = Path(tmp) / "store"
        for k in range(args.repeat):
            for store in args.store:
                subprocess.run(["cp", "-al", str(store), str(copy)], check=True)
                order = codes if k % 2 == 0 else codes[::-1]  # each code writes first in every other round
                for j, code in enumerate(order):
                    cells.setdefault((store, code), []).append(one_write(copy, code, 900_000 + 10 * k + j))
                shutil.rmtree(copy)
    print(f"{' '.join(['benchmarks/store_one_run.py', *sys.argv[1:]])}; {platform.platform()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}; {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    print("| store | runs | code | one write, median (ms) | range (ms) |\n|---|---|---|---|---|")
    for (store, code), times in cells.items():
        runs = sum(1 for n in os.listdir(store) if not n.startswith("."))
        ms = sorted(t * 1000 for t in times)
        print(f"| {store} | {runs} | {code} | {statistics.median(ms):.1f} | {ms[0]:.1f}-{ms[-1]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
