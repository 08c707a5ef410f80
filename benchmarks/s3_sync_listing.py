"""What a build's mirror of an S3 store costs when no run is new: ``sync_store(members=False)`` with a warm mirror
(every ``run.json`` already in it), which a build of a cached site from an object store does before anything else.

moto's S3 server runs on 127.0.0.1 (in this process); ``--runs`` runs of bench_site.py's synthetic store (the real
CPU run in benchmarks/data: a ``run.json`` and three traces, four objects a run) are uploaded once. Each code folder
given (``--code``, first on PYTHONPATH: a worktree of another commit) gets a mirror of its own, filled by a first
sync; then the codes alternate, ``--repeat`` warm syncs each, each in a fresh process, timed around the call alone.
Also timed in this process, alternating: the store's two listings, every object (``fs.find``, what the base's
``run_ids`` did; the file of 2,000 runs in results/ names it ``run_ids``) and one level (``listed_ids``).

    python benchmarks/s3_sync_listing.py --runs 2000 --code /tmp/base --code . --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_s3_build import s3_store_of  # noqa: E402
from machine import reference_loop_s  # noqa: E402

CHILD = """
import sys, time
from pathlib import Path
from reportgen.store.objects import ObjectStore, sync_store
store, cache = ObjectStore.open(sys.argv[1]), Path(sys.argv[2])
start = time.perf_counter()
fetched = sync_store(store, cache, members=False)
print(time.perf_counter() - start, len(fetched))
"""


def _sync(code: Path, url: str, cache: Path, env: dict[str, str]) -> tuple[float, int]:
    proc = subprocess.run([sys.executable, "-c", CHILD, url, str(cache)], env={**env, "PYTHONPATH": str(code)},
                          cwd=cache.parent, capture_output=True, text=True, check=True)
    seconds, fetched = proc.stdout.split()
    return float(seconds), int(fetched)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--code", type=Path, action="append", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with s3_store_of(args.runs, "bench-s3-sync-") as (env, store, work):
        objects = len(store.fs.find("bench/runs"))
        machine = f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        print(json.dumps({"machine": machine, "runs": args.runs, "objects": objects}))
        caches = {code: work / f"mirror-{n}" for n, code in enumerate(args.code)}
        for code, cache in caches.items():
            print(json.dumps({"code": str(code), "first_sync_s_and_fetched": _sync(code.resolve(), store.url, cache,
                                                                                   env)}))
        walls: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for code, cache in caches.items():
                seconds, fetched = _sync(code.resolve(), store.url, cache, env)
                assert fetched == 0, fetched
                walls.setdefault(str(code), []).append(seconds)
        listings: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            listings.setdefault("fs.find (every object)", []).append(_timed(lambda: store.fs.find(store.root)))
            listings.setdefault("listed_ids (one level)", []).append(_timed(store.listed_ids))
        for code, times in walls.items():
            print(json.dumps({"code": code, "warm_sync_median_s": round(statistics.median(times), 3),
                              "warm_sync_s": [round(t, 3) for t in times]}))
        for name, times in listings.items():
            print(json.dumps({"listing": name, "median_s": round(statistics.median(times), 3),
                              "s": [round(t, 3) for t in times]}))
        print(json.dumps({"reference_loop_s": reference_loop_s()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
