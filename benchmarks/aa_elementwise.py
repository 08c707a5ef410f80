"""A/A of one elementwise op (x * 1.5 over 16 MiB float32) with ``reportgen ab``'s defaults, conditions in turn.

    .venv/bin/python benchmarks/aa_elementwise.py PAIRS CONDITION[,CONDITION...] > results.jsonl

Conditions: ``default`` (the caller's environment as it is), ``omp-passive`` (``OMP_WAIT_POLICY=PASSIVE`` set by
the caller), ``fixed-default`` (the same as ``default``: named apart for runs of a reportgen that sets it itself),
``head+10%`` (the head's op also multiplies the first tenth of the tensor: real extra work, a slowdown to detect).
Base and head are two folders holding the same scenario file (``benchmarks/data/aa_elementwise.py``), so every
verdict other than "no change" is a false one. One JSON line per verdict: exit code, wall time, load average, the
verdict, the ratio head/base and its interval, sessions and why it stopped.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
W = Path(tempfile.mkdtemp(prefix="aa-elementwise-"))
for side in ("base", "head"):
    (W / side / "scenarios").mkdir(parents=True, exist_ok=True)
    (W / side / "scenarios" / "elementwise.py").write_bytes((ROOT / "benchmarks" / "data" / "aa_elementwise.py").read_bytes())
SLOW = W / "head-slow" / "scenarios"
SLOW.mkdir(parents=True)
slow_src = (ROOT / "benchmarks" / "data" / "aa_elementwise.py").read_text()
SLOW.joinpath("elementwise.py").write_text(slow_src.replace(
    "def scale(x: torch.Tensor) -> torch.Tensor:\n    return x * 1.5",
    "def scale(x: torch.Tensor) -> torch.Tensor:\n    x.view(-1)[: x.numel() // 10].mul(1.5)  # real extra work, ~10 %\n"
    "    return x * 1.5"))
assert "real extra work" in SLOW.joinpath("elementwise.py").read_text()
conds = {"default": {}, "omp-passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "fixed-default": {}, "head+10%": {}}
order = sys.argv[2].split(",") if len(sys.argv) > 2 else list(conds)
pairs = int(sys.argv[1])
out = []
for k in range(pairs):
    for name in order:
        env = {**os.environ, **conds[name]}
        t0 = time.perf_counter()
        head = W / ("head-slow" if name == "head+10%" else "head")
        p = subprocess.run([str(ROOT / ".venv" / "bin" / "reportgen"), "ab", "--base", str(W / "base"), "--head", str(head),
                            "--scenario", "elementwise", "--variants", "scale", "--device", "cpu", "--format", "json",
                            "--quiet", "--store", str(W / "store")], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        rec = {"pair": k, "condition": name, "exit": p.returncode, "wall_s": round(wall, 1),
               "load1": os.getloadavg()[0]}
        try:
            doc = json.loads(p.stdout)
            v = doc["variants"][0]
            s = v["stats"] or {}
            rec.update(verdict=v["verdict"], ratio=s.get("ratio"), ci=(s.get("ci_low"), s.get("ci_high")),
                       sessions=doc["sessions"], stop=doc["stop_reason"])
        except (ValueError, KeyError, IndexError) as e:
            rec["error"] = (p.stderr[-400:], str(e))
        print(json.dumps(rec), flush=True)
        out.append(rec)

