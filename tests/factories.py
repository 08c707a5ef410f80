"""Synthetic run bundles and traces for tests: small, explicit, with known numbers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from reportgen.model.run import (
    SCHEMA_VERSION,
    Correctness,
    DeviceKind,
    DevicePeak,
    Environment,
    GitInfo,
    MeasureSettings,
    OpRow,
    Run,
    RunSource,
    ScenarioInfo,
    TimeBasis,
    VariantResult,
    VariantStatus,
)
from reportgen.store.writer import write_bundle

NAIVE_OPS = (
    OpRow("aten::mul", 3, 300.0, 300.0, 0.0, 0.0, "[[4, 64], [4, 64]]"),
    OpRow("aten::mean", 1, 100.0, 120.0, 0.0, 0.0, "[[4, 64]]"),
    OpRow("aten::add", 1, 50.0, 50.0, 0.0, 0.0, "[[4, 1], []]"),
    OpRow("aten::rsqrt", 1, 50.0, 50.0, 0.0, 0.0, "[[4, 1]]"),
)


def chrome_trace(step_us: float = 100.0, steps: int = 2, ops: tuple[str, ...] = ("aten::mul", "aten::add")) -> dict:
    """A tiny Kineto-shaped trace: ProfilerStep windows with CPU ops and one fake kernel each."""
    events: list[dict] = []
    for s in range(steps):
        t0 = 1000.0 + s * (step_us + 10)
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                       "ts": t0, "dur": step_us})
        slot = step_us / (len(ops) + 1)
        for i, op in enumerate(ops):
            events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1,
                           "ts": t0 + i * slot + 1, "dur": slot - 2, "args": {"correlation": 100 * s + i}})
    return {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms"}


def variant(name: str, median_us: float, n: int = 30, spread: float = 0.02, status: VariantStatus = VariantStatus.OK,
            ops: tuple[OpRow, ...] = NAIVE_OPS, trace_path: str | None = None, error: str | None = None
            ) -> VariantResult:
    """A variant whose samples are spread evenly around ``median_us`` (median exact)."""
    half = n // 2
    samples = tuple(median_us * (1 + spread * (i - half) / max(half, 1)) for i in range(n))
    return VariantResult(
        name=name,
        status=status,
        description=f"{name} variant",
        error=error,
        first_call_us=median_us * 10,
        compile_time_us=median_us * 9,
        samples_us=samples if status is not VariantStatus.FAILED else (),
        calls_per_sample=1,
        correctness=Correctness(status is VariantStatus.OK, 1e-6, 1e-6, 1e-5, 1e-5)
        if status is not VariantStatus.FAILED else None,
        ops=ops if status is not VariantStatus.FAILED else (),
        time_basis=TimeBasis.CPU,
        profiled_steps=2,
        op_dispatch_count=6,
        device_event_count=None,
        bytes_per_call=4 * 64 * 4 * 2,
        flops_per_call=4 * 64 * 4,
        trace_path=trace_path,
    )


def synthetic_run(run_id: str = "20261130T000000Z-cpu-test-abc123", created_utc: str = "2026-11-30T00:00:00Z",
                  device: DeviceKind = DeviceKind.CPU, label: str = "test", times_us: dict[str, float] | None = None,
                  with_traces: bool = False, variants: tuple[VariantResult, ...] | None = None,
                  hostname: str = "testhost", shape: str = "4,64") -> Run:
    """A complete, valid Run with the three RMSNorm variants (times in µs per call)."""
    times_us = times_us or {"naive": 100.0, "fused": 60.0, "compiled": 30.0}
    if variants is None:
        variants = tuple(
            variant(n, t, trace_path=f"traces/{n}.pt.trace.json.gz" if with_traces else None)
            for n, t in times_us.items()
        )
    return Run(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        created_utc=created_utc,
        label=label,
        source=RunSource.PROFILE,
        reportgen_version="0.1.0",
        device=device,
        git=GitInfo("0123456789abcdef0123456789abcdef01234567", False),
        environment=Environment(hostname=hostname, platform="Linux-test", python_version="3.11.7",
                                cpu_model="Test CPU", cpu_count=2, torch_version="2.13.0", torch_threads=2,
                                device_name="Test CPU"),
        peak=DevicePeak(bandwidth_bytes_per_s=10e9, flops_per_s=None, source="test figure"),
        scenario=ScenarioInfo("rmsnorm", "RMSNorm over the last dimension",
                              {"shape": shape, "dtype": "float32", "seed": "0"}),
        variants=variants,
        settings=MeasureSettings(warmup_iters=3, samples=30, calls_per_sample=1, profile_wait=1,
                                 profile_warmup=1, profile_active=2),
    )


def write_synthetic(store: Path, run: Run) -> Path:
    """Write ``run`` as a bundle in ``store``, with a small trace for every variant that names one."""
    files: dict[str, Path | bytes] = {}
    for v in run.variants:
        if v.trace_path:
            files[v.trace_path] = gzip.compress(json.dumps(chrome_trace()).encode(), mtime=0)
    return write_bundle(store, run, files)


def fail_in_round(monkeypatch: Any, fn: Any, round_no: int) -> dict[str, int]:
    """Make ``timing.time_samples`` raise "out of memory (simulated)" on ``fn``'s ``round_no``-th block (deterministic,
    no timing); the other blocks run for real. Returns the counter of ``fn``'s blocks."""
    from reportgen.profile import timing

    real_samples, blocks = timing.time_samples, {"blocks": 0}

    def samples(backend, f, args, n, calls):  # type: ignore[no-untyped-def]
        if f is fn:
            blocks["blocks"] += 1
            if blocks["blocks"] == round_no:
                raise RuntimeError("out of memory (simulated)")
        return real_samples(backend, f, args, n, calls)

    monkeypatch.setattr(timing, "time_samples", samples)
    return blocks
