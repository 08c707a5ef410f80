"""Reading and writing a site's ``manifest.json``, in one process, with the reportgen on PYTHONPATH.

Times ``read_old_site`` on the site given, then ``write_manifest`` of what it read (every run's page reused, into a
temporary folder), ``--repeat`` times each; prints the fastest and the median in ms. Run it with another commit's
code (a worktree first on PYTHONPATH) on a site that commit wrote to compare two manifest formats:

    PYTHONPATH=/tmp/base .venv/bin/python benchmarks/manifest_io.py --site SITE_V2 --repeat 15
    .venv/bin/python benchmarks/manifest_io.py --site SITE_V3 --repeat 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from reportgen.site import manifest


def _timed(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return {"fastest_ms": round(min(times) * 1000, 2), "median_ms": round(statistics.median(times) * 1000, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    old = manifest.read_old_site(args.site)
    runs = manifest.SiteRuns()
    renderer = next(iter(old.runs.renderer.values()))
    runs.add_reused(old.runs.ids(), old.runs.sha256, old.runs.created_utc, renderer, old.runs.retired)
    text = (args.site / "manifest.json").read_text()
    with tempfile.TemporaryDirectory() as out:
        print(json.dumps({"site": str(args.site), "runs": len(old.runs), "manifest_bytes": len(text.encode()),
                          "schema_version": json.loads(text)["schema_version"], "repeat": args.repeat,
                          "read": _timed(lambda: manifest.read_old_site(args.site), args.repeat),
                          "write": _timed(lambda: manifest.write_manifest(runs, Path(out), "/", old.lists),
                                          args.repeat)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
