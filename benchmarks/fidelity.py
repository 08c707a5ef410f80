"""Measurement fidelity: reportgen's per-call time against torch.utils.benchmark.Timer.

For each variant, in one process, on the same inputs and thread count: reportgen's
measurement (median of its timing samples) and an independent Timer.blocked_autorange
median, alternated; plus the profiler's overhead (mean ProfilerStep duration in the stored
trace over reportgen's median per-call time).

    .venv/bin/python benchmarks/fidelity.py --shape 8,1024,1024 --out benchmarks/results/fidelity.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

import torch
import torch.utils.benchmark as tub

from reportgen.backends.cpu import CpuBackend
from reportgen.measure import MeasureSettingsIn, VariantInputs, measure_variant
from reportgen.scenario import load_scenario, parse_shape
from reportgen.stats import summarize

TARGET_RATIO_DEVIATION = 0.10


def step_durations_us(trace_file: Path) -> list[float]:
    """Durations of the ProfilerStep#N events in a Chrome trace (plain JSON)."""
    data = json.loads(trace_file.read_text())
    return [float(e["dur"]) for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="8,1024,1024")
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    shape = parse_shape(args.shape)
    sc = load_scenario("rmsnorm")
    backend = CpuBackend()
    inputs_args = sc.make_inputs(shape, torch.float32, 0, torch.device("cpu"))
    inputs = VariantInputs(inputs_args, sc.reference(*inputs_args), sc.tolerances["float32"],
                           sc.bytes_per_call(shape, 4), sc.flops_per_call(shape))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for variant in sc.variants:
            outcome = measure_variant(backend, variant, inputs, MeasureSettingsIn(samples=args.samples),
                                      Path(work) / variant.name, lambda m: print(m, file=sys.stderr))
            ours = summarize(outcome.result.samples_us)
            fn = backend.compile(variant.fn) if variant.compile else variant.fn
            with torch.no_grad():
                fn(*inputs_args)
                timer = tub.Timer(stmt="fn(*a)", globals={"fn": fn, "a": inputs_args},
                                  num_threads=torch.get_num_threads())
                ref = timer.blocked_autorange(min_run_time=2.0)
            steps = step_durations_us(outcome.trace_file) if outcome.trace_file else []
            assert ours is not None
            timer_us = ref.median * 1e6
            rows.append({
                "variant": variant.name,
                "reportgen_median_us": round(ours.median_us, 2),
                "reportgen_p10_p90_us": [round(ours.p10_us, 2), round(ours.p90_us, 2)],
                "timer_median_us": round(timer_us, 2),
                "timer_iqr_us": round(ref.iqr * 1e6, 2),
                "ratio_reportgen_over_timer": round(ours.median_us / timer_us, 4),
                "within_target": abs(ours.median_us / timer_us - 1) <= TARGET_RATIO_DEVIATION,
                "profiled_step_mean_us": round(sum(steps) / len(steps), 2) if steps else None,
                "profiler_overhead_pct": round((sum(steps) / len(steps) / ours.median_us - 1) * 100, 1)
                if steps else None,
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
