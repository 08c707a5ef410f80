"""Shape sweeps (#15): ceiling selection on synthetic curves, the sweep analysis, parsing, and a real CPU sweep."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from conftest import run_cli
from factories import fail_in_round, synthetic_run

from reportgen.analysis.ceilings import DRAM, ceiling_for, curve_bandwidth, memory_level
from reportgen.analysis.sweep import memory_roofs, sweep_view
from reportgen.errors import ScenarioError
from reportgen.model.run import (
    SCHEMA_VERSION,
    BandwidthPoint,
    CacheLevel,
    DevicePeak,
    SweepPoint,
    SweepSample,
    VariantStatus,
)
from reportgen.scenario.loader import MAX_SWEEP_POINTS, load_scenario, parse_sweep
from reportgen.store.loader import load_run
from reportgen.store.runjson import parse_run_json, run_to_json
from reportgen.text.formatting import fmt_of_ceiling

KIB, MIB = 1024, 1024**2
LEVELS = (CacheLevel("L1d", 32 * KIB), CacheLevel("L2", 1 * MIB), CacheLevel("L3", 32 * MIB))
CURVE = (BandwidthPoint(32 * KIB, 20e9), BandwidthPoint(256 * KIB, 80e9), BandwidthPoint(512 * KIB, 90e9),
         BandwidthPoint(2 * MIB, 130e9), BandwidthPoint(16 * MIB, 85e9), BandwidthPoint(64 * MIB, 30e9),
         BandwidthPoint(512 * MIB, 28e9))
PEAK = DevicePeak(28e9, 100e9, "copy of 256 MiB", bandwidth_curve=CURVE, cache_levels=LEVELS,
                  flops_source="measured: torch.mm")


# ---------------------------------------------------------------------------------------------
# Ceilings: exact answers on synthetic curves


@pytest.mark.parametrize(("working_set", "level"), [
    (1, "L1d"), (32 * KIB, "L1d"), (32 * KIB + 1, "L2"), (1 * MIB, "L2"), (20 * MIB, "L3"), (33 * MIB, DRAM),
])
def test_memory_level_is_the_smallest_cache_that_holds_the_working_set(working_set: int, level: str) -> None:
    assert memory_level(working_set, LEVELS) == level
    assert memory_level(working_set, ()) is None


@pytest.mark.parametrize(("working_set", "expected_bw"), [
    (20 * KIB, 130e9),     # L1d: the L3 copy at 2 MiB is faster than the dispatch-bound 32 KiB one, and bounds it too
    (300 * KIB, 130e9),    # L2: likewise
    (4 * MIB, 130e9),      # L3: 2 MiB beats 16 MiB
    (20 * MIB, 130e9),
    (100 * MIB, 30e9),     # DRAM: 64 MiB beats 512 MiB; no cache copy counts
])
def test_ceiling_is_the_fastest_copy_in_the_memory_level_or_a_slower_one(working_set: int, expected_bw: float) -> None:
    c = ceiling_for(PEAK, working_set)
    assert c.bandwidth_bytes_per_s == expected_bw
    assert c.level == memory_level(working_set, LEVELS)
    assert "working set" in c.source


def test_a_cache_level_measured_slow_on_a_busy_machine_is_lifted_by_the_slower_levels() -> None:
    busy = (BandwidthPoint(256 * KIB, 80e9), BandwidthPoint(2 * MIB, 0.3e9), BandwidthPoint(16 * MIB, 2.2e9),
            BandwidthPoint(64 * MIB, 9e9), BandwidthPoint(512 * MIB, 17e9))
    assert curve_bandwidth(4 * MIB, busy, LEVELS).bandwidth_bytes_per_s == 17e9  # not 2.2 GB/s: DRAM bounds L3
    assert curve_bandwidth(300 * KIB, busy, LEVELS).bandwidth_bytes_per_s == 80e9
    c = ceiling_for(dataclasses.replace(PEAK, bandwidth_curve=busy), 4 * MIB)
    assert c.level == "L3" and "in DRAM, slower than L3" in c.source


def test_without_cache_levels_the_nearest_copy_in_log_size_is_the_ceiling() -> None:
    curve = (BandwidthPoint(1 * MIB, 50e9), BandwidthPoint(100 * MIB, 10e9))
    assert curve_bandwidth(9 * MIB, curve).bandwidth_bytes_per_s == 50e9  # 9 MiB is nearer 1 MiB than 100 MiB in log
    assert curve_bandwidth(11 * MIB, curve).bandwidth_bytes_per_s == 10e9
    assert curve_bandwidth(10 * MIB, curve).bandwidth_bytes_per_s == 10e9  # a tie takes the larger, slower copy
    assert curve_bandwidth(0, curve) is None


def test_a_level_with_no_copy_takes_a_slower_levels_or_else_the_nearest_copy() -> None:
    curve = (BandwidthPoint(256 * KIB, 80e9), BandwidthPoint(512 * MIB, 28e9))
    assert curve_bandwidth(8 * MIB, curve, LEVELS).bandwidth_bytes_per_s == 28e9  # L3 has none: DRAM's copy bounds it
    only_fast = (BandwidthPoint(256 * KIB, 80e9),)
    assert curve_bandwidth(8 * MIB, only_fast, LEVELS).bandwidth_bytes_per_s == 80e9  # none as slow: the nearest
    c = ceiling_for(dataclasses.replace(PEAK, bandwidth_curve=only_fast), 8 * MIB)
    assert c.level == "L3" and "nearest in size" in c.source


def test_without_a_curve_the_single_figure_is_the_ceiling() -> None:
    flat = DevicePeak(3e12, None, "vendor: 3 TB/s")
    c = ceiling_for(flat, 10 * MIB)
    assert (c.bandwidth_bytes_per_s, c.level, c.source) == (3e12, None, "vendor: 3 TB/s")


def test_a_fraction_over_one_is_never_printed_as_a_percentage() -> None:
    assert fmt_of_ceiling(0.495) == "49.5 %"
    assert fmt_of_ceiling(1.0) == "100.0 %"
    assert fmt_of_ceiling(1.34) == "ceiling too low: 1.34×"
    assert "%" not in fmt_of_ceiling(1.001)
    assert fmt_of_ceiling(None) == "—"


# ---------------------------------------------------------------------------------------------
# The sweep analysis


def spread_samples(median_us: float, n: int = 13) -> tuple[float, ...]:
    return tuple(median_us * (1 + 0.01 * (i - n // 2) / n) for i in range(n))


def _point(shape: tuple[int, ...], times: dict[str, float], error: str | None = None) -> SweepPoint:
    rows, hidden = shape
    samples = tuple(SweepSample(n, VariantStatus.OK, spread_samples(t), 1, True) for n, t in times.items())
    return SweepPoint(shape, (2 * rows * hidden + hidden) * 4, 4 * rows * hidden, samples=() if error else samples,
                      rounds=0 if error else 4, error=error)


def _sweep_run(points: tuple[SweepPoint, ...]):  # type: ignore[no-untyped-def]
    return dataclasses.replace(synthetic_run(), peak=PEAK, sweep=points)


def test_sweep_row_figures_are_exact() -> None:
    small = _point((1, 4096), {"naive": 10.0, "fused": 5.0})
    run = _sweep_run((small,))
    view = sweep_view(run, "naive")
    assert view is not None and view.variants == ("naive", "fused") and view.baseline == "naive"
    row = view.rows[0]
    assert row.shape_text == "1,4096" and row.bytes_per_call == 12 * 4096
    assert row.level == "L2" and row.ceiling_bytes_per_s == 130e9  # 48 KiB: L2; the best copy in L2 or slower
    assert row.arithmetic_intensity == pytest.approx(4 * 4096 / (12 * 4096))
    fused = row.cell("fused")
    assert fused is not None
    assert fused.timing is not None and fused.timing.median_us == pytest.approx(5.0)
    assert fused.achieved_bytes_per_s == pytest.approx(12 * 4096 / 5e-6)
    assert fused.fraction_of_ceiling == pytest.approx(12 * 4096 / 5e-6 / 130e9)
    assert fused.achieved_flops_per_s == pytest.approx(4 * 4096 / 5e-6)
    assert fused.speedup is not None and fused.speedup.value == pytest.approx(2.0)
    assert row.cell("naive").speedup is None  # the baseline has no speedup over itself


def test_over_ceiling_cells_are_flagged_and_failed_points_counted() -> None:
    fast = _point((64, 4096), {"naive": 0.5, "fused": 100.0})  # 2 MiB in 0.5 µs: 4 TB/s, far over 130 GB/s
    broken = _point((100000, 4096), {}, error="RuntimeError: out of memory")
    view = sweep_view(_sweep_run((fast, broken)), "naive")
    assert view is not None
    assert view.any_over_ceiling and view.rows[0].cell("naive").over_ceiling
    assert not view.rows[0].cell("fused").over_ceiling
    assert view.failed_points == 1 and view.rows[1].error == "RuntimeError: out of memory"
    assert sweep_view(synthetic_run(), "naive") is None


def test_memory_roofs_are_each_levels_ceiling_fastest_first_equal_ones_merged() -> None:
    roofs = memory_roofs(PEAK)
    assert [(r.label, r.bandwidth_bytes_per_s) for r in roofs] == [("L1d/L2/L3", 130e9), ("DRAM", 30e9)]
    busy = dataclasses.replace(PEAK, bandwidth_curve=(
        BandwidthPoint(256 * KIB, 80e9), BandwidthPoint(2 * MIB, 0.3e9), BandwidthPoint(512 * MIB, 17e9)))
    assert [(r.label, r.bandwidth_bytes_per_s) for r in memory_roofs(busy)] == [("L2", 80e9), ("L3/DRAM", 17e9)]
    no_levels = dataclasses.replace(PEAK, cache_levels=())
    assert [r.label for r in memory_roofs(no_levels)][:2] == ["2 MiB copy", "512 KiB copy"]
    assert [r.label for r in memory_roofs(DevicePeak(1e9, None, "x"))] == ["peak"]
    assert memory_roofs(DevicePeak(None, None, "unknown")) == ()


def test_a_sweep_survives_the_bundle_round_trip() -> None:
    run = _sweep_run((_point((1, 4096), {"naive": 10.0}), _point((8, 4096), {}, error="boom")))
    again = parse_run_json(run_to_json(run), "run.json")
    assert again == run


# ---------------------------------------------------------------------------------------------
# Parsing


def test_parse_sweep_forms_and_errors() -> None:
    sc = load_scenario("rmsnorm")
    assert parse_sweep("1,4096; 64,4096", sc) == ((1, 4096), (64, 4096))
    assert parse_sweep("1x4096 64x4096", sc) == ((1, 4096), (64, 4096))  # spaces too
    with pytest.raises(ScenarioError, match="shape 1,4096 is given more than once"):  # a repeat is a typo
        parse_sweep("1x4096 64x4096 1,4096", sc)
    assert parse_sweep("default", sc) == sc.default_sweep and len(sc.default_sweep) >= 4
    with pytest.raises(ScenarioError, match="no default sweep") as info:
        parse_sweep("default", dataclasses.replace(sc, default_sweep=()))
    assert info.value.as_flag_message().startswith("--sweep default")
    with pytest.raises(ScenarioError, match="sweep shape '1,x'") as bad:
        parse_sweep("4,8; 1,x", sc)
    assert bad.value.as_flag_message().startswith("--sweep shape '1,x': expected comma-separated")
    with pytest.raises(ScenarioError, match=f"more than {MAX_SWEEP_POINTS} shapes"):
        parse_sweep(";".join(f"{i},8" for i in range(1, MAX_SWEEP_POINTS + 2)), sc)


# ---------------------------------------------------------------------------------------------
# A real CPU sweep through the CLI


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("sweep")
    store, site = work / "results", work / "site"
    proc = run_cli("profile", "--device", "cpu", "--shape", "4,256", "--samples", "6", "--variants", "naive,fused",
                   "--sweep", "1,128; 8,512; 32,1024", "--quiet", "--store", str(store))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli("build", "--runs", str(store), "--out", str(site))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return store, site


def test_real_sweep_is_stored_with_every_point_and_the_ceilings(real_sweep: tuple[Path, Path]) -> None:
    store, _ = real_sweep
    (bundle,) = [p for p in store.iterdir() if not p.name.startswith(".")]
    run = load_run(bundle)
    assert [p.shape for p in run.sweep] == [(1, 128), (8, 512), (32, 1024)]
    for p in run.sweep:
        assert p.error is None and p.rounds > 0
        assert [s.variant for s in p.samples] == ["naive", "fused"]
        assert all(s.status is VariantStatus.OK and len(s.samples_us) >= 5 and s.correctness_passed for s in p.samples)
        assert p.bytes_per_call == (2 * p.shape[0] * p.shape[1] + p.shape[1]) * 4
        # one call's memory at each shape: naive's peak is x * r and the output (one x each) plus the row vector
        naive = p.samples[0].memory
        assert naive is not None and naive.exact and naive.peak_bytes == (2 * p.shape[0] * p.shape[1] + p.shape[0]) * 4
        assert naive.timeline == () and naive.ops == ()  # figures only per shape
    assert len(run.peak.bandwidth_curve) >= 4 and all(b.bandwidth_bytes_per_s > 0 for b in run.peak.bandwidth_curve)
    assert run.peak.flops_per_s and run.peak.flops_source.startswith("measured")
    assert json.loads((bundle / "run.json").read_text())["schema_version"] == SCHEMA_VERSION


def test_real_sweep_page_and_report_hold_the_table_and_both_charts(real_sweep: tuple[Path, Path]) -> None:
    _, site = real_sweep
    (page_dir,) = list((site / "runs").iterdir())
    html = (page_dir / "index.html").read_text(encoding="utf-8")
    md = (page_dir / "report.md").read_text(encoding="utf-8")
    for text in (html, md):
        assert "a sweep of 3 shape(s)" in text
        assert "sweep-scaling.png" in text and "sweep-roofline.png" in text
        for shape in ("1\\,128", "8\\,512", "32\\,1024") if text is md else ("1,128", "8,512", "32,1024"):
            assert shape in text
    table = html[html.index('<table class="num sweep">'):]
    table = table[: table.index("</table>")]
    assert table.count("<tr class=\"row-ok\">") == 6  # 3 shapes x 2 variants
    assert re.search(r"GFLOP/s", html) and "speedup vs naive" in table
    assert "peak memory / call" in table and "sweep-memory.png" in html and "sweep-memory.png" in md
    for chart in ("sweep-scaling.png", "sweep-roofline.png", "sweep-memory.png"):
        data = (page_dir / chart).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
    weight = sum(f.stat().st_size for f in page_dir.iterdir() if f.is_file())
    assert weight < 300_000, weight  # page, report and charts (the traces under data/ are downloads)


# ---------------------------------------------------------------------------------------------
# The config's sweep


def _profile_args(sweep: str | None):  # type: ignore[no-untyped-def]
    import argparse

    return argparse.Namespace(scenario="rmsnorm", shape="2,64", dtype=None, seed=0, label="", variants=None,
                              samples=None, warmup=None, threads=None, quiet=True, device="cpu", sweep=sweep)


def test_the_config_sweep_applies_and_the_flag_overrides_it(tmp_path: Path) -> None:
    from reportgen.commands import profile_request
    from reportgen.config import load_config

    (tmp_path / "reportgen.toml").write_text('sweep = ["1,128", "4x128"]\n')
    config = load_config(cwd=tmp_path)
    assert config.sweep == "1,128; 4x128" and config.origin("sweep").endswith("reportgen.toml: sweep")
    assert ("sweep", "1,128; 4x128", config.origin("sweep")) in config.describe()
    store = tmp_path / "results"
    assert profile_request(_profile_args(None), store, config).sweep == ((1, 128), (4, 128))
    assert profile_request(_profile_args("8,64"), store, config).sweep == ((8, 64),)
    assert profile_request(_profile_args("none"), store, config).sweep == ()


def test_a_bad_config_sweep_names_the_file_and_key(tmp_path: Path) -> None:
    from reportgen.commands import profile_request
    from reportgen.config import load_config
    from reportgen.errors import ConfigError

    (tmp_path / "reportgen.toml").write_text("sweep = 7\n")
    with pytest.raises(ConfigError, match=r"reportgen.toml: sweep: expected \"default\" or a list of shapes"):
        load_config(cwd=tmp_path)
    (tmp_path / "reportgen.toml").write_text('sweep = "1,x"\n')
    config = load_config(cwd=tmp_path)
    with pytest.raises(ConfigError) as info:
        profile_request(_profile_args(None), tmp_path / "results", config)
    assert str(info.value).endswith("reportgen.toml: sweep shape '1,x': expected comma-separated positive integers, "
                                    "e.g. 4,2048,4096")


def test_a_config_default_sweep_skips_a_scenario_without_one(tmp_path: Path) -> None:
    from reportgen.commands import _sweep_of
    from reportgen.config import load_config

    (tmp_path / "reportgen.toml").write_text('sweep = "default"\n')
    config = load_config(cwd=tmp_path)
    sc = load_scenario("rmsnorm")
    assert _sweep_of(None, config, sc) == sc.default_sweep
    assert _sweep_of(None, config, dataclasses.replace(sc, default_sweep=())) == ()
    with pytest.raises(ScenarioError, match="no default sweep"):
        _sweep_of("default", config, dataclasses.replace(sc, default_sweep=()))


def test_vendor_compute_roofs_come_from_the_documented_figures_only() -> None:
    from reportgen.devices.cuda import vendor_compute_roof
    from reportgen.devices.neuron import chips

    lnc2 = chips.resolve_lnc(chips.CHIPS["trn2"], 2, "neuron-ls", None)
    flops, source = chips.core_compute_roof("trn2.48xlarge", lnc2, "bfloat16")  # RMSNorm's engine: Vector
    assert flops == pytest.approx(1e12 * 2) and "drawn: Vector Engine 2 TFLOPS" in source
    assert "Tensor Engine 158 TFLOPS" in source and "neuron-core-v3.rst" in source
    assert chips.chip_share("trn2.48xlarge", lnc2, "float16").flops_per_s == pytest.approx(667e12 / 8 * 2)
    assert chips.core_compute_roof(None, chips.Lnc(None, "-"), "bfloat16") == (
        None, "compute roof: none (instance type unknown)")
    assert vendor_compute_roof("NVIDIA H200", "bfloat16") == (990e12, "vendor: H200 990 TFLOPS dense bfloat16")
    assert vendor_compute_roof("NVIDIA A10G", "float32")[0] is None
    assert vendor_compute_roof("NVIDIA H200", "float16") == (990e12, "vendor: H200 990 TFLOPS dense float16")
    for other in ("NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA H200 MIG 1g.18gb"):  # a substring is not the part
        assert vendor_compute_roof(other, "bfloat16") == (
            None, f"compute roof: none (no vendor bfloat16 figure recorded for {other})")


def test_a_cuda_run_records_the_gpu_as_nvidia_smi_reports_it() -> None:
    from reportgen.devices.cuda import gpu_facts

    line = "580.159.03, GPU-5f0c4d2e-1a2b-3c4d-5e6f-7a8b9c0d1e2f, Default, [N/A], 345 MHz, 1980 MHz, 3201 MHz\n"
    assert gpu_facts(line) == {"driver_version": "580.159.03", "gpu_uuid": "GPU-5f0c4d2e-1a2b-3c4d-5e6f-7a8b9c0d1e2f",
                               "compute_mode": "Default", "sm_clock": "345 MHz", "sm_clock_max": "1980 MHz",
                               "memory_clock": "3201 MHz"}
    assert gpu_facts("580.1, GPU-x, Exclusive_Process, Enabled, 1 MHz, 2 MHz, 3 MHz")["mig_mode"] == "Enabled"
    assert gpu_facts(None) == gpu_facts("") == gpu_facts("only, three, fields") == {"driver_version": None}


# ---------------------------------------------------------------------------------------------
# Cache flushing between timed calls (CUDA's L2), tested with a CPU stand-in that records the order


class _FlushingCpu:
    """A CPU backend that declares a cache flush: records flushes and timed calls in order."""

    def __new__(cls):  # type: ignore[no-untyped-def]
        from reportgen.devices.cpu import CpuBackend

        class Flushing(CpuBackend):
            events: list[str]

            def cache_flush_bytes(self) -> int:
                return 64 * 1024 * 1024

            def flush_cache(self) -> None:
                self.events.append("flush")

            def time_one_call(self, fn, args):  # type: ignore[no-untyped-def]
                self.events.append("call")
                fn(*args)
                return 7.0

        backend = Flushing()
        backend.events = []
        return backend


def test_a_flushing_device_times_one_call_per_sample_each_after_a_flush() -> None:
    import torch

    from reportgen.profile.sweep import SweepPlan, measure_point
    from reportgen.profile.timing import CallArgs, calls_per_sample, time_samples

    backend = _FlushingCpu()
    calls: list[int] = []
    args = CallArgs((torch.ones(4),))
    assert calls_per_sample(backend, lambda x: calls.append(1), args, 50, 2000.0, False) == 1
    assert time_samples(backend, lambda x: calls.append(1), args, 5, 1) == [7.0] * 5
    assert backend.events == ["flush", "call"] * 5 and len(calls) == 5

    sc = load_scenario("rmsnorm")
    plan = SweepPlan(sc, tuple((v, v.fn) for v in sc.variants if not v.compile), "float32", 0, {}, warmup=1, rounds=2,
                     samples_per_round=3)
    backend.events.clear()
    point = measure_point(backend, plan, (2, 64), lambda _m: None)
    assert point.cache_flush_bytes == 64 * 1024 * 1024 and point.rounds == 2
    assert [(s.variant, s.samples_us, s.calls_per_sample) for s in point.samples] == [
        ("naive", (7.0,) * 6, 1), ("fused", (7.0,) * 6, 1)]
    assert backend.events == ["flush", "call"] * 12  # 2 rounds x 3 samples x 2 variants, each right after a flush


# ---------------------------------------------------------------------------------------------
# compare per shape


def _swept(run_id: str, created: str, times: dict[tuple[int, int], dict[str, float]]):  # type: ignore[no-untyped-def]
    run = synthetic_run(run_id=run_id, created_utc=created)
    return dataclasses.replace(run, peak=PEAK, sweep=tuple(_point(shape, t) for shape, t in times.items()))


def test_compare_reports_each_shared_shape_outside_the_verdict() -> None:
    from reportgen.compare.report import render_markdown

    base = _swept("20261130T000000Z-cpu-base-aaaaaa", "2026-11-30T00:00:00Z",
                  {(1, 4096): {"naive": 10.0, "fused": 5.0}, (64, 4096): {"naive": 100.0, "fused": 50.0}})
    head = _swept("20261130T001000Z-cpu-head-bbbbbb", "2026-11-30T00:10:00Z",
                  {(1, 4096): {"naive": 10.0, "fused": 7.5}, (8, 4096): {"naive": 20.0, "fused": 9.0},
                   (64, 4096): {"naive": 100.0, "fused": 50.0}})
    from reportgen.compare.diff import compare_runs

    c = compare_runs(base, head, 5.0)
    assert [(s.shape, s.variant) for s in c.shapes] == [("1,4096", "naive"), ("1,4096", "fused"),
                                                        ("64,4096", "naive"), ("64,4096", "fused")]
    fused_small = c.shapes[1]
    assert (fused_small.base_median_us, fused_small.head_median_us) == (pytest.approx(5.0), pytest.approx(7.5))
    assert fused_small.change_pct == pytest.approx(50.0) and fused_small.ci_low_pct > 40
    assert not fused_small.drift_included  # no history: within-run interval, said so
    assert c.verdict.value != "regression"  # the shapes do not gate
    md = render_markdown(c)
    assert "Per shape: 4 variant × shape pairs" in md and "| 1,4096 | fused |" in md.replace("\\,", ",")
    assert "drift between runs unknown" in md
    short = render_markdown(c, limit_chars=len(md) - 200)
    assert "more shape rows not shown" in short and short.splitlines()[1] == md.splitlines()[1]


def test_compare_per_shape_intervals_are_widened_by_a_measured_drift() -> None:
    from reportgen.compare.diff import compare_runs

    history = [_swept(f"20261129T00{i:02d}00Z-cpu-h-{i:06d}", f"2026-11-29T00:{i:02d}:00Z",
                      {(1, 4096): {"naive": 10.0}}) for i in range(5)]
    history = [dataclasses.replace(r, variants=tuple(dataclasses.replace(v, samples_us=tuple(x * (1 + 0.05 * (-1) ** i)
                                                                                             for x in v.samples_us))
                                                     for v in r.variants)) for i, r in enumerate(history)]
    base = _swept("20261130T000000Z-cpu-base-aaaaaa", "2026-11-30T00:00:00Z", {(1, 4096): {"naive": 10.0}})
    head = _swept("20261130T001000Z-cpu-head-bbbbbb", "2026-11-30T00:10:00Z", {(1, 4096): {"naive": 11.0}})
    narrow = compare_runs(base, head, 5.0).shapes[0]
    wide = compare_runs(base, head, 5.0, history=[*history, base]).shapes[0]
    assert wide.drift_included and not narrow.drift_included
    assert wide.change_pct == pytest.approx(narrow.change_pct)
    assert wide.ci_low_pct < narrow.ci_low_pct - 5 and wide.ci_high_pct > narrow.ci_high_pct + 5


# ---------------------------------------------------------------------------------------------
# History per shape


def test_each_swept_shape_joins_that_shapes_history_and_survives_the_manifest() -> None:
    import json as _json

    from reportgen.analysis.digest_json import digest_from_manifest
    from reportgen.analysis.history import digest, history
    from reportgen.model.codec import to_jsonable

    def run(i: int, fused_us: float):  # type: ignore[no-untyped-def]
        r = _swept(f"20261130T00{i}000Z-cpu-r-{i:06d}", f"2026-11-30T00:{i}0:00Z",
                   {(1, 4096): {"naive": 10.0, "fused": fused_us}, (4, 64): {"naive": 3.0}})
        return r  # the run's own shape is 4,64: that sweep point is not counted twice

    digests = [digest(run(1, 5.0)), digest(run(2, 4.0))]
    assert [s.shape for s in digests[0].shapes] == ["1,4096"]
    groups = {g.parameters: g for g in history(digests)}
    small = groups[(("dtype", "float32"), ("shape", "1,4096"))]
    assert small.run_ids == (digests[0].run_id, digests[1].run_id)
    fused = next(s for s in small.series if s.variant == "fused")
    assert [p.median_us for p in fused.points] == [pytest.approx(5.0), pytest.approx(4.0)]
    assert [p.speedup for p in fused.points] == [pytest.approx(2.0), pytest.approx(2.5)]
    own = groups[(("dtype", "float32"), ("shape", "4,64"))]
    assert len(own.run_ids) == 2 and len(set(own.run_ids)) == 2  # the profiled shape, once per run
    stored = _json.loads(_json.dumps(to_jsonable(digests[0])))
    assert digest_from_manifest(stored) == digests[0]  # the fast path reads the shapes back exactly


def test_a_sweep_shape_too_large_for_memory_names_the_flag_or_the_config(tmp_path: Path) -> None:
    from reportgen.commands import _sweep_of
    from reportgen.config import load_config
    from reportgen.errors import ConfigError

    sc = load_scenario("rmsnorm")
    config = load_config(cwd=tmp_path)
    with pytest.raises(ScenarioError) as info:
        _sweep_of("1,64; 100000,100000,100000", config, sc)
    assert info.value.as_flag_message().startswith("--sweep shape 100000,100000,100000: one float32 input of 1e+15")
    (tmp_path / "reportgen.toml").write_text('sweep = ["100000,100000,100000"]\n')
    with pytest.raises(ConfigError) as from_file:
        _sweep_of(None, load_config(cwd=tmp_path), sc)
    assert "reportgen.toml: sweep shape 100000,100000,100000: one float32 input" in str(from_file.value)


# ---------------------------------------------------------------------------------------------
# Sweeps of declared parameters


def test_parse_sweep_params_types_the_values_and_names_the_flag() -> None:
    from reportgen.scenario.loader import Param, parse_sweep_params

    sc = dataclasses.replace(load_scenario("rmsnorm"), params=(Param("eps", float, 1e-6, "added"),))
    assert parse_sweep_params(["eps=1e-5, 1e-6,1e-5"], sc) == (("eps", (1e-5, 1e-6)),)
    with pytest.raises(ScenarioError) as unknown:
        parse_sweep_params(["dim=1,2"], sc)
    assert unknown.value.as_flag_message() == ("--sweep-param dim: scenario 'rmsnorm' declares no such parameter "
                                               "(it declares: eps)")
    with pytest.raises(ScenarioError, match="expected NAME=V1,V2"):
        parse_sweep_params(["eps"], sc)
    with pytest.raises(ScenarioError, match="expected float"):
        parse_sweep_params(["eps=tiny"], sc)


def test_sweep_points_are_every_shape_times_every_parameter_combination() -> None:
    from reportgen.profile.command import ProfileRequest
    from reportgen.profile.measure import MeasureSettingsIn

    sc = load_scenario("rmsnorm")
    req = ProfileRequest("cpu", sc, (2, 64), "float32", 0, "", ("naive",), MeasureSettingsIn(), None, Path("r"), True,
                         sweep=((1, 8), (2, 8)), sweep_params=(("a", (1, 2)), ("b", ("x",))))
    assert req.sweep_points() == [((1, 8), {"a": 1, "b": "x"}), ((1, 8), {"a": 2, "b": "x"}),
                                  ((2, 8), {"a": 1, "b": "x"}), ((2, 8), {"a": 2, "b": "x"})]
    only_params = dataclasses.replace(req, sweep=())
    assert [s for s, _ in only_params.sweep_points()] == [(2, 64), (2, 64)]  # at the run's own shape
    assert dataclasses.replace(req, sweep=(), sweep_params=()).sweep_points() == []


def test_a_real_parameter_sweep_is_stored_shown_and_keyed_by_its_values(tmp_path: Path) -> None:
    from user_repo_kit import write_user_package

    from reportgen.analysis.history import digest, history

    write_user_package(tmp_path, None)
    store, site = tmp_path / "results", tmp_path / "site"
    proc = run_cli("profile", "--device", "cpu", "--scenario", str(tmp_path / "bench" / "softmax.py"), "--shape", "4,64",
                   "--samples", "5", "--sweep-param", "eps=1e-5,2e-5", "--quiet", "--store", str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (bundle,) = [p for p in store.iterdir() if not p.name.startswith(".")]
    run = load_run(bundle)
    assert [(p.shape, p.params) for p in run.sweep] == [((4, 64), {"eps": "1e-05"}), ((4, 64), {"eps": "2e-05"})]
    assert all(s.correctness_passed for p in run.sweep for s in p.samples)  # the reference got each eps too
    assert run_cli("build", "--runs", str(store), "--out", str(site)).returncode == 0
    page = (site / "runs" / bundle.name / "index.html").read_text(encoding="utf-8")
    assert "4,64 · eps=1e-05" in page and "4,64 · eps=2e-05" in page
    keys = {g.parameters for g in history([digest(run)])}
    assert (("dtype", "float32"), ("eps", "2e-05"), ("shape", "4,64")) in keys
    assert (("dtype", "float32"), ("eps", "1e-06"), ("shape", "4,64")) in keys  # the run's own point


def test_a_variant_failing_in_a_sweep_round_is_failed_at_that_shape_and_the_others_finish(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from reportgen.devices.cpu import CpuBackend
    from reportgen.profile.sweep import SweepPlan, measure_point
    from reportgen.scenario.loader import Variant

    sc = load_scenario("rmsnorm")
    naive = next(v for v in sc.variants if v.name == "naive")

    def flaky(x, w):  # type: ignore[no-untyped-def]
        return naive.fn(x, w)

    blocks = fail_in_round(monkeypatch, flaky, 2)  # its second round: out of memory (simulated)
    plan = SweepPlan(sc, ((naive, naive.fn), (Variant("flaky", "fails in a round", flaky), flaky)), "float32", 0, {},
                     warmup=1, rounds=4, samples_per_round=3)
    messages: list[str] = []
    point = measure_point(CpuBackend(), plan, (2, 64), messages.append)
    good, bad = point.samples
    assert (good.variant, good.status, len(good.samples_us)) == ("naive", VariantStatus.OK, 12)
    assert bad.variant == "flaky" and bad.status is VariantStatus.FAILED and bad.samples_us == ()
    assert "out of memory (simulated)" in (bad.error or "") and blocks["blocks"] == 2  # left out of rounds 3 and 4
    assert any(m.startswith("shape 2,64: flaky: FAILED: RuntimeError: out of memory") for m in messages)


def test_an_ab_worker_on_a_flushing_device_reports_one_call_per_sample() -> None:
    """The A/B worker's warm reply says what its blocks do: one flushed call per sample, not a calibrated count."""
    from reportgen.ab import worker
    from reportgen.scenario.loader import load_scenario

    state = worker._State(scenario=load_scenario("rmsnorm"), backend=_FlushingCpu())
    reply = worker._warm(state, {"shape": [2, 16], "dtype": "float32", "variants": ["naive"], "warmup": 1,
                                 "seed": 0})  # the worker's own message, as the coordinator sends it
    assert reply["variants"]["naive"]["status"] == "ok"
    assert reply["variants"]["naive"]["calls_per_sample"] == 1
