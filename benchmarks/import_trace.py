"""Benchmark: `reportgen import` of a large Kineto-shaped trace against plain `json.load` of the same file.

Generates a trace of the requested size (default 200 MB, plain JSON, deterministic), then runs
each measurement in its own fresh Python process, which reports its wall time and its peak
resident memory (``ru_maxrss``). ``json.load`` is the floor: any reader must at least parse
the file. An ``idle`` process (same imports, no work) gives the interpreter's own footprint.

    .venv/bin/python benchmarks/import_trace.py --size-mb 200 --repeat 3 \
        --out benchmarks/results/import_trace.json

Not part of the unit tests (it takes minutes); see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("idle", "json_load", "read_trace", "import")


def generate_trace(path: Path, size_bytes: int, seed: int = 0) -> int:
    """Write a Kineto-like trace (steps, nested ops, launches, kernels, flows) of about ``size_bytes``; return events."""
    rng = random.Random(seed)
    ops = ["aten::mul", "aten::mean", "aten::add", "aten::rsqrt", "aten::_fused_rms_norm", "aten::copy_"]
    count = 0
    written = 0
    t = 1_000_000.0
    corr = 1
    with open(path, "w", encoding="utf-8") as fh:
        head = '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": [\n'
        fh.write(head)
        written += len(head)
        step = 0
        first = True
        while written < size_bytes:
            events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": round(t, 3), "dur": 2000.0, "args": {"External id": corr}}]
            ts = t + 5
            for _ in range(40):
                op = rng.choice(ops)
                dur = round(rng.uniform(20, 40), 3)
                events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": round(ts, 3),
                               "dur": dur, "args": {"External id": corr, "Record function id": 0,
                                                    "Input Dims": [[4096, 4096], [4096]],
                                                    "Input type": ["float", "float"], "Ev Idx": count}})
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                               "ts": round(ts + 2, 3), "dur": 5.5, "args": {"External id": corr, "cbid": 211,
                                                                              "correlation": corr}})
                events.append({"ph": "X", "cat": "kernel", "name": f"void at::native::kernel<{op}>", "pid": 0,
                               "tid": 7, "ts": round(ts + 9, 3), "dur": round(rng.uniform(3, 30), 3),
                               "args": {"External id": corr, "device": 0, "stream": 7, "correlation": corr,
                                        "grid": [4096, 1, 1], "block": [128, 1, 1]}})
                events.append({"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": round(ts + 2, 3), "cat": "ac2g",
                               "name": "ac2g"})
                events.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": round(ts + 9, 3), "cat": "ac2g",
                               "name": "ac2g", "bp": "e"})
                corr += 1
                ts += dur + 5
            for e in events:
                line = ("" if first else ",\n") + json.dumps(e)
                first = False
                fh.write(line)
                written += len(line)
                count += 1
            t += 2100.0
            step += 1
        fh.write('\n], "displayTimeUnit": "ms"}\n')
    return count


CHILD = r"""
import json, resource, sys, time, tempfile
from pathlib import Path
mode, path = sys.argv[1], Path(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from reportgen.traces.reader import read_trace
from reportgen.traces.importer import ImportRequest, import_run
before = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
if mode == "json_load":
    with open(path, "rb") as fh:
        data = json.load(fh)
    n = len(data["traceEvents"])
elif mode == "read_trace":
    n = len(read_trace(path).events)
elif mode == "import":
    with tempfile.TemporaryDirectory() as store:
        folder = import_run(ImportRequest(path), Path(store))
        n = len(folder.name)
else:
    n = 0
wall = time.perf_counter() - t0
use = resource.getrusage(resource.RUSAGE_SELF)  # all threads: includes the gzip-copy thread of an import
cpu = use.ru_utime + use.ru_stime - before.ru_utime - before.ru_stime
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": use.ru_maxrss * 1024,
                  "n": n}))
"""


def measure(mode: str, path: Path) -> dict[str, float]:
    """Run one mode in a fresh interpreter and return its wall time and peak RSS."""
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(ROOT)], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Generate the trace, measure every mode ``--repeat`` times, write the results JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mb", type=float, default=200.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--trace", type=Path, default=None, help="use this trace instead of generating one")
    p.add_argument("--out", type=Path, default=None, help="write the results JSON here")
    args = p.parse_args(argv)
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace or Path(tmp) / "bench.trace.json"
        events = None
        if args.trace is None:
            t0 = time.perf_counter()
            events = generate_trace(path, int(args.size_mb * 1e6))
            print(f"generated {path.stat().st_size / 1e6:.1f} MB, {events} events in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr)
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        for i in range(args.repeat):
            for mode in MODES:
                runs[mode].append(measure(mode, path))
                print(f"[{i + 1}/{args.repeat}] {mode}: {runs[mode][-1]}", file=sys.stderr)
        size = path.stat().st_size
    summary = {m: {"median_wall_s": statistics.median(r["wall_s"] for r in rs),
                   "median_cpu_s": statistics.median(r["cpu_s"] for r in rs),
                   "max_peak_rss_bytes": max(r["peak_rss_bytes"] for r in rs),
                   "wall_s": [r["wall_s"] for r in rs], "cpu_s": [r["cpu_s"] for r in rs]}
               for m, rs in runs.items()}
    base = summary["json_load"]
    result = {
        "benchmark": "import_trace",
        "command": " ".join([Path(sys.executable).name, "benchmarks/import_trace.py", *(argv or sys.argv[1:])]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpu_count": os.cpu_count(), "processor": platform.processor()},
        "trace": {"size_bytes": size, "events": events or runs["json_load"][0]["n"]},
        "load_average_1m": {"start": load_start, "end": os.getloadavg()[0]},
        "results": summary,
        "ratios_vs_json_load": {
            m: {"wall_time": summary[m]["median_wall_s"] / base["median_wall_s"],
                "cpu_time": summary[m]["median_cpu_s"] / base["median_cpu_s"],
                "peak_rss": summary[m]["max_peak_rss_bytes"] / base["max_peak_rss_bytes"]}
            for m in ("read_trace", "import")},
        "peak_rss_above_idle_bytes": {m: summary[m]["max_peak_rss_bytes"] - summary["idle"]["max_peak_rss_bytes"]
                                      for m in ("json_load", "read_trace", "import")},
    }
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
