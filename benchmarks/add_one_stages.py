"""Where adding one run's build spends its time, stage by stage, at two store sizes: each stage of
``reportgen build`` (planning, the catalog, the manifest, the lists) timed in the build process, medians of
``--repeat`` adds, e.g.

    .venv/bin/python benchmarks/add_one_stages.py --small STORE1 SITE1 --big STORE2 SITE2 --repeat 5

Each add builds a hard-linked copy of a store (one synthetic run added, as bench_site.py makes them) and of its
site, in one process (jobs=1, the new page drawn here), with the renderer version held to the one the site's
manifest names (as pinned_add.py does), so code changed since the site was built redraws nothing. A stage's time
includes the stages it calls; a stage called twice is summed; "python's cyclic collector" sums the collections run in
the build process (a ``gc.callbacks`` hook), within whichever stages they fell. The code measured is the one Python
imports: this checkout's, or a worktree's first on PYTHONPATH. Wall times on a shared machine: the two sizes are
measured alternately, and the differences between them, not the absolute times, are what to read.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = """
import functools, importlib, json, re, sys, time
from pathlib import Path
import reportgen.site.build as build
import reportgen.site.fs as fs
import reportgen.site.plan as plan
catalog_sync = importlib.import_module("reportgen.catalog.sync")
times = {}

def timed(module, name, label):
    inner = getattr(module, name)
    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - start
    setattr(module, name, wrapper)

store, site = Path(sys.argv[1]), Path(sys.argv[2])
version = re.search(r'"renderer_version": (?:\\[\\n)?"([^"]*)"', (site / "manifest.json").read_text()).group(1)
plan.renderer_version = lambda *a, **k: version
for module, name, label in (
        (build, "read_old_site", "read the old manifest"), (plan, "list_store", "list the store"),
        (plan.catalog, "sync", "catalog: sync (whole)"), (catalog_sync, "_current_rows", "catalog: read the parts"),
        (catalog_sync, "_write_back", "catalog: write the new part"), (plan.Catalog, "columns", "catalog: columns"),
        (plan, "retired_runs", "plan: retention"), (plan, "_reused", "plan: reused pages"),
        (plan.SiteRuns, "add_reused", "plan: reused runs' columns"), (build, "gather", "plan (whole)"),
        (build, "write_archive", "lists: archive pages"), (build, "history_charts", "lists: history (whole)"),
        (plan.Catalog, "latest_points", "lists: history windows from the catalog"),
        (build, "digests_of", "lists: index digests"), (build, "write_index", "lists: index page"),
        (build, "write_manifest", "write the manifest"), (fs, "commit", "swap the site in")):
    timed(module, name, label)
import gc
collecting = [0.0]

def collector(phase, info):  # Python's cyclic collector, each time it runs in the build process
    if phase == "start":
        collecting[0] = time.perf_counter()
    else:
        times["python's cyclic collector"] = times.get("python's cyclic collector", 0.0) + time.perf_counter() - collecting[0]

gc.callbacks.append(collector)
start = time.perf_counter()
build.build_site(store, site, "/", jobs=1, keep_traces=20)
times["build_site (whole)"] = time.perf_counter() - start
print(json.dumps({k: v * 1000 for k, v in times.items()}))
"""


def one_add(store: Path, site: Path, number: int, work: Path) -> dict[str, float]:
    """Add run ``number`` to copies of ``store`` and ``site`` and time the build's stages (ms)."""
    bench_site: Any = importlib.import_module("bench_site")
    try_store, try_site = work / "store", work / "site"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    subprocess.run(["cp", "-al", str(store), str(try_store)], check=True)
    subprocess.run(["cp", "-al", str(site), str(try_site)], check=True)
    bench_site.make_store(try_store, number, 1)
    out = subprocess.run([sys.executable, "-c", CHILD, str(try_store), str(try_site)], check=True,
                         capture_output=True, text=True, env={**os.environ, "REPORTGEN_JOBS": "1"})
    shutil.rmtree(work)
    return dict(json.loads(out.stdout.splitlines()[-1]))


def main() -> int:
    sys.path.insert(0, str(Path(__file__).parent))  # bench_site, beside this script
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", nargs=2, type=Path, required=True, metavar=("STORE", "SITE"))
    parser.add_argument("--big", nargs=2, type=Path, required=True, metavar=("STORE", "SITE"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cells: dict[str, dict[str, list[float]]] = {"small": {}, "big": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeat):
            for size in ("small", "big"):
                store, site = getattr(args, size)
                for label, ms in one_add(store, site, 900_000 + k, Path(tmp) / "work").items():
                    cells[size].setdefault(label, []).append(ms)
    print(f"small {args.small[0]}, big {args.big[0]}; {args.repeat} adds each, alternating; "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    print("| stage | small (ms, median) | big (ms, median) | big - small |\n|---|---|---|---|")
    for label in sorted(cells["big"], key=lambda name: -statistics.median(cells["big"][name])):
        small, big = (statistics.median(cells[s].get(label, [0.0])) for s in ("small", "big"))
        print(f"| {label} | {small:.1f} | {big:.1f} | {big - small:+.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
