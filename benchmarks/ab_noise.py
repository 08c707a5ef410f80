"""False alarms and detection: the old block-wise compare against the interleaved ``reportgen ab``.

Two kinds of pairs, each judged by both methods, idle and with a background load process:

- A/A: the same scenario file on both sides: every *regression* verdict is a false alarm;
- injected slowdowns: the head's ``fused`` variant does real extra work after the full call:
  ``torch.rms_norm`` of the input's first 8 rows, repeated until p % of the time that very full
  call took has passed (p = 3, 10, 25 by default), so the injected fraction holds under load too;
  ``naive`` is unchanged in head and serves as an in-pair A/A control. Every cell records the
  changes the methods measured (``fused_change_pct_median``).

Verdicts are counted per variant (each pair judges ``naive`` and ``fused``) and per pair (the
gate's answer: a regression if any variant is one). The cases and methods are taken in turn
(A/A, then each slowdown, then again), so a run stopped early still holds a balanced sample.

Methods, per verdict:

- ``blockwise``: ``reportgen profile`` of base, then of head (each one block of samples), then
  ``reportgen compare --fail-on-regression`` (the old PR gate);
- ``interleaved``: ``reportgen ab`` (both sides in worker processes, rounds in ABBA order, in sessions of
  fresh processes; each verdict records every session's change and the spread between sessions).

Every verdict's wall time is recorded (profile + profile + compare, or the whole ``ab``
command). Background load: one extra Python process spinning on one core for the duration of
the ``busy`` group. The machine's state (load average, a fixed Python loop's time) is recorded
before and after each group.

    # what results/ab_noise_sessions_idle.json holds (about 100 minutes here):
    .venv/bin/python benchmarks/ab_noise.py --aa 20 --per-slowdown 10 --loads idle --blockwise-cases aa \\
        --out benchmarks/results/ab_noise_sessions_idle.json
    # the same with one background process spinning:
    .venv/bin/python benchmarks/ab_noise.py --aa 20 --per-slowdown 10 --loads busy --blockwise-cases aa \\
        --out benchmarks/results/ab_noise_sessions_busy.json
    # reportgen ab --threads 1 --clock cpu, the injected extra work self-timed by CPU time too:
    .venv/bin/python benchmarks/ab_noise.py --aa 10 --per-slowdown 10 --slowdowns 3 --loads busy \\
        --methods interleaved --threads 1 --clock cpu --out benchmarks/results/ab_noise_busy_aa_3pct_cpuclock.json
    # a quick check that it runs (not a result):
    .venv/bin/python benchmarks/ab_noise.py --aa 2 --per-slowdown 1 --slowdowns 10 --shape 4,256 \\
        --max-seconds 10 --out /tmp/ab_noise_smoke.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from machine import reference_loop_s  # benchmarks/machine.py, beside this script

from reportgen.ab.settings import CLOCKS, HUGE_PAGES_ENV, AbSettings
from reportgen.devices.allocator import allocator_env

ROOT = Path(__file__).resolve().parent.parent
SCENARIO_NAME = "abnoise"
SCENARIO = '''"""{title} for the A/B noise benchmark; ``fused`` does {pct} % extra real work (0: the unchanged code).

