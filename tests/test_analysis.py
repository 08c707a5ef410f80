"""Pure analysis for the report: op tables, speedups, roofline, history groups, timeline layout."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from factories import NAIVE_OPS, synthetic_run, variant

from reportgen.analysis.history import digest, history
from reportgen.analysis.run_view import baseline_name, run_view, speedups
from reportgen.analysis.timeline import MAX_DEPTH, iteration_window, representative_step, timeline_layout
from reportgen.analysis.variant_view import op_breakdown, roofline
from reportgen.devices.lanes import Lane
from reportgen.model.run import OpRow, Run, TimeBasis, VariantResult, VariantStatus


def test_op_breakdown_on_cpu_uses_cpu_times_sorted_with_exact_shares() -> None:
    b = op_breakdown(variant("naive", 100.0))
    assert [line.name for line in b.lines] == ["aten::mul", "aten::mean", "aten::add", "aten::rsqrt"]
    assert [line.share for line in b.lines] == [0.6, 0.2, 0.1, 0.1]
    assert [line.per_call_us for line in b.lines] == [100.0, 100.0, 50.0, 50.0]
    assert [line.total_device_us for line in b.lines] == [300.0, 120.0, 50.0, 50.0]
    assert b.total_self_device_us == 500.0
    assert b.hotspot is not None and b.hotspot.name == "aten::mul"
    assert [line.is_hotspot for line in b.lines] == [True, False, False, False]
    assert b.device_label == "CPU (device)"


def test_op_breakdown_on_device_uses_device_lane_times() -> None:
    ops = (OpRow("aten::mul", 3, 900.0, 900.0, 1165.0, 1165.0), OpRow("aten::_fused_rms_norm", 1, 10.0, 20.0, 0.0, 0.0),
           OpRow("aten::mean", 1, 5.0, 5.0, 1190.0, 1200.0))
    v = replace(variant("naive", 100.0), ops=ops, time_basis=TimeBasis.DEVICE)
    b = op_breakdown(v)
    assert [line.name for line in b.lines] == ["aten::mean", "aten::mul", "aten::_fused_rms_norm"]
    assert b.total_self_device_us == 2355.0
    assert b.lines[1].share == 1165.0 / 2355.0
    assert b.lines[2].is_hotspot is False and b.lines[2].share == 0.0
    assert b.device_label == "device"


def test_profiler_step_rows_are_kept_out_of_the_table_and_reported_as_overhead() -> None:
    ops = (OpRow("ProfilerStep*", 3, 1000.0, 1500.0, 0.0, 0.0), *NAIVE_OPS)
    b = op_breakdown(replace(variant("naive", 100.0), ops=ops))
    assert "ProfilerStep*" not in [line.name for line in b.lines]
    assert b.step_overhead_us == 1000.0
    assert b.total_self_device_us == 500.0
    assert b.hotspot is not None and b.hotspot.name == "aten::mul"


def test_op_table_beyond_max_rows_is_summed_into_hidden() -> None:
    b = op_breakdown(variant("naive", 100.0), max_rows=2)
    assert [line.name for line in b.lines] == ["aten::mul", "aten::mean"]
    assert (b.hidden_count, b.hidden_self_device_us) == (2, 100.0)
    assert b.total_self_device_us == 500.0


def test_roofline_exact() -> None:
    r = roofline(2048, 100.0, 10e9)
    assert r.achieved_bytes_per_s == pytest.approx(20_480_000.0, rel=1e-12)
    assert r.fraction_of_peak == pytest.approx(0.002048, rel=1e-12)
    assert r.floor_us == pytest.approx(0.2048, rel=1e-12)


def test_roofline_without_peak_or_bytes_says_unknown() -> None:
    assert roofline(2048, 100.0, None).fraction_of_peak is None
    assert roofline(2048, 100.0, None).achieved_bytes_per_s is not None
    assert roofline(0, 100.0, 10e9).achieved_bytes_per_s is None
    assert roofline(2048, None, 10e9).achieved_bytes_per_s is None


def test_speedups_against_naive_then_compiled_against_fused() -> None:
    run = synthetic_run(times_us={"naive": 100.0, "fused": 60.0, "compiled": 30.0})
    got = speedups(run)
    assert [(s.target, s.baseline) for s in got] == [("fused", "naive"), ("compiled", "naive"), ("compiled", "fused")]
    assert [s.ratio.value for s in got] == pytest.approx([100 / 60, 100 / 30, 2.0], rel=1e-12)
    for s in got:
        assert s.ratio.ci_low <= s.ratio.value <= s.ratio.ci_high
        assert (s.ratio.n_numerator, s.ratio.n_denominator) == (30, 30)


def test_baseline_is_first_timed_variant_without_naive_and_failed_variants_are_skipped() -> None:
    variants = (variant("slow", 80.0), variant("broken", 1.0, status=VariantStatus.FAILED, error="boom"),
                variant("quick", 20.0))
    run = synthetic_run(variants=variants)
    assert baseline_name(run) == "slow"
    got = speedups(run)
    assert [(s.target, s.baseline, s.ratio.value) for s in got] == [("quick", "slow", 4.0)]
    view = run_view(run)
    assert view.gain("quick") == got[0]
    assert view.gain("broken") is None
    assert view.any_problem


def test_digest_keeps_medians_and_plain_speedups() -> None:
    failing = variant("compiled", 1.0, status=VariantStatus.FAILED, error="x")
    run = synthetic_run(variants=(variant("naive", 100.0, n=31), variant("fused", 40.0, n=31), failing))
    d = digest(run)
    assert [(v.name, v.status, v.median_us, v.speedup) for v in d.variants] == [
        ("naive", VariantStatus.OK, 100.0, None), ("fused", VariantStatus.OK, 40.0, 2.5),
        ("compiled", VariantStatus.FAILED, None, None)]
    assert d.baseline == "naive" and not d.ok
    assert d.variants[0].ci_low_us is not None and d.variants[0].ci_low_us <= 100.0 <= d.variants[0].ci_high_us


def test_history_groups_never_mix_unlike_runs() -> None:
    a = synthetic_run(run_id="r1", created_utc="2026-11-30T00:00:00Z",
                      variants=(variant("naive", 100.0, n=31), variant("fused", 50.0, n=31)))
    b = synthetic_run(run_id="r2", created_utc="2026-12-01T00:00:00Z",
                      variants=(variant("naive", 90.0, n=31), variant("fused", 30.0, n=31)))
    big = synthetic_run(run_id="r3", created_utc="2026-12-02T00:00:00Z", shape="8,512")
    groups = history([digest(r) for r in (b, big, a)])
    assert [g.run_ids for g in groups] == [("r1", "r2"), ("r3",)]
    naive, fused = groups[0].series
    assert [p.median_us for p in naive.points] == [100.0, 90.0]
    assert [p.speedup for p in naive.points] == [None, None]
    assert [p.speedup for p in fused.points] == pytest.approx([2.0, 3.0])
    assert "shape=4,64" in groups[0].title and "shape=8,512" in groups[1].title


@dataclass(frozen=True)
class Ev:
    """A minimal stand-in for reportgen.traces.reader.TraceEvent."""

    name: str
    lane: str
    start_us: float
    duration_us: float
    tid: str = "1"
    correlation: int | None = None
    pid: str = "9"


def test_timeline_layout_nests_clips_and_drops_wrappers() -> None:
    events = [
        Ev("PyTorch Profiler (0)", "other", 0.0, 1000.0),
        Ev("ProfilerStep#2", "framework", 100.0, 100.0),
        Ev("aten::rms_norm", "framework", 110.0, 50.0),
        Ev("aten::mul", "framework", 120.0, 10.0),
        Ev("cudaLaunchKernel", "runtime", 125.0, 3.0, correlation=7),
        Ev("kernel", "device", 190.0, 30.0, correlation=7),
        Ev("later", "framework", 400.0, 5.0),
    ]
    start, end = iteration_window(events, 100.0, 200.0)
    assert (start, end) == (100.0, 220.0)
    layout = timeline_layout(events, start, end, "ProfilerStep#2")
    got = [(b.lane, b.depth, b.start_us, b.duration_us, b.name) for b in layout.bars]
    assert got == [
        (Lane.FRAMEWORK, 0, 10.0, 50.0, "aten::rms_norm"),
        (Lane.FRAMEWORK, 1, 20.0, 10.0, "aten::mul"),
        (Lane.RUNTIME, 0, 25.0, 3.0, "cudaLaunchKernel"),
        (Lane.DEVICE, 0, 90.0, 30.0, "kernel"),
    ]
    assert [(t.lane, t.title, t.depth) for t in layout.tracks] == [
        (Lane.FRAMEWORK, "framework ops · thread 1", 2), (Lane.RUNTIME, "runtime · thread 1", 1),
        (Lane.DEVICE, "device · stream 1", 1)]
    assert layout.rows[:2] == ((Lane.FRAMEWORK, "9/1", 0), (Lane.FRAMEWORK, "9/1", 1))
    assert layout.window_us == 120.0


def test_iteration_window_is_cut_to_the_step_content() -> None:
    events = [Ev("ProfilerStep#1", "framework", 0.0, 10_000.0), Ev("aten::mul", "framework", 10.0, 20.0),
              Ev("late", "framework", 20_000.0, 5.0)]
    assert iteration_window(events, 0.0, 10_000.0) == (0.0, 30.0)
    assert iteration_window([], 0.0, 50.0) == (0.0, 50.0)


def test_timeline_layout_folds_calls_deeper_than_max_depth() -> None:
    events = [Ev(f"op{i}", "framework", float(i), 100.0 - 2 * i) for i in range(MAX_DEPTH + 2)]
    layout = timeline_layout(events, 0.0, 100.0)
    assert [b.depth for b in layout.bars] == [0, 1, 2, 3, 4, 5, 5, 5]
    assert [b.folded for b in layout.bars] == [False] * 6 + [True, True]


def test_representative_step_is_the_median_duration() -> None:
    steps = [Ev("ProfilerStep#0", "framework", 0.0, 90.0), Ev("ProfilerStep#1", "framework", 100.0, 10.0),
             Ev("ProfilerStep#2", "framework", 200.0, 20.0)]
    chosen = representative_step(steps)
    assert chosen is not None and chosen.name == "ProfilerStep#2"
    assert representative_step([]) is None


def test_digest_from_a_run_view_reuses_its_summaries_and_equals_the_plain_digest() -> None:
    run = synthetic_run(variants=(variant("naive", 100.0), variant("fused", 40.0),
                                  variant("boom", 1.0, status=VariantStatus.FAILED, error="x")))
    view = run_view(run)
    assert digest(run, view) == digest(run)
    assert [v.speedup for v in digest(run, view).variants] == [None, pytest.approx(2.5, rel=1e-12), None]


def _declaring(baseline: str | None, variants: tuple[VariantResult, ...]) -> Run:
    run = synthetic_run(variants=variants)
    return replace(run, scenario=replace(run.scenario, baseline=baseline))


def test_the_baseline_is_the_one_the_run_declares_not_a_hard_coded_name() -> None:
    variants = (variant("naive", 100.0), variant("fused", 50.0), variant("compiled", 25.0))
    run = _declaring("fused", variants)
    assert baseline_name(run) == "fused"
    got = speedups(run)
    assert [(s.target, s.baseline, s.ratio.value) for s in got] == [("naive", "fused", 0.5), ("compiled", "fused", 2.0)]
    d = digest(run)
    assert d.baseline == "fused" and [v.speedup for v in d.variants] == [0.5, None, 2.0]


def test_without_a_declared_baseline_the_first_timed_variant_is_it_even_beside_naive() -> None:
    run = _declaring(None, (variant("fused", 50.0), variant("naive", 100.0)))
    assert baseline_name(run) == "fused"


def test_a_declared_baseline_that_failed_falls_back_to_the_first_timed_variant() -> None:
    failed = variant("ref", 1.0, status=VariantStatus.FAILED, error="boom")
    run = _declaring("ref", (failed, variant("slow", 80.0), variant("quick", 20.0)))
    assert baseline_name(run) == "slow"
