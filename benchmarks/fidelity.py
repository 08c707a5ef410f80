"""Measurement fidelity: reportgen's per-call time against torch.utils.benchmark.Timer.

For each variant, in one process, on the same inputs and thread count: reportgen's
measurement (median of its timing samples) and an independent Timer.blocked_autorange
median, in ``--rounds`` rounds that alternate which goes first (A B, B A, A B ...), so that a
machine whose speed drifts from minute to minute (a shared VM) slows both alike; the figure is
the median of reportgen's round medians over the median of Timer's. Plus the profiler's
overhead (mean ProfilerStep duration in the stored trace over reportgen's median per-call time),
and the load average and a fixed Python loop's time before and after, as the machine's state.

    .venv/bin/python benchmarks/fidelity.py --shape 8,1024,1024 --out benchmarks/results/fidelity.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.utils.benchmark as tub
from machine import reference_loop_s  # benchmarks/machine.py, beside this script

from reportgen.analysis.stats import summarize
from reportgen.devices.cpu import CpuBackend
from reportgen.profile.measure import MeasureContext, MeasureSettingsIn, VariantInputs, measure_variant
from reportgen.scenario.loader import load_scenario, parse_shape

TARGET_RATIO_DEVIATION = 0.10


def step_durations_us(trace_file: Path) -> list[float]:
    """Durations of the ProfilerStep#N events in a Chrome trace (plain JSON)."""
    data = json.loads(trace_file.read_text())
    return [float(e["dur"]) for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]


def ours_once(backend: CpuBackend, variant: Any, inputs: VariantInputs, samples: int,
              work: Path) -> tuple[float, list[float]]:
    """reportgen's measurement of one variant: its median per-call time, and its profiled step durations."""
    ctx = MeasureContext(backend, inputs, MeasureSettingsIn(samples=samples), lambda m: print(m, file=sys.stderr))
    outcome = measure_variant(ctx, variant, work)
    summary = summarize(outcome.result.samples_us)
    assert summary is not None
    return summary.median_us, step_durations_us(outcome.trace_file) if outcome.trace_file else []


def timer_once(fn: Any, args: Any) -> tuple[float, float]:
    """torch.utils.benchmark.Timer's median and interquartile range per call, in µs."""
    with torch.no_grad():
        fn(*args)
        timer = tub.Timer(stmt="fn(*a)", globals={"fn": fn, "a": args}, num_threads=torch.get_num_threads())
        ref = timer.blocked_autorange(min_run_time=2.0)
    return ref.median * 1e6, ref.iqr * 1e6


def machine_state() -> dict[str, float]:
    """The 1-minute load average and the seconds a fixed pure-Python loop takes: how busy and how fast, now."""
    return {"load_average_1m": round(os.getloadavg()[0], 2), "reference_loop_s": reference_loop_s()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="8,1024,1024")
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of both measurements (median kept)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    shape = parse_shape(args.shape)
    sc = load_scenario("rmsnorm")
    backend = CpuBackend()
    inputs_args = sc.make_inputs(shape, torch.float32, 0, torch.device("cpu"))
    inputs = VariantInputs(inputs_args, sc.reference(*inputs_args), sc.tolerances["float32"],
                           sc.bytes_per_call(shape, 4), sc.flops_per_call(shape))
    rows = []
    state_before = machine_state()
    with tempfile.TemporaryDirectory() as work:
        for variant in sc.variants:
            fn = backend.compile(variant.fn) if variant.compile else variant.fn
            ours_rounds: list[float] = []
            timer_rounds: list[float] = []
            timer_iqrs: list[float] = []
            steps: list[float] = []
            for r in range(args.rounds):
                for which in (("ours", "timer") if r % 2 == 0 else ("timer", "ours")):
                    if which == "ours":
                        median_us, round_steps = ours_once(backend, variant, inputs, args.samples,
                                                           Path(work) / f"{variant.name}-{r}")
                        ours_rounds.append(median_us)
                        steps.extend(round_steps)
                    else:
                        median_us, iqr_us = timer_once(fn, inputs_args)
                        timer_rounds.append(median_us)
                        timer_iqrs.append(iqr_us)
            ours_us, timer_us = statistics.median(ours_rounds), statistics.median(timer_rounds)
            ratio = ours_us / timer_us
            rows.append({
                "variant": variant.name,
                "reportgen_median_us": round(ours_us, 2),
                "reportgen_round_medians_us": [round(x, 2) for x in ours_rounds],
                "timer_median_us": round(timer_us, 2),
                "timer_round_medians_us": [round(x, 2) for x in timer_rounds],
                "timer_iqr_us": round(statistics.median(timer_iqrs), 2),
                "round_ratios": [round(a / b, 4) for a, b in zip(ours_rounds, timer_rounds, strict=True)],
                "ratio_reportgen_over_timer": round(ratio, 4),
                "within_target": abs(ratio - 1) <= TARGET_RATIO_DEVIATION,
                "profiled_step_mean_us": round(sum(steps) / len(steps), 2) if steps else None,
                "profiler_overhead_pct": round((sum(steps) / len(steps) / ours_us - 1) * 100, 1) if steps else None,
            })
    result = {
        "benchmark": "fidelity",
        "command": " ".join(["python", "benchmarks/fidelity.py", *sys.argv[1:]]),
        "shape": list(shape),
        "dtype": "float32",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "target": f"reportgen median within {int(TARGET_RATIO_DEVIATION * 100)} % of torch.utils.benchmark.Timer",
        "rounds": args.rounds,
        "machine_before": state_before,
        "machine_after": machine_state(),
        "rows": rows,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
