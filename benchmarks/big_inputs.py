"""Benchmark: peak memory of `build` and `compare` over a run with a million samples, and of `import` over traces of
many tiny events (the hostile case: a gzip of a few bytes per event).

Each command runs in a fresh process under /usr/bin/time-like accounting: this script waits for it and reports its
exit status, wall time and peak resident memory (``ru_maxrss`` of the child). The inputs are generated
(deterministic): the run by the test factories, the traces as N copies of one host op.

    .venv/bin/python benchmarks/big_inputs.py --events 1000000 2000000 10000000 \
        --out benchmarks/results/big_inputs.json

Not part of the unit tests (the 10**7-event trace takes about a minute); see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_CHILD = """
import resource, subprocess, sys, time, json
t0 = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 2),
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
                  "stderr": proc.stderr[-300:]}))
"""


def measured(*args: str, cwd: Path) -> dict[str, object]:
    """``python -m reportgen ARGS`` in a fresh process; its exit status, wall time and peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _CHILD, sys.executable, "-m", "reportgen", *args],
                         capture_output=True, text=True, cwd=cwd, env=env, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def write_events_trace(path: Path, count: int) -> None:
    """``count`` copies of one host op, gzip level 9 (about 0.3 bytes per event)."""
    event = b'{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1}'
    block = b",".join([event] * 10_000)
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b'{"traceEvents": [')
        for i in range(count // 10_000):
            fh.write(b"," + block if i else block)
        fh.write(b"]}")


def million_run(work: Path) -> dict[str, object]:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from factories import synthetic_run, variant, write_synthetic

    store = work / "results"
    for i, t in enumerate((100.0, 103.0)):
        write_synthetic(store, synthetic_run(
            run_id=f"2026112{i + 8}T000000Z-cpu-test-abc12{i}", created_utc=f"2026-11-2{i + 8}T00:00:00Z",
            variants=(variant("naive", t, n=1_000_000), variant("fused", 60.0))))
    return {"build": measured("build", "--runs", str(store), "--out", str(work / "site"), cwd=work),
            "compare": measured("compare", "--store", str(store), "--format", "json", "latest~1", "latest", cwd=work)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, nargs="*", default=[1_000_000], help="trace sizes to import (events)")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    results: dict[str, object] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "load_average_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        results["million_samples"] = million_run(work / "run")
        traces: dict[str, object] = {}
        for n in a.events:
            path = work / f"events{n}.json.gz"
            write_events_trace(path, n)
            row = measured("import", str(path), "--store", str(work / f"store{n}"), cwd=work)
            traces[str(n)] = {"gzip_bytes": path.stat().st_size, **row}
            print(n, traces[str(n)], file=sys.stderr)
        results["import_events"] = traces
    results["load_average_end"] = os.getloadavg()[0]
    text = json.dumps(results, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    t0 = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)
