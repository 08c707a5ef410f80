"""A build's first reads of a store's catalog, in fresh processes: the sync (every part's listing columns) and the
history window (each group's latest 500 runs), each timed on its first call and again, with pyarrow's memory pool
as reportgen sets it (the C library's allocator) and with ``ARROW_DEFAULT_MEMORY_POOL=mimalloc`` (pyarrow's
default), alternating, e.g.

    .venv/bin/python benchmarks/catalog_first_read.py --store STORE --repeat 5

STORE: a results folder whose catalog a build has written (e.g. one bench_site.py made, built once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import json, sys, time
from pathlib import Path
from reportgen import catalog
from reportgen.catalog import arrow
from reportgen.store.loader import list_store
store = Path(sys.argv[1])
listing = list_store(store)
start = time.perf_counter(); cat = catalog.sync(store, listing, verify=False); sync_s = time.perf_counter() - start
ids = set(listing.names)
times = []
for _ in range(2):
    start = time.perf_counter(); cat.latest_points(ids, 500); times.append(time.perf_counter() - start)
print(json.dumps({"sync_ms": sync_s * 1e3, "window_first_ms": times[0] * 1e3, "window_again_ms": times[1] * 1e3,
                  "pool": arrow.pa().default_memory_pool().backend_name}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        for pool in ("system", "mimalloc"):
            env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
            if pool == "mimalloc":
                env["ARROW_DEFAULT_MEMORY_POOL"] = pool
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.store)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            row = json.loads(out)
            results.setdefault(row.pop("pool"), []).append(row)
    print(f"{args.store}, {args.repeat} fresh processes per pool, alternating, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    for pool, rows in results.items():
        cells = ", ".join(f"{k} {statistics.median(r[k] for r in rows):.1f} "
                          f"({min(r[k] for r in rows):.1f}-{max(r[k] for r in rows):.1f})" for k in rows[0])
        print(f"{pool}: median (range) {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
