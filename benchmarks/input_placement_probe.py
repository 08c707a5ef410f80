"""Is the spread between worker processes the inputs' memory? Forked processes, one thread, kept input vs fresh copies.

A parent imports torch (one thread, ``THP_MEM_ALLOC_ENABLE=1`` as ``reportgen ab``'s CPU default) and forks
``--processes`` children one after another, as the fork server forks workers. Each child makes its input, then per
round times the op (median of 3 calls after one untimed call) on that kept input, and on a fresh copy of it
allocated that round. It reports both medians over ``--rounds`` rounds and how much of each tensor lies in
transparent huge pages (``AnonHugePages`` of its mapping in ``/proc/self/smaps``). If the spread between processes
came from where each process's input landed in memory, the fresh copies (a new placement every round, averaged
within the process) would spread much less than the kept input.

    .venv/bin/python benchmarks/input_placement_probe.py --op sum --processes 24
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch  # noqa: E402

OPS: dict[str, tuple[tuple[int, ...], Callable[[torch.Tensor], torch.Tensor]]] = {
    "mul": ((4, 1024, 1024), lambda x: x * 1.5), "sum": ((4096, 1024), lambda x: x.sum(-1))}


def huge_kib(ptr: int) -> int:
    """AnonHugePages (KiB) of the mapping holding address ``ptr`` (-1: not found)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if parts and "-" in parts[0] and ":" not in parts[0]:
                lo, hi = (int(v, 16) for v in parts[0].split("-"))
                inside = lo <= ptr < hi
            elif inside and parts[0] == "AnonHugePages:":
                return int(parts[1])
    return -1


def timed(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """Median seconds of 3 calls, after one untimed call."""
    fn(x)
    t = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn(x)
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def child(op: str, rounds: int, w: int) -> None:
    shape, fn = OPS[op]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    for _ in range(3):
        timed(fn, x)
    kept, fresh, huge = [], [], []
    for _ in range(rounds):
        kept.append(timed(fn, x))
        copy = x.clone()
        fresh.append(timed(fn, copy))
        huge.append(huge_kib(copy.data_ptr()))
        del copy
    out = {"kept_ms": statistics.median(kept) * 1e3, "fresh_ms": statistics.median(fresh) * 1e3,
           "input_huge_kib": huge_kib(x.data_ptr()), "copies_huge_kib_median": statistics.median(huge)}
    os.write(w, (json.dumps(out) + "\n").encode())


def run_child(op: str, rounds: int) -> dict[str, float]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            child(op, rounds, w)
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.waitpid(pid, 0)
    os.close(r)
    return json.loads(data)  # type: ignore[no-any-return]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=sorted(OPS), default="sum")
    p.add_argument("--processes", type=int, default=24)
    p.add_argument("--rounds", type=int, default=16)
    opts = p.parse_args()
    torch.set_num_threads(1)
    results = [run_child(opts.op, opts.rounds) for _ in range(opts.processes)]
    for key in ("kept_ms", "fresh_ms"):
        values = [r[key] for r in results]
        spread = statistics.stdev([100.0 * math.log(v) for v in values])
        print(f"{key}: median {statistics.median(values):.3f} ms, spread between processes {spread:.1f} % "
              f"(sd of 100 ln), min {min(values):.3f}, max {max(values):.3f}")
    print("input in huge pages (KiB):", sorted({int(r["input_huge_kib"]) for r in results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