The extra work is self-timed in every call: after the full call, ``fused`` repeats the same op on a
small slice of the input for {pct} % of the time the full call itself took. So the slowdown is
{pct} % of that very call, whatever the machine's load or cache state at that moment. What a call
does beyond its share (a small call, a few µs, is a good part of 3 % of a 0.5 ms row sum) is owed
back by the next calls, so over a sample of calls the extra work is {pct} % of the full calls' time
within about one small call. A preemption inside the loop counts as extra work done and is paid back
too, by the calls that follow (a 3 ms one, at 3 % of a 0.5 ms row sum, by about 200 calls, some 0.1 s
of a session): the share stays right on average and is uneven over that stretch. Stopping each call
only past its own target overshot: a "3 %" row sum measured +6.5 to +7.1 % (2026-12-06).
``ab_noise.py`` records what each head realises. An earlier version calibrated a fixed repeat count
once, when the inputs were made; its realised slowdowns were 3-8 % idle and 40-55 % busy for nominal
10 and 25 % (benchmarks/results/ab_noise.json), so detection rates measured with it meant little.
``naive`` is the same op written another way and never changes: an in-pair A/A control.
"""
import math
import time

import torch

from reportgen.scenario.loader import Scenario, Tolerance, Variant

EXTRA = {fraction!r}
OWED = 0.0  # seconds of extra work still owed: what the calls so far asked for minus what they did
SPLITS = None  # a list: each call appends (its full call's time, its extra work's time) (ab_noise.realised_slowdowns)
CLOCK = time.{clock}  # the clock reportgen ab times samples by: the extra work is {pct} % of the call by that clock
{ops}

def fused(*args):
    global OWED
    t0 = CLOCK()
    out = full(*args)
    if EXTRA:
        start = now = CLOCK()
        owed = OWED + EXTRA * (start - t0)
        small, last = None, 0.0
        while (now - start) + last / 2 < owed:
            small = small or chunk(*args)
            full(*small)
            later = CLOCK()
            last, now = later - now, later
        now = CLOCK()
        OWED = owed - (now - start)
        if SPLITS is not None:
            SPLITS.append((start - t0, now - start))
    return out


SCENARIO = Scenario(
    name="abnoise", description="{title}, fused with {pct} % extra work", default_shape={shape!r},
    default_dtype="float32", make_inputs=make_inputs, reference=reference,
    variants=(Variant("naive", "{naive_text}", naive), Variant("fused", "{fused_text} (+ extra work)", fused)),
    bytes_per_call=lambda shape, itemsize: {bytes_expr},
    flops_per_call=lambda shape: {flops_expr},
    tolerances={{"float32": Tolerance(atol={atol!r}, rtol=1e-4)}},
)
'''
KINDS: dict[str, dict[str, Any]] = {
    "rmsnorm": {
        "title": "RMSNorm", "shape": (8, 1024, 1024), "atol": 1e-5,
        "naive_text": "eager ops", "fused_text": "torch.rms_norm",
        "bytes_expr": "2 * math.prod(shape) * itemsize", "flops_expr": "4 * math.prod(shape)",
        "ops": """

def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype).to(device)
    w = (1.0 + 0.1 * torch.randn(shape[-1], generator=gen, dtype=torch.float32)).to(dtype).to(device)
    return (x, w)


def naive(x, w):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * w


def full(x, w):
    return torch.rms_norm(x, (x.shape[-1],), w, 1e-6)


def chunk(x, w):
    return (x.reshape(-1, x.shape[-1])[:8], w)  # the first 8 rows


def reference(x, w):
    x64, w64 = x.detach().to("cpu", torch.float64), w.detach().to("cpu", torch.float64)
    return x64 * torch.rsqrt((x64 * x64).mean(dim=-1, keepdim=True) + 1e-6) * w64
"""},
    "elementwise": {
        "title": "One elementwise op (x * 1.5)", "shape": (4, 1024, 1024), "atol": 1e-5,
        "naive_text": "x * 1.5", "fused_text": "torch.mul(x, 1.5)",
        "bytes_expr": "2 * math.prod(shape) * itemsize", "flops_expr": "math.prod(shape)",
        "ops": """

def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype).to(device),)


def naive(x):
    return x * 1.5


def full(x):
    return torch.mul(x, 1.5)


def chunk(x):
    return (x.reshape(-1)[:8192],)


def reference(x):
    return x.detach().to("cpu", torch.float64) * 1.5
"""},
    "reduction": {
        "title": "A row sum (x.sum(-1))", "shape": (4096, 1024), "atol": 1e-3,
        "naive_text": "x.sum(-1)", "fused_text": "torch.sum(x, dim=-1)",
        "bytes_expr": "math.prod(shape) * itemsize", "flops_expr": "math.prod(shape)",
        "ops": """

def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype).to(device),)


def naive(x):
    return x.sum(-1)


def full(x):
    return torch.sum(x, dim=-1)


def chunk(x):
    return (x.reshape(-1, x.shape[-1])[:8],)


