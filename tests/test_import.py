"""`reportgen import`: real traces, exact op tables, a TorchNeuron profile_output/ folder, bad inputs."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import REAL_TRACES_DIR, ROOT

from reportgen.cli import main
from reportgen.errors import TraceError
from reportgen.model.run import DeviceKind, RunSource, TimeBasis
from reportgen.store.layout import format_utc, trace_member
from reportgen.store.loader import load_run
from reportgen.traces import importer
from reportgen.traces.import_plan import plan_import, variant_name_for
from reportgen.traces.importer import ImportRequest, import_run
from reportgen.traces.optable import UNATTRIBUTED_ROW, build_op_table
from reportgen.traces.reader import read_trace_bytes

REAL_TRACES = sorted(REAL_TRACES_DIR.glob("*.json.gz"))
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
# Independent of reportgen.traces.reader's tables: the categories each figure is summed over, spelled out here.
HOST_OP_CATS = {"cpu_op", "user_annotation", "python_function"}
DEVICE_WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            total += 0.0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0.0 if cur_e is None else cur_e - cur_s)


def _import(path: Path, store: Path, **kw: str) -> Path:
    return import_run(ImportRequest(path, kw.get("label", ""), kw.get("device", "auto")), store, now=NOW)


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_real_trace_imports_and_totals_match_an_independent_sum(path: Path, tmp_path: Path) -> None:
    folder = _import(path, tmp_path / "store", label="prod step 1200")
    run = load_run(folder)
    assert run.source is RunSource.IMPORT and run.label == "prod step 1200"
    (v,) = run.variants
    raw = _raw(path)
    host = [e for e in raw if e.get("cat") in HOST_OP_CATS]
    work = [e for e in raw if e.get("cat") in DEVICE_WORK_CATS]
    rows = {r.name: r for r in v.ops if r.name != UNATTRIBUTED_ROW}
    assert {n: r.calls for n, r in rows.items()} == Counter(e["name"] for e in host)
    expected_total: dict[str, float] = defaultdict(float)
    for e in host:
        expected_total[e["name"]] += e["dur"]
    assert {n: r.total_cpu_us for n, r in rows.items()} == pytest.approx(dict(expected_total), rel=1e-9)
    # Properly nested ops: self times on a thread add up to the time the thread spent in any op.
    per_thread: dict[tuple, list] = defaultdict(list)
    for e in host:
        per_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    union = sum(_union_us(iv) for iv in per_thread.values())
    # (ts + dur at ~4e12 µs is exact only to ~0.5 ns per event, hence the absolute tolerance)
    assert sum(r.self_cpu_us for r in v.ops) == pytest.approx(union, rel=1e-9, abs=1e-3 * len(host))
    assert sum(r.self_device_us for r in v.ops) == pytest.approx(sum(e["dur"] for e in work), rel=1e-9, abs=1e-9)
    has_lane = any(e.get("cat") in DEVICE_WORK_CATS | {"gpu_user_annotation", "cuda_sync", "cuda_profiler_range"}
                   for e in raw)
    steps = sorted((e["ts"], e["dur"]) for e in host if e["name"].startswith("ProfilerStep#"))
    per_step = len(steps) or 1  # counts are per ProfilerStep when the trace has steps
    assert v.device_event_count == (round(len(work) / per_step) if has_lane else None)
    top_level_aten = [e for e in host if e["name"].startswith("aten::") and not any(
        o is not e and o["name"].startswith("aten::") and (o["pid"], o["tid"]) == (e["pid"], e["tid"])
        and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] and o["dur"] > e["dur"] for o in host)]
    assert v.aten_op_count == round(sum(1 for e in host if e["name"].startswith("aten::")) / per_step)
    assert v.op_dispatch_count == round(len(top_level_aten) / per_step)
    assert v.time_basis is (TimeBasis.DEVICE if work else TimeBasis.CPU)
    assert v.samples_us == tuple(d for _, d in steps) and v.profiled_steps == len(steps)
    copy = folder / v.trace_path
    assert gzip.decompress(copy.read_bytes()) == gzip.decompress(path.read_bytes())
    assert copy.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime 0: the same input gives the same bytes


def test_triton_kernel_is_attributed_through_its_launch() -> None:
    table = build_op_table(read_trace_bytes((REAL_TRACES_DIR / "triton_example.trace.json.gz").read_bytes(), "t"))
    rows = {r.name: r for r in table.rows}
    assert (rows["triton_poi_fused_add_cos_sin_0"].self_device_us, rows["Torch-Compiled Region: 0/0"].self_device_us,
            rows["Torch-Compiled Region: 0/0"].total_device_us) == (1.76, 0.0, 1.76)
    assert (table.device_work_count, table.unattributed_device_count, table.op_dispatch_count) == (1, 0, 0)


def _ev(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1, pid: int = 1, **args: int) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


SYNTHETIC = {"traceEvents": [
    _ev("ProfilerStep#3", 0, 100, cat="user_annotation"),
    _ev("aten::mul", 10, 20, **{"External id": 1}),
    _ev("aten::empty", 12, 3),
    _ev("cudaLaunchKernel", 16, 4, cat="cuda_runtime", correlation=500),
    _ev("aten::mul", 40, 10, **{"External id": 2}),
    _ev("aten::add", 60, 30, tid=2),
    _ev("ProfilerStep#4", 110, 50, cat="user_annotation"),
    _ev("mul_kernel", 25, 7, cat="kernel", pid=0, tid=7, correlation=500),
    _ev("mul_kernel", 55, 5, cat="kernel", pid=0, tid=7, **{"External id": 2}),
    _ev("Memcpy HtoD", 95, 2.5, cat="gpu_memcpy", pid=0, tid=7, correlation=999),
    _ev("ProfilerStep#3", 0, 100, cat="gpu_user_annotation", pid=0, tid=7),
]}


def test_synthetic_op_table_exact_numbers() -> None:
    table = build_op_table(read_trace_bytes(json.dumps(SYNTHETIC).encode(), "s"))
    rows = {r.name: (r.calls, r.self_cpu_us, r.total_cpu_us, r.self_device_us, r.total_device_us) for r in table.rows}
    assert rows == {
        "ProfilerStep#3": (1, 70.0, 100.0, 0.0, 12.0),  # children: mul 20 + mul 10; kernels under it 7 + 5
        "ProfilerStep#4": (1, 50.0, 50.0, 0.0, 0.0),
        "aten::mul": (2, 27.0, 30.0, 12.0, 12.0),  # empty (3) is its child; launch time stays in self
        "aten::empty": (1, 3.0, 3.0, 0.0, 0.0),
        "aten::add": (1, 30.0, 30.0, 0.0, 0.0),  # thread 2: not nested in thread 1's step
        UNATTRIBUTED_ROW: (1, 0.0, 0.0, 2.5, 2.5),  # correlation 999 has no launch
    }
    assert [r.name for r in table.rows][:2] == ["aten::mul", UNATTRIBUTED_ROW]
    assert (table.op_dispatch_count, table.device_work_count, table.device_work_us) == (3, 3, 14.5)
    assert table.step_durations_us == (100.0, 50.0)


def test_folder_of_rank_traces_becomes_one_variant_each(tmp_path: Path) -> None:
    src = tmp_path / "ranks"
    src.mkdir()
    data = json.dumps(SYNTHETIC).encode()
    (src / "rank0.pt.trace.json").write_bytes(data)
    (src / "rank0.pt.trace.json.gz").write_bytes(gzip.compress(data))
    (src / "rank 1 <b>.json").write_bytes(data)
    (src / "notes.txt").write_text("ignored")
    (src / ".hidden.json").write_text("ignored")
    run = load_run(_import(src, tmp_path / "store"))
    odd = variant_name_for(Path("rank 1 <b>.json"))
    assert odd.startswith("rank_1_b-") and len(odd) == len("rank_1_b-") + 8
    assert [v.name for v in run.variants] == [odd, "rank0", "rank0-2"]
    assert all(v.trace_path == f"traces/{v.name}.pt.trace.json.gz" for v in run.variants)
    assert run.device is DeviceKind.CUDA
    assert run.scenario.parameters == {"source": "ranks", "layout": "folder", "traces": "3"}


def test_trace_metadata_becomes_device_extras_and_notes(tmp_path: Path) -> None:
    trace = tmp_path / "cuda.json"
    trace.write_text(json.dumps({"traceEvents": [_ev("aten::mul", 0, 5)], "cuda_runtime_version": 12040}))
    cuda = load_run(_import(trace, tmp_path / "a"))
    assert cuda.environment.device_extras == {"cuda_version": "12.4"}
    amd = load_run(_import(REAL_TRACES_DIR / "amd_trace.trace.json.gz", tmp_path / "b"))
    assert amd.device is DeviceKind.ROCM and amd.environment.device_extras == {}
    assert "amd_trace: captured at 2024-12-31T08:06:00Z (the trace's baseTimeNanoseconds)" in amd.notes


def test_stored_paths_are_the_bundle_layout(tmp_path: Path) -> None:
    run = load_run(_import(REAL_TRACES_DIR / "cpu_only.trace.json.gz", tmp_path / "s"))
    (v,) = run.variants
    assert v.trace_path == trace_member(v.name) == "traces/cpu_only.pt.trace.json.gz"
    assert run.created_utc == format_utc(NOW) == "2026-11-30T12:00:00Z"


def test_variant_names_from_file_names() -> None:
    assert [variant_name_for(Path(n)) for n in ("a.pt.trace.json.gz", "b.json", "trace.json", "x.JSON.GZ")] == [
        "a", "b", "trace", "x"]
    assert variant_name_for(Path("../evil name.json")).startswith("evil_name-")


def _neuron_profile_output(root: Path) -> Path:
    """A folder laid out as the Neuron SDK documents profile_output/ (not a captured Trainium run).

    trace.json is documented as a framework-level trace only: no device events. The one runtime
    event uses ``privateuse1_driver``, the category a third-party parser reports (runtime, not device work).
    """
    ts_dir = root / "profile_output" / "i-0abc123_pid_4242" / "20261130_120000"
    ts_dir.mkdir(parents=True)
    events = [
        _ev("ProfilerStep#0", 0, 500, cat="user_annotation"),
        _ev("aten::_fused_rms_norm", 10, 400, **{"External id": 1}),
        _ev("nrt_execute", 20, 380, cat="privateuse1_driver", correlation=7),
    ]
    (ts_dir / "trace.json").write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    for name, size in (("neff_1a2b_vnc_0.neff", 300), ("profile_nc_0_session_0.ntff", 700), ("ntrace.pb", 11),
                       ("trace_info.pb", 12), ("cpu_util.pb", 13), ("host_mem.pb", 14)):
        (ts_dir / name).write_bytes(bytes(size))
    return root / "profile_output"


def test_neuron_profile_output_without_neuron_explorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer.shutil, "which", lambda name: None)
    run = load_run(folder := _import(_neuron_profile_output(tmp_path), tmp_path / "store"))
    (v,) = run.variants
    assert v.name == "i-0abc123_pid_4242-20261130_120000"
    assert run.device is DeviceKind.NEURON
    assert v.time_basis is TimeBasis.CPU and v.device_event_count is None  # privateuse1_driver is runtime
    assert [(a.path.split("/")[-1], a.kind, a.size_bytes) for a in v.artifacts] == [
        ("cpu_util.pb", "pb", 13), ("host_mem.pb", "pb", 14), ("neff_1a2b_vnc_0.neff", "neff", 300),
        ("ntrace.pb", "pb", 11), ("profile_nc_0_session_0.ntff", "ntff", 700), ("trace_info.pb", "pb", 12)]
    assert all((folder / a.path).stat().st_size == a.size_bytes for a in v.artifacts)
    rows = {r.name: r for r in v.ops}
    assert rows["aten::_fused_rms_norm"].self_device_us == 0.0 and v.op_dispatch_count == 1
    assert v.device_evidence is not None and v.device_evidence.summary == {}
    assert v.device_evidence.timing_source.startswith(
        "per-step times: the ProfilerStep durations on the host clock only; no device time (neuron-explorer is "
        "not installed")
    assert any("neuron-explorer is not installed" in n for n in run.notes)
    assert any("Neuron files kept as artifacts" in n for n in run.notes)
    assert run.scenario.parameters["layout"] == "neuron-profile-output"
    assert ("device is neuron: the folder has the TorchNeuron profile_output/ (*_pid_*/*/trace.json) layout"
            in run.notes)


def test_neuron_profile_output_with_neuron_explorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stand_ins import fake_tools

    bin_dir = tmp_path / "bin"
    summary = {"summary": [{"total_time": 0.0004033, "hbm_read_bytes": 4194304, "hbm_write_bytes": 4194304,
                            "mbu_estimated_percent": 7.2}]}
    fake_tools.install_neuron_explorer(bin_dir, {"i-0abc123_pid_4242": {
        "summary_json": summary, "events": {"nc_exec_running": 1, "nrt_model_submit": 1}}})
    monkeypatch.setenv("PATH", fake_tools.path_with(bin_dir))
    run = load_run(folder := _import(_neuron_profile_output(tmp_path), tmp_path / "store"))
    (v,) = run.variants
    session = tmp_path / "profile_output" / "i-0abc123_pid_4242" / "20261130_120000"
    assert [c[:5] for c in fake_tools.explorer_calls(bin_dir)] == [  # Parquet first: this stand-in gives none
        ["view", "-d", str(session), "--output-format", "parquet"],
        ["view", "-d", str(session), "--output-format", "summary-json"],
        ["view", "-d", str(session), "--output-format", "json"]]
    art = next(a for a in v.artifacts if a.path.endswith("neuron-explorer-summary.json"))
    assert art.kind == "neuron-explorer" and json.loads((folder / art.path).read_text()) == summary
    ev = v.device_evidence
    assert ev is not None and ev.profiled_steps == 1
    assert ev.summary == {"total_time": 0.0004033, "hbm_read_bytes": 4194304.0, "hbm_write_bytes": 4194304.0,
                          "mbu_estimated_percent": 7.2}
    assert ev.counters_per_step["nc_exec_running"] == 1.0
    assert "dmem_buf_copyout" not in ev.counters_per_step  # the legacy json holds none: not known, never zero
    assert "device time: the NTFF via neuron-explorer (total_time 0.0004033 s over 1 profiled step(s)" \
        in ev.timing_source
    assert (f"{v.name}: device summary from neuron-explorer summary-json (absent: mbu_min_read_util_percent, "
            "dma_transfer_count, spill_save_bytes, spill_reload_bytes)") in run.notes


def test_device_override_and_no_device_lane(tmp_path: Path) -> None:
    run = load_run(_import(REAL_TRACES_DIR / "cpu_only.trace.json.gz", tmp_path / "s", device="neuron"))
    (v,) = run.variants
    assert run.device is DeviceKind.NEURON and "device set by --device neuron" in run.notes
    assert v.time_basis is TimeBasis.CPU and v.device_event_count is None
    assert "the trace has no device lane: device time is not measured" in v.description
    assert "cpu_only: no device lane in the trace; device time is not shown as data" in run.notes


def test_cli_prints_the_run_and_build_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    code = main(["import", str(REAL_TRACES_DIR / "amd_trace.trace.json.gz"), "--label", "prod step 1200",
                 "--store", str(store)])
    out = capsys.readouterr().out.splitlines()
    (run_dir,) = [p for p in store.iterdir() if not p.name.startswith(".")]
    assert code == 0 and out == [f"imported run {run_dir.name}", str(run_dir)]
    assert run_dir.name.split("-")[1:5] == ["rocm", "prod", "step", "1200"]


BAD = {
    "truncated.json.gz": gzip.compress(json.dumps(SYNTHETIC).encode())[:60],
    "invalid.json": b'{"traceEvents": [}',
    "notatrace.json": b'{"hello": "world"}',
    "negative.json": json.dumps({"traceEvents": [_ev("a", 1, -1)]}).encode(),
    "unclosed.json": b'{"traceEvents": [{"ph": "B", "name": "a", "ts": 1, "pid": 1, "tid": 1}]}',
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_adds_nothing_to_the_store(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    _import(REAL_TRACES_DIR / "cpu_only.trace.json.gz", store)
    before = sorted(p.name for p in store.iterdir())
    bad = tmp_path / name
    bad.write_bytes(BAD[name])
    assert main(["import", str(bad), "--store", str(store)]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"reportgen: error: {bad}: ") and err.count("\n") == 1
    assert sorted(p.name for p in store.iterdir()) == before


def test_one_bad_file_in_a_folder_fails_the_whole_import(tmp_path: Path) -> None:
    src = tmp_path / "ranks"
    src.mkdir()
    (src / "rank0.json").write_text(json.dumps(SYNTHETIC))
    (src / "rank1.json").write_bytes(BAD["unclosed.json"])
    store = tmp_path / "new-store"
    with pytest.raises(TraceError, match=r"rank1\.json: 'B' event 'a' at ts 1\.0 on pid 1 tid 1 is never closed"):
        _import(src, store)
    assert not store.exists()


def test_gzip_bomb_limit_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * 3_000_000 + b"]}"))
    monkeypatch.setenv("REPORTGEN_MAX_TRACE_BYTES", "1000000")
    assert main(["import", str(bomb), "--store", str(tmp_path / "store")]) == 3
    assert capsys.readouterr().err == (f"reportgen: error: {bomb}: expands past 1000000 bytes uncompressed; refusing "
                                       "it (raise the limit with REPORTGEN_MAX_TRACE_BYTES if the trace is genuine)\n")
    assert not (tmp_path / "store").exists()


def test_missing_path_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope: no such file or folder; pass a trace"):
        plan_import(tmp_path / "nope")
    with pytest.raises(TraceError, match=r": no trace files \(\*\.json, \*\.json\.gz\) and no TorchNeuron "):
        plan_import(tmp_path)


def test_a_trace_without_events_is_imported_with_an_empty_table(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"traceEvents": []}')
    run = load_run(_import(path, tmp_path / "s"))
    assert run.variants[0].ops == () and run.device is DeviceKind.CPU


def test_benchmark_trace_generator_makes_a_valid_linked_trace(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_trace_bench", ROOT / "benchmarks" / "import_trace.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tmp_path / "b.json"
    count = bench.generate_trace(path, 100_000)
    assert len(json.loads(path.read_text())["traceEvents"]) == count
    assert path.stat().st_size >= 100_000
    table = build_op_table(read_trace_bytes(path.read_bytes(), "b"))
    assert table.unattributed_device_count == 0 and table.device_work_count == table.op_dispatch_count


@pytest.mark.parametrize(("label", "message"), [
    ("a\x1b[31mred", "--label: contains control characters; use printable text"),
    ("line\nbreak", "--label: contains control characters; use printable text"),
    ("c1\x85x", "--label: contains control characters; use printable text"),
    ("x" * 201, "--label: 201 characters; keep it under 200"),
])
def test_import_label_is_validated_like_profile(tmp_path: Path, label: str, message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from reportgen.cli import main

    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    assert main(["import", str(trace), "--label", label, "--store", str(tmp_path / "store")]) == 2
    assert capsys.readouterr().err == f"reportgen: error: {message}\n"
    assert not (tmp_path / "store").exists()
