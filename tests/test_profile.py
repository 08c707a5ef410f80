"""``reportgen profile`` on the real CPU: bundles from actual torch profiles, not hand-written numbers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import run_cli

from reportgen.model.run import DeviceKind, RunSource, TimeBasis, VariantStatus
from reportgen.store.loader import load_store


@pytest.fixture(scope="module")
def real_runs(real_cpu_store: Path):  # type: ignore[no-untyped-def]
    return load_store(real_cpu_store)


def test_real_profile_stores_all_three_variants(real_runs) -> None:  # type: ignore[no-untyped-def]
    assert [r.label for r in real_runs] == ["base", "head"]
    run = real_runs[0]
    assert run.source is RunSource.PROFILE and run.device is DeviceKind.CPU
    assert run.scenario.parameters == {"shape": "4,256", "dtype": "float32", "seed": "0"}
    assert [v.name for v in run.variants] == ["naive", "fused", "compiled"]
    for v in run.variants:
        assert v.status is VariantStatus.OK, v.error
        assert v.correctness is not None and v.correctness.passed
        assert v.correctness.max_abs_error is not None and v.correctness.max_abs_error < 1e-5
        assert len(v.samples_us) == 8 and all(s > 0 for s in v.samples_us)
        assert v.time_basis is TimeBasis.CPU and v.profiled_steps == 3
        assert v.bytes_per_call == (2 * 4 * 256 + 256) * 4
        assert v.first_call_us is not None and v.compile_time_us is not None


def test_naive_table_has_three_muls_per_call(real_runs) -> None:  # type: ignore[no-untyped-def]
    naive = real_runs[0].variant("naive")
    rows = {r.name: r for r in naive.ops}
    assert rows["aten::mul"].calls == 3 * naive.profiled_steps
    assert {"aten::mean", "aten::add", "aten::rsqrt"} <= set(rows)
    assert all(r.self_cpu_us <= r.total_cpu_us + 1e-6 for r in naive.ops)


def test_fused_and_compiled_tables_show_their_mechanism(real_runs) -> None:  # type: ignore[no-untyped-def]
    run = real_runs[0]
    fused_names = {r.name for r in run.variant("fused").ops}
    assert "aten::rms_norm" in fused_names or "aten::_fused_rms_norm" in fused_names
    compiled_names = [r.name for r in run.variant("compiled").ops]
    assert any(n.startswith("Torch-Compiled Region") for n in compiled_names), compiled_names
    naive, fused, compiled = run.variants
    assert (naive.op_dispatch_count, fused.op_dispatch_count, compiled.op_dispatch_count) == (6, 1, 0)
    assert naive.aten_op_count > 6  # mean dispatches sum/div_ inside it
    assert fused.aten_op_count > 1  # on the CPU, rms_norm is a composite of eager ops: the report shows it
    assert compiled.aten_op_count == 0 and compiled.device_event_count is None


def test_bundle_holds_compressed_chrome_traces(real_cpu_store: Path, real_runs) -> None:  # type: ignore[no-untyped-def]
    run = real_runs[0]
    for v in run.variants:
        assert v.trace_path == f"traces/{v.name}.pt.trace.json.gz"
        data = json.loads(gzip.decompress((real_cpu_store / run.run_id / v.trace_path).read_bytes()))
        names = {e.get("name", "") for e in data["traceEvents"]}
        assert any(n.startswith("ProfilerStep#") for n in names)


def test_environment_and_peak_are_recorded(real_runs) -> None:  # type: ignore[no-untyped-def]
    run = real_runs[0]
    env = run.environment
    assert env.torch_version and env.torch_version.startswith("2.") and env.torch_threads and env.cpu_count
    assert run.peak.bandwidth_bytes_per_s and run.peak.bandwidth_bytes_per_s > 1e8
    assert "measured at profile time" in run.peak.source
    assert run.settings is not None and run.settings.samples == 8


def test_runs_lists_both(real_cpu_store: Path, real_runs) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("runs", "--store", str(real_cpu_store))
    assert proc.returncode == 0
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split("\t") == ["run_id", "time_utc", "device", "machine", "scenario", "label", "variants",
                                    "status"]
    assert [ln.split("\t")[3:6] for ln in lines[1:]] == [["-", "rmsnorm", "base"], ["-", "rmsnorm", "head"]]
    assert all(ln.endswith("\tnaive,fused,compiled\tok") for ln in lines[1:])


def test_profiler_step_annotations_are_not_op_rows(real_runs) -> None:  # type: ignore[no-untyped-def]
    for v in real_runs[0].variants:
        assert not [r.name for r in v.ops if r.name.startswith("ProfilerStep")]
