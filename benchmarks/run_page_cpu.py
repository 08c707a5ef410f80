"""CPU time of rendering one run page in process (charts, tables, Markdown, data copies).

    .venv/bin/python benchmarks/run_page_cpu.py

Renders the page of ``benchmarks/data/20261130T052940Z-cpu-286a49`` (three variants, three
timelines) 15 batches of 3 times and prints the minimum per page: the least disturbed figure on a
shared machine. The build's cold time at scale is about this times the run count over the cores.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reportgen.site import pages as site  # noqa: E402
from reportgen.store.loader import load_run  # noqa: E402

BUNDLE = ROOT / "benchmarks" / "data" / "20261130T052940Z-cpu-286a49"


def main() -> None:
    run = load_run(BUNDLE)
    work = Path(tempfile.mkdtemp(prefix="run-page-cpu-"))
    try:
        def once(i: int) -> None:
            dest = work / str(i)
            shutil.rmtree(dest, ignore_errors=True)
            site.write_run_page(run, BUNDLE, dest)

        once(0)  # imports, template compilation, the reused figure
        best = float("inf")
        for _ in range(15):
            t0 = time.process_time()
            for i in range(1, 4):
                once(i)
            best = min(best, (time.process_time() - t0) / 3)
        print(f"write_run_page: {best * 1000:.1f} ms CPU per page (minimum of 15 batches of 3)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
