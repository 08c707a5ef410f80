"""Do this machine's CPUs run the same call at the same speed? One process, one thread, moved between two CPUs.

Per round, the process pins itself to CPU A, times ``--calls`` calls of the op (median, after one untimed call),
then to CPU B and the same (the order of the two alternates per round). Prints each CPU's median and the per-round
ratio B/A (median and quartiles). A ratio away from 1 that changes sign from run to run is a CPU-level difference
that moves with time: two ``reportgen ab`` workers that the scheduler keeps on different CPUs would measure it as
a difference between base and head (why ``reportgen ab`` runs both workers of a session on one CPU).

    .venv/bin/python benchmarks/cpu_pair_probe.py --op sum --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import datetime, timezone

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as reportgen ab's CPU default, before torch is imported

import torch  # noqa: E402

OPS = {"mul": ((4, 1024, 1024), lambda x: x * 1.5), "sum": ((4096, 1024), lambda x: x.sum(-1))}


def probe(op: str, cpus: tuple[int, int], rounds: int, calls: int) -> dict[str, object]:
    shape, fn = OPS[op]
    x = torch.randn(shape)
    times: dict[int, list[float]] = {c: [] for c in cpus}
    for r in range(rounds):
        for cpu in cpus if r % 2 else tuple(reversed(cpus)):
            os.sched_setaffinity(0, {cpu})
            fn(x)
            t = []
            for _ in range(calls):
                t0 = time.perf_counter()
                fn(x)
                t.append(time.perf_counter() - t0)
            times[cpu].append(statistics.median(t))
    a, b = cpus
    ratios = [tb / ta for ta, tb in zip(times[a], times[b], strict=True)]
    return {"op": op, "cpus": list(cpus), "median_ms": {str(c): statistics.median(v) * 1e3 for c, v in times.items()},
            "ratio_b_over_a_median": statistics.median(ratios),
            "ratio_quartiles": statistics.quantiles(ratios, n=4)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=sorted(OPS), default="sum")
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    opts = p.parse_args()
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        p.error("needs two usable CPUs")
    torch.set_num_threads(1)
    for _ in range(opts.repeats):
        out = probe(opts.op, (usable[0], usable[1]), opts.rounds, opts.calls)
        out["utc"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