def reference(x):
    return x.detach().to("cpu", torch.float64).sum(-1)
"""},
}
"""The ops a run can measure (``--scenario``): RMSNorm (every recorded run before 2026-12-05), one elementwise op
over 16 MiB (where identical code once measured 6-8 % apart, issue 32) and a row sum over 16 MiB."""
BUSY = ("import ctypes, signal\n"
        "ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: ends with the benchmark, however it ends\n"
        "while True:\n    sum(i * i for i in range(100_000))\n")


def make_checkout(parent: Path, name: str, pct: float, clock: str = "wall", kind: str = "rmsnorm") -> Path:
    """A folder holding scenarios/abnoise.py, the ``kind`` of op, with ``pct`` % extra work in ``fused``, self-timed
    by ``clock`` (``wall``: ``time.perf_counter``; ``cpu``: ``time.process_time``, the process's CPU time, as
    ``ab --clock cpu``)."""
    root = parent / name
    (root / "scenarios").mkdir(parents=True)
    timer = "process_time" if clock == "cpu" else "perf_counter"
    text = SCENARIO.format(pct=pct, fraction=pct / 100.0, clock=timer, **KINDS[kind])
    (root / "scenarios" / f"{SCENARIO_NAME}.py").write_text(text)
    return root


REALISED = """
import importlib.util, json, os, statistics, sys
import torch
torch.set_num_threads(1)
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
out = {}
for i, path in enumerate(sys.argv[2:]):
    spec = importlib.util.spec_from_file_location(f"abnoise_{i}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = mod.make_inputs(tuple(int(d) for d in sys.argv[1].split(",")), torch.float32, 0, "cpu")
    for _ in range(50):  # warm; then start from no debt: a slow first small call overpays, and the 300 calls below
        mod.fused(*args)  # owed it back (a "3 %" row sum read 1.53 and 2.04 % that way; 3.01-3.02 % since)
    mod.OWED = 0.0
    mod.SPLITS = []
    for _ in range(300):
        mod.fused(*args)
    out[path] = round(100 * sum(e for _, e in mod.SPLITS) / sum(m for m, _ in mod.SPLITS), 2)
print(json.dumps(out))
"""


def realised_slowdowns(heads: dict[str, Path], shape: str) -> dict[str, float]:
    """What each head's ``fused`` adds, in percent of its full calls: over 300 calls, the extra work's time over the
    full calls' (one process, one thread, one CPU, huge pages as the workers have them). What the injection does,
    not what a gate sees: a call-to-call comparison of the row sum spreads several percent."""
    paths = {name: str(root / "scenarios" / f"{SCENARIO_NAME}.py") for name, root in heads.items()}
    env = {**os.environ, **HUGE_PAGES_ENV, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", REALISED, shape, *paths.values()], capture_output=True, text=True,
                          env=env, timeout=1800, check=True)
    measured = json.loads(proc.stdout)
    return {name: measured[path] for name, path in paths.items()}


def reportgen(*args: str, timeout: float = 1800) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "reportgen", *args], capture_output=True, text=True, timeout=timeout)
    return proc, time.perf_counter() - t0


def blockwise(base: Path, head: Path, opts: argparse.Namespace, store: Path) -> dict[str, Any]:
    """profile base, profile head, compare: the old PR gate."""
    common = ["--device", "cpu", "--shape", opts.shape, "--variants", opts.variants, "--samples", str(opts.samples),
              *_threads(opts), "--quiet", "--store", str(store)]
    wall = 0.0
    for side, root in (("base", base), ("head", head)):
        proc, s = reportgen("profile", "--scenario", str(root / "scenarios" / f"{SCENARIO_NAME}.py"), "--label", side,
                            *common)
        wall += s
        if proc.returncode != 0:
            return {"error": f"profile {side}: exit {proc.returncode}: {proc.stderr[-500:]}", "wall_s": wall}
    proc, s = reportgen("compare", "latest~1", "latest", "--threshold", str(opts.threshold), "--fail-on-regression",
                        "--format", "json", "--store", str(store))
    wall += s
    if proc.returncode not in (0, 1):
        return {"error": f"compare: exit {proc.returncode}: {proc.stderr[-500:]}", "wall_s": wall}
    doc = json.loads(proc.stdout)
    variants = {}
    for v in doc["variants"]:
        verdict = {"slower": "regression", "faster": "improvement", "inconclusive": "inconclusive"}.get(
            v["outcome"], "no change")
        variants[v["name"]] = {"verdict": verdict, "old_verdict": _within_run_verdict(v, opts.threshold),
                               "change_pct": v.get("change_pct"), "ci_low_pct": v.get("ci_low_pct"),
                               "ci_high_pct": v.get("ci_high_pct")}
    return {"exit_code": proc.returncode, "wall_s": round(wall, 2), "variants": variants}


def _within_run_verdict(v: dict[str, Any], threshold: float) -> str:
    """What the old gate said: the change judged on the interval of the samples within the two runs only
    (``within_ci_*``), before compare widened it by the drift between runs."""
    change, lo, hi = v.get("change_pct"), v.get("within_ci_low_pct"), v.get("within_ci_high_pct")
    if change is None or lo is None or hi is None or abs(change) < threshold or lo <= 0 <= hi:
        return "no change"
    return "regression" if change > 0 else "improvement"


def interleaved(base: Path, head: Path, opts: argparse.Namespace, store: Path) -> dict[str, Any]:
    """``reportgen ab``: one command, one verdict."""
    proc, wall = reportgen("ab", "--base", str(base), "--head", str(head), "--scenario", SCENARIO_NAME, "--device", "cpu",
                           "--shape", opts.shape, "--variants", opts.variants, "--threshold", str(opts.threshold),
                           "--precision", str(opts.precision), "--sessions", str(opts.sessions), "--rounds", str(opts.rounds),
                           "--max-seconds", str(opts.max_seconds), *_threads(opts), "--clock", opts.clock,
                           *({True: ["--huge-pages"], False: ["--no-huge-pages"]}.get(opts.huge_pages, [])),
                           *({True: ["--same-cpu"], False: ["--no-same-cpu"]}.get(opts.same_cpu, [])),
                           "--format", "json", "--quiet", "--store", str(store))
    if proc.returncode not in (0, 1, 7):
        return {"error": f"ab: exit {proc.returncode}: {proc.stderr[-500:]}", "wall_s": wall}
    doc = json.loads(proc.stdout)
    variants = {}
    for v in doc["variants"]:
        s = v["stats"] or {}
        variants[v["name"]] = {"verdict": v["verdict"], "change_pct": _pct(s.get("ratio")),
                               "ci_low_pct": _pct(s.get("ci_low")), "ci_high_pct": _pct(s.get("ci_high")),
                               "session_changes_pct": [_pct(r) for r in s.get("session_ratios", ())],
                               "process_noise_pct": s.get("process_noise_pct")}
    return {"exit_code": proc.returncode, "wall_s": round(wall, 2), "variants": variants, "rounds": len(doc["rounds"]),
            "sessions": doc["sessions"], "stop_reason": doc["stop_reason"], "warm_s": doc.get("warm_s"),
            "rounds_s": doc.get("rounds_s"), "session_s": doc.get("session_s"),
            "order_seed": doc.get("order_seed")}


def _threads(opts: argparse.Namespace) -> list[str]:
    return ["--threads", str(opts.threads)] if opts.threads else []


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else round((ratio - 1) * 100, 3)


METHODS = {"blockwise": blockwise, "interleaved": interleaved}


def summarize_cell(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of each verdict per variant, and wall time per verdict."""
    ok = [v for v in verdicts if "error" not in v]
    out: dict[str, Any] = {"verdicts": len(verdicts), "errors": len(verdicts) - len(ok)}
    for name in sorted({n for v in ok for n in v["variants"]}):
        counts: dict[str, int] = {}
        old: dict[str, int] = {}
        for v in ok:
            verdict = v["variants"].get(name, {}).get("verdict", "missing")
            counts[verdict] = counts.get(verdict, 0) + 1
            if "old_verdict" in v["variants"].get(name, {}):
                before = v["variants"][name]["old_verdict"]
                old[before] = old.get(before, 0) + 1
        out[name] = counts
        if old:
            out[f"{name}_within_run_only"] = old  # the old gate: the interval of the samples within the runs
    pairs: dict[str, int] = {}
    for v in ok:
        verdicts = [x.get("verdict") for x in v["variants"].values()]
        pair = next((x for x in ("regression", "inconclusive", "improvement") if x in verdicts), "no change")
        pairs[pair] = pairs.get(pair, 0) + 1
    out["pair"] = pairs  # the gate's answer per pair: any variant's regression makes the pair one
    changes = [v["variants"]["fused"]["change_pct"] for v in ok
               if v["variants"].get("fused", {}).get("change_pct") is not None]
    if changes:
        out["fused_change_pct_median"] = round(statistics.median(changes), 2)
    walls = [v["wall_s"] for v in ok]
    if walls:
        out["wall_s_median"] = round(statistics.median(walls), 2)
        out["wall_s_max"] = round(max(walls), 2)
    return out


def machine_state() -> dict[str, Any]:
    return {"utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "load_average_1m": round(os.getloadavg()[0], 2),
            "reference_loop_s": reference_loop_s()}


def start_load(kind: str) -> subprocess.Popen[bytes] | None:
    if kind == "idle":
        return None
    return subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_load(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None:
        proc.kill()
        proc.wait()


def run(opts: argparse.Namespace) -> dict[str, Any]:
    cases = [("aa", 0.0, opts.aa)] + [(f"slow{p:g}", p, opts.per_slowdown) for p in opts.slowdown_list]
    if opts.aa_same:  # base against its own folder: what a bias tied to the side's role, not its folder, would show
        cases.insert(1, ("aasame", 0.0, opts.aa_same))
    doc: dict[str, Any] = {
        "schema_version": 1,
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "machine": {"hostname": platform.node(), "cpu_count": os.cpu_count(), "python": platform.python_version()},
        "settings": {k: v for k, v in vars(opts).items() if k not in ("out", "slowdown_list", "blockwise_cases")},
        "allocator_env": allocator_env(os.environ),  # what the workers inherit (e.g. THP_MEM_ALLOC_ENABLE=1)
        "groups": [],
    }
    with tempfile.TemporaryDirectory(prefix="ab_noise-") as tmp:
        work = Path(tmp)
        base = make_checkout(work, "base", 0.0, opts.clock, opts.scenario)
        heads = {name: base if name == "aasame" else make_checkout(work, f"head-{name}", pct, opts.clock, opts.scenario)
                 for name, pct, _ in cases}
        # before any pair, on the machine as it is: what each head's extra work realises against the base
        doc["realised_slowdown_pct"] = realised_slowdowns(
            {name: root for (name, pct, _), root in zip(cases, heads.values(), strict=True) if pct}, opts.shape)
        print(f"realised slowdowns: {json.dumps(doc['realised_slowdown_pct'])}", file=sys.stderr, flush=True)
        for load in opts.load_list:
            group: dict[str, Any] = {"load": load, "before": machine_state(), "cells": []}
            doc["groups"].append(group)
            loader = start_load(load)
            try:
                cells = {}
                for name, pct, _count in cases:
                    for method in opts.method_list:
                        if method == "blockwise" and opts.blockwise_cases and name not in opts.blockwise_cases:
                            continue
                        cells[(name, method)] = {"case": name, "slowdown_pct": pct, "method": method, "runs": []}
                        group["cells"].append(cells[(name, method)])
                most = max(count for _n, _p, count in cases)
                for i in range(most):
                    for name, _pct, count in cases:
                        if (i + 1) * count // most == i * count // most:  # spread each case's count evenly
                            continue
                        for method in opts.method_list:
                            if method == "blockwise" and opts.blockwise_cases and name not in opts.blockwise_cases:
                                continue
                            cell = cells[(name, method)]
                            store = work / f"store-{load}-{name}-{method}-{i}"
                            verdict = METHODS[method](base, heads[name], opts, store)
                            cell["runs"].append(verdict)
                            cell["summary"] = summarize_cell(cell["runs"])
                            print(f"{load} {name} {method} {len(cell['runs'])}/{count}: "
                                  f"{json.dumps(verdict.get('variants') or verdict.get('error'))} "
                                  f"{verdict['wall_s']:.1f} s", file=sys.stderr, flush=True)
                            write(doc, opts.out)
            finally:
                stop_load(loader)
            group["after"] = machine_state()
            write(doc, opts.out)
    return doc


def write(doc: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--aa", type=int, default=30, help="A/A verdicts per method and load (default 30)")
    p.add_argument("--aa-same", type=int, default=0,
                   help="A/A verdicts of the base checkout against its own folder, alternating with --aa's (default 0)")
    p.add_argument("--per-slowdown", type=int, default=10, help="verdicts per injected slowdown (default 10)")
    p.add_argument("--slowdowns", default="3,10,25", help="injected slowdowns of head's fused, percent (default 3,10,25)")
    p.add_argument("--scenario", choices=sorted(KINDS), default="rmsnorm",
                   help="the op both sides run: rmsnorm (default), elementwise or reduction")
    p.add_argument("--shape", default=None, help="input shape (default: the scenario's)")
    p.add_argument("--variants", default="naive,fused")
    defaults = AbSettings()
    p.add_argument("--threshold", type=float, default=defaults.threshold_pct)
    p.add_argument("--precision", type=float, default=defaults.precision_pct,
                   help=f"interleaved: reportgen ab --precision (default {defaults.precision_pct:g}, as ab)")
    p.add_argument("--samples", type=int, default=50, help="blockwise: samples per variant per profile (default 50)")
    p.add_argument("--sessions", type=int, default=defaults.min_sessions,
                   help=f"interleaved: reportgen ab --sessions (default {defaults.min_sessions}, as ab)")
    p.add_argument("--rounds", type=int, default=defaults.rounds_per_session,
                   help=f"interleaved: rounds per session (default {defaults.rounds_per_session}, as ab; each "
                        "result file records the rounds it used)")
    p.add_argument("--max-seconds", type=float, default=defaults.max_seconds)
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads for both methods (reportgen ab/profile --threads; default: each "
                   "command's own, which for ab on the CPU is 1)")
    p.add_argument("--clock", choices=CLOCKS, default=defaults.clock,
                   help="interleaved: reportgen ab --clock; the injected extra work is timed by the same clock")
    p.add_argument("--huge-pages", action=argparse.BooleanOptionalAction, default=None,
                   help="interleaved: reportgen ab --huge-pages or --no-huge-pages (default: ab's own, huge pages "
                   "where the kernel gives them on request)")
    p.add_argument("--same-cpu", action=argparse.BooleanOptionalAction, default=None,
                   help="interleaved: reportgen ab --same-cpu or --no-same-cpu (default: ab's own, both workers of a "
                   "session on one CPU)")
    p.add_argument("--loads", default="idle,busy", help="idle and/or busy (one background spinning process)")
    p.add_argument("--methods", default="blockwise,interleaved")
    p.add_argument("--blockwise-cases", default="", help="cases the blockwise method judges, e.g. aa (default: all)")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / f"ab_noise_{stamp}.json")
    opts = p.parse_args(argv)
    opts.shape = opts.shape or ",".join(str(d) for d in KINDS[opts.scenario]["shape"])
    opts.slowdown_list = [float(x) for x in opts.slowdowns.split(",") if x.strip()]
    opts.load_list = [x for x in opts.loads.split(",") if x]
    opts.method_list = [x for x in opts.methods.split(",") if x]
    opts.blockwise_cases = [x for x in opts.blockwise_cases.split(",") if x]
    unknown = [m for m in opts.method_list if m not in METHODS] + [x for x in opts.load_list if x not in ("idle", "busy")]
    if unknown:
        p.error(f"unknown --methods/--loads: {unknown}")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    doc = run(opts)
    for group in doc["groups"]:
        for cell in group["cells"]:
            print(group["load"], cell["case"], cell["method"], json.dumps(cell.get("summary")))
    print(f"written: {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
