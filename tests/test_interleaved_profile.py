"""Inside one profile, the variants' timing samples are taken in interleaved rounds (issue 14, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from factories import fail_in_round

from reportgen.devices.cpu import CpuBackend
from reportgen.model.run import VariantStatus
from reportgen.profile import timing
from reportgen.profile.measure import MeasureContext, MeasureSettingsIn, VariantInputs, measure_variants
from reportgen.profile.timing import round_blocks, round_order
from reportgen.scenario.loader import Tolerance, Variant


def test_round_blocks_split_the_samples_evenly_into_at_most_ten_rounds() -> None:
    assert round_blocks(50) == [5] * 10
    assert round_blocks(7) == [1] * 7
    assert round_blocks(13) == [2, 2, 2, 1, 1, 1, 1, 1, 1, 1]
    assert all(sum(round_blocks(n)) == n for n in range(1, 200))


def test_round_order_puts_every_variant_in_every_position_equally() -> None:
    rounds = [round_order(["a", "b", "c"], r) for r in range(12)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)
    for position in range(3):
        assert sorted(r[position] for r in rounds) == sorted(["a", "b", "c"] * 4)
    assert [round_order(["a", "b"], r) for r in range(4)] == [["a", "b"], ["b", "a"], ["b", "a"], ["a", "b"]]


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def _inputs() -> VariantInputs:
    x = torch.ones(8)
    return VariantInputs((x,), x * 2, Tolerance(1e-6, 1e-6), 64, 8)


def test_samples_are_taken_in_rounds_of_every_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[tuple[str, int]] = []
    names = {}

    def fake_samples(backend, fn, args, n, calls):  # type: ignore[no-untyped-def]
        taken.append((names[fn], n))
        return [1.0] * n

    monkeypatch.setattr(timing, "time_samples", fake_samples)
    variants = []
    for name in ("a", "b"):
        def fn(x: torch.Tensor) -> torch.Tensor:
            return x * 2
        names[fn] = name
        variants.append((Variant(name, name, fn), tmp_path / name))
    settings = MeasureSettingsIn(samples=8, warmup=1, calls_per_sample=1, profile_wait=0, profile_warmup=0,
                                 profile_active=1)
    steps: list[int] = []
    out = measure_variants(MeasureContext(CpuBackend(), _inputs(), settings, lambda _m: None), variants,
                           step=lambda: steps.append(1))
    abba = [("a", 1), ("b", 1), ("b", 1), ("a", 1), ("b", 1), ("a", 1), ("a", 1), ("b", 1)]  # four rounds, ABBA
    assert taken == abba * 2  # 8 samples: 8 rounds of one
    assert [o.result.status for o in out] == [VariantStatus.OK, VariantStatus.OK]
    assert [len(o.result.samples_us) for o in out] == [8, 8] and len(steps) == 5  # 2 prepares, rounds, 2 profiles
    assert all(o.result.ops for o in out)  # each one still profiled


def test_a_variant_failing_in_a_round_is_failed_and_the_others_finish(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def flaky(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    blocks = fail_in_round(monkeypatch, flaky, 3)  # its third round: out of memory (simulated)
    variants = [(Variant("good", "g", _double), tmp_path / "g"), (Variant("flaky", "f", flaky), tmp_path / "f")]
    settings = MeasureSettingsIn(samples=20, warmup=1, calls_per_sample=2, profile_wait=0, profile_warmup=0,
                                 profile_active=1)
    messages: list[str] = []
    good, bad = measure_variants(MeasureContext(CpuBackend(), _inputs(), settings, messages.append), variants)
    assert good.result.status is VariantStatus.OK and len(good.result.samples_us) == 20
    assert bad.result.status is VariantStatus.FAILED and "out of memory (simulated)" in (bad.result.error or "")
    assert blocks["blocks"] == 3 and not bad.result.ops  # out of the later rounds, and never profiled
    assert any(m.startswith("flaky: FAILED: RuntimeError: out of memory") for m in messages)
    assert any(m.startswith("timing 20 samples per variant in 10 interleaved round(s)") for m in messages)


def _kineto_with_kernels() -> dict:
    """Two profiler steps, each an op that launches one kernel on stream 7 (CUDA-shaped categories)."""
    events: list[dict] = []
    for s in range(2):
        t0 = 1000.0 + 200 * s
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0, "dur": 150},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": t0 + 5, "dur": 40},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 10,
             "dur": 8, "args": {"correlation": 10 + s}},
            {"ph": "X", "cat": "kernel", "name": "my_mul_kernel", "pid": 0, "tid": 7, "ts": t0 + 30, "dur": 25,
             "args": {"correlation": 10 + s, "stream": 7}},
        ]
    return {"schemaVersion": 1, "traceEvents": events}


def test_a_profile_whose_trace_has_a_device_lane_gets_the_breakdown_an_import_gets(tmp_path: Path) -> None:
    import json

    class WithDeviceLane(CpuBackend):
        def collect_artifacts(self, out_dir: Path):  # type: ignore[no-untyped-def]
            path = out_dir / "trace.json"  # what a CUDA capture exports, stood in by a fixed Kineto trace
            path.write_text(json.dumps(_kineto_with_kernels()))
            return path, []

    settings = MeasureSettingsIn(samples=5, warmup=1, calls_per_sample=1, profile_wait=0, profile_warmup=0,
                                 profile_active=2)
    with_lane = measure_variants(MeasureContext(WithDeviceLane(), _inputs(), settings, lambda _m: None),
                                 [(Variant("v", "v", _double), tmp_path / "a")])[0].result
    b = with_lane.breakdown
    assert b is not None and b.device_work_count == 2 and b.device_busy_us == pytest.approx(50.0)
    assert [(k.name, k.count, k.total_us) for k in b.kernels] == [("my_mul_kernel", 2, pytest.approx(50.0))]
    cpu_only = measure_variants(MeasureContext(CpuBackend(), _inputs(), settings, lambda _m: None),
                                [(Variant("v", "v", _double), tmp_path / "b")])[0].result
    assert cpu_only.breakdown is None  # no device lane: nothing to break down


def test_a_sample_is_timed_by_the_clock_it_is_given() -> None:
    """``time_samples`` reads the clock it is handed (the A/B worker's CPU time) once before and once after each
    sample's calls, and divides by the calls."""
    readings = iter([0, 4_000, 10_000, 16_000])  # nanoseconds
    calls: list[int] = []
    args = timing.CallArgs((torch.ones(4),), fresh=False)
    samples = timing.time_samples(CpuBackend(), lambda x: calls.append(1), args, 2, 2, clock=lambda: next(readings))
    assert samples == [2.0, 3.0] and len(calls) == 4  # µs per call: 4,000 ns / 2 calls, 6,000 ns / 2 calls
