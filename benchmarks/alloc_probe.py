"""How much of a CPU call is the operator, and how much is page-faulting its fresh output in?

Each measurement is a fresh Python process (as a ``reportgen ab`` worker is), on the default RMSNorm shape
(8, 1024, 1024) float32, timing by wall clock the median of 30 calls of:

- ``naive`` and ``fused`` (``torch.rms_norm``), as the rmsnorm scenario calls them: each returns a new 32 MiB
  output, freed before the next call;
- ``mul_fresh``: ``x * w`` (a new 32 MiB output each call) against ``mul_into``: the same product written into one
  output kept for the whole process (``out=``): the difference is what the fresh output costs;

plus the minor page faults per call (``getrusage``) of ``fused`` and its median CPU time per call (user + system,
``time.process_time``). Each process runs with one of the ``SETTINGS`` below, in turn: glibc's default allocator
(``default``), glibc told to keep freed memory (``kept``: no ``mmap`` for chunks, no trimming of the heap), or
torch's own switch for 2 MiB-aligned allocations advised as transparent huge pages (``thp``:
``THP_MEM_ALLOC_ENABLE=1``; it matters where THP is in ``madvise`` mode, as on this VM); with one core busy as well
(``--loads idle,busy``).

    .venv/bin/python benchmarks/alloc_probe.py --out benchmarks/results/alloc_probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ab_noise import start_load, stop_load  # benchmarks/ab_noise.py, beside this script
from machine import reference_loop_s

ROOT = Path(__file__).resolve().parent.parent
SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "kept": {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)},
    "thp": {"THP_MEM_ALLOC_ENABLE": "1"},
}
SETTING_VARS = {name for variables in SETTINGS.values() for name in variables}

CHILD = r'''
import json, resource, statistics, sys, time
import torch
threads = int(sys.argv[1])
if threads:
    torch.set_num_threads(threads)
gen = torch.Generator().manual_seed(0)
x = torch.randn((8, 1024, 1024), generator=gen)
w = 1.0 + 0.1 * torch.randn(1024, generator=gen)
kept = torch.empty_like(x)
calls = {
    "naive": lambda: x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * w,
    "fused": lambda: torch.rms_norm(x, (1024,), w, 1e-6),
    "mul_fresh": lambda: x * w,
    "mul_into": lambda: torch.mul(x, w, out=kept),
}
out = {"threads": torch.get_num_threads()}
for name, call in calls.items():
    for _ in range(3):
        call()
    times, cpu = [], []
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(30):
        t0, c0 = time.perf_counter(), time.process_time()
        r = call()
        del r
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    out[name + "_ms"] = round(statistics.median(times), 3)
    out[name + "_cpu_ms"] = round(statistics.median(cpu), 3)
    out[name + "_faults_per_call"] = round((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0) / 30, 1)
print(json.dumps(out))
'''


def one_process(setting: str, threads: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in SETTING_VARS} | SETTINGS[setting]
    proc = subprocess.run([sys.executable, "-c", CHILD, str(threads)], capture_output=True, text=True, env=env,
                          check=True, timeout=600)
    return {"setting": setting, **json.loads(proc.stdout)}


def summarize(rows: list[dict[str, Any]], settings: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in settings:
        mine = [r for r in rows if r["setting"] == name]
        for key in ("naive_ms", "fused_ms", "fused_cpu_ms", "mul_fresh_ms", "mul_into_ms", "fused_faults_per_call"):
            values = [r[key] for r in mine]
            out[f"{name}_{key}"] = {"median": round(statistics.median(values), 3), "min": min(values),
                                   "max": max(values)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=6, help="fresh processes per allocator setting and load")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--loads", default="idle,busy")
    p.add_argument("--settings", default="default,kept",
                   help=f"allocator settings, in turn per process (of {', '.join(SETTINGS)}; default default,kept)")
    p.add_argument("--out", type=Path, required=True)
    opts = p.parse_args(argv)
    settings = [x for x in opts.settings.split(",") if x]
    if unknown := [x for x in settings if x not in SETTINGS]:
        p.error(f"unknown --settings: {unknown}; choose from {', '.join(SETTINGS)}")
    doc: dict[str, Any] = {
        "benchmark": "alloc_probe", "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "libc": platform.libc_ver()},
        "settings": {"processes": opts.processes, "threads": opts.threads, "loads": opts.loads,
                     "allocator_settings": {name: SETTINGS[name] for name in settings}}, "groups": []}
    for load in opts.loads.split(","):
        before = reference_loop_s()
        proc = start_load(load)
        try:
            rows = [one_process(name, opts.threads) for _ in range(opts.processes) for name in settings]
        finally:
            stop_load(proc)
        doc["groups"].append({"load": load, "reference_loop_s_before": before, "rows": rows,
                              "summary": summarize(rows, settings)})
        print(load, json.dumps(doc["groups"][-1]["summary"]))
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"written: {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
