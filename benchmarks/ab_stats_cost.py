"""What scoring a pair costs ``reportgen ab``: ``pair_stats`` after every session, as the coordinator calls it.

A pair scores every variant again after each session from the sixth on. This times, for synthetic sessions of 64
one-sample rounds, the calls a 100-session pair of two variants makes (n = 6 .. 100, twice each), and one call at
n = 80, with this checkout's ``reportgen.analysis.paired`` and with the same module at ``--old`` (a commit), side
by side in one process; and checks that both give the same ratio and interval.

    .venv/bin/python benchmarks/ab_stats_cost.py --old 4592c26
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MODULE = "reportgen/analysis/paired.py"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", required=True, help="the commit whose paired.py to time beside this checkout's")
    p.add_argument("--rounds", type=int, default=64)
    opts = p.parse_args()
    rng = random.Random(1)
    raw = [(tuple((rng.lognormvariate(6, 0.2),) for _ in range(opts.rounds)),
            tuple((rng.lognormvariate(6, 0.2),) for _ in range(opts.rounds))) for _ in range(100)]
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "paired_old.py"
        old.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{opts.old}:{MODULE}"], check=True,
                                      capture_output=True, text=True).stdout)
        results = {}
        for label, path in ((opts.old, old), ("this checkout", ROOT / MODULE)):
            module = load(path, f"paired_{len(results)}")
            sessions = [module.SessionRounds(b, h) for b, h in raw]
            t0 = time.perf_counter()
            for n in range(6, 101):
                for _variant in range(2):
                    module.pair_stats(sessions[:n], 5.0)
            every = time.perf_counter() - t0
            t0 = time.perf_counter()
            module.pair_stats(sessions[:80], 5.0)
            once = time.perf_counter() - t0
            stats = module.pair_stats(sessions[:50], 5.0)
            results[label] = (stats.ratio, stats.ci_low, stats.ci_high)
            print(f"{label}: a 100-session pair of 2 variants scored after every session {every:.2f} s; "
                  f"one more call at 80 sessions {1000 * once:.1f} ms", flush=True)
    first, second = results.values()
    print("same ratio and interval at 50 sessions:", first == second)


if __name__ == "__main__":
    main()
