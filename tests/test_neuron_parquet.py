"""neuron-explorer's Parquet as the device truth, against fixtures written from the schema reference.

The fixtures (tests/data/neuron/parquet/, README there) carry the documented table and field names
and types of profile schema 7.4.0; their values are made up so the expected figures are exact. The
fake explorer copies them into the ``--output-file`` folder, one file per table, as the SDK says the
real one writes them. Nothing here has seen a real NTFF or a real Parquet export.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from stand_ins import fake_tools

from reportgen.devices.neuron import explorer, parquet
from reportgen.model.run import DeviceEvidence

needs_pyarrow = pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                                   reason="the Parquet reader needs pyarrow (the test extra installs it)")

STEPS = 3
FIXTURES = fake_tools.PARQUET_FIXTURES
HBM_STACK = 725e9
SCHEMA_8_REFUSAL = ("neuron-explorer profile schema 8.0.0 is not one reportgen reads (major version 7, documented "
                    "7.4.0): no device summary; use a neuron-explorer of schema 7.x or a reportgen that reads 8.0.0")


def _session(root: Path, variant: str) -> Path:
    session = root / variant / "i-0abc_pid_1" / "20261130_000000"
    session.mkdir(parents=True)
    for name in ("neff_a1_vnc_0.neff", "profile_nc_0_session_0.ntff", "trace.json"):
        (session / name).write_bytes(b"x")
    return session


def _fallback() -> dict[str, object]:
    """summary-json and json as the explorer prints them where Parquet gives nothing (one record, some events)."""
    record = {"total_time": 0.002, "hbm_read_bytes": 300, "hbm_write_bytes": 100, "mbu_estimated_percent": 0.5}
    return {"summary_json": fake_tools.keyed_by_node(record), "events": {"nc_exec_running": 3}}


@pytest.fixture()
def tool(tmp_path: Path) -> Path:
    """The fake explorer: naive, fused and compiled write their Parquet; schema8 a newer schema; legacy none."""
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_explorer(bin_dir, {
        "naive": {"parquet": "naive", **_fallback()}, "fused": {"parquet": "fused", **_fallback()},
        "compiled": {"parquet": "compiled", **_fallback()}, "schema8": {"parquet": "schema8", **_fallback()},
        "legacy": _fallback()})
    return bin_dir


def _explore(tmp_path: Path, tool: Path, variant: str) -> explorer.Exploration:
    session = _session(tmp_path / "work", variant)
    return explorer.explore(session, STEPS, tmp_path / "scratch" / variant, which=lambda n: str(tool / n))


@needs_pyarrow
def test_every_execution_of_every_neff_counts_toward_its_variant(tmp_path: Path, tool: Path) -> None:
    """Naive eager: 3 NEFFs x 3 steps in ExecutionInfo (split over two files): 9 executions, 250 µs per call."""
    found = _explore(tmp_path, tool, "naive")
    assert found.summary["execution_count"] == 9.0 and found.summary["neff_count"] == 3.0
    assert found.summary["execution_time"] == pytest.approx(750e-6, abs=1e-15)  # (120 + 40 + 90) µs x 3
    evidence = found.evidence("source")
    assert evidence.programs_per_call() == 3.0
    assert evidence.device_time_field() == "execution_time"
    assert evidence.device_time_us_per_step() == pytest.approx(250.0)
    assert ("executions per NEFF: neff_a1_vnc_0.neff ×3 360 µs, neff_c3_vnc_0.neff ×3 270 µs, "
            "neff_b2_vnc_0.neff ×3 120 µs") in found.notes
    assert "(execution_time 0.00075 s over 3 profiled step(s), the sum of 9 executions' spans in ExecutionInfo, " \
           "idle gaps between executions excluded)" in explorer.timing_source(found, None)


@needs_pyarrow
def test_programs_per_call_tell_naive_from_fused_and_compiled(tmp_path: Path, tool: Path) -> None:
    per_call = {v: _explore(tmp_path, tool, v).evidence("s") for v in ("naive", "fused", "compiled")}
    assert {v: e.programs_per_call() for v, e in per_call.items()} == {"naive": 3.0, "fused": 1.0, "compiled": 1.0}
    assert per_call["fused"].device_time_us_per_step() == pytest.approx(45.0)
    assert per_call["compiled"].device_time_us_per_step() == pytest.approx(42.0)
    assert per_call["fused"].summary["neff_count"] == 1.0


@needs_pyarrow
def test_utilisation_fields_stay_ratios(tmp_path: Path, tool: Path) -> None:
    """*_percent fields hold ratios: 0.125 stays 0.125 (12.5 %), never 12.5; MBU is bytes / total_time / one stack."""
    s = _explore(tmp_path, tool, "naive").summary
    assert s["vector_engine_active_time_percent"] == 0.125 and s["scalar_engine_active_time_percent"] == 0.0625
    assert s["sync_engine_active_time_percent"] == 0.25 and s["tensor_engine_active_time_percent"] == 0.0
    assert s["mfu_estimated_percent"] == 0.0 and s["hfu_estimated_percent"] == 0.0
    moved = 37_748_736 + 25_165_824
    assert (s["hbm_read_bytes"], s["hbm_write_bytes"]) == (37_748_736.0, 25_165_824.0)
    assert s["mbu_estimated_percent"] == pytest.approx(moved / 0.00227 / HBM_STACK, rel=1e-6)
    assert s["hbm_ddr_bandwidth"] == pytest.approx(HBM_STACK, rel=1e-6)  # Metadata: one HBM stack, bytes/s
    assert s["peak_flops_bandwidth_ratio"] == pytest.approx(79e12 / HBM_STACK, rel=1e-6)  # the tool's own ridge
    assert s["total_time"] == pytest.approx(0.00227, rel=1e-6) and s["total_active_time"] == pytest.approx(0.0007)
    evidence = _explore(tmp_path / "again", tool, "naive").evidence("s")
    assert evidence.hbm_bytes_per_step() == moved / 3  # the measured-traffic roofline's bytes
    assert evidence.floor_us(s["hbm_ddr_bandwidth"]) == pytest.approx(moved / 3 / HBM_STACK * 1e6, rel=1e-6)


@needs_pyarrow
def test_system_trace_counters_come_from_system_profile_events(tmp_path: Path, tool: Path) -> None:
    """NeuronCore 0's events only: the other core's and the framework's (no nc_idx) are not counted."""
    found = _explore(tmp_path, tool, "naive")
    assert found.counters == {"nc_exec_running": 3.0, "nrt_model_submit": 0.0, "dmem_buf_copyin": 0.0,
                              "dmem_buf_copyout": 0.0, "nc_model_switch": 0.0, "nrt_model_switch": 0.0,
                              "system_trace_events": 6.0, "executions": 3.0}
    assert "system-trace counters from 18 events of NeuronCore 0 in the SystemProfileEvents" in found.notes


@needs_pyarrow
def test_one_documented_call_writes_parquet_and_its_tables_are_kept(tmp_path: Path, tool: Path) -> None:
    found = _explore(tmp_path, tool, "naive")
    session = tmp_path / "work" / "naive" / "i-0abc_pid_1" / "20261130_000000"
    out = tmp_path / "scratch" / "naive" / explorer.PARQUET_DIR
    assert fake_tools.explorer_calls(tool) == [["view", "-d", str(session), "--output-format", "parquet",
                                                "--output-file", str(out)]]
    assert found.tool == ("neuron-explorer view -d i-0abc_pid_1/20261130_000000 --output-format parquet "
                          "--output-file neuron-explorer-parquet")
    assert sorted(found.raw) == [f"{explorer.PARQUET_DIR}-{name}.parquet" for name in (
        "ExecutionInfo_0", "ExecutionInfo_1", "Metadata", "Summary", "SystemProfileEvents")]
    assert found.raw[f"{explorer.PARQUET_DIR}-Summary.parquet"] == (FIXTURES / "naive" / "Summary.parquet").read_bytes()


@needs_pyarrow
def test_schema_version_is_recorded(tmp_path: Path, tool: Path) -> None:
    found = _explore(tmp_path, tool, "fused")
    assert found.notes[0] == ("device summary from neuron-explorer's Parquet (profile schema 7.4.0): 1 Summary row(s), "
                              "3 execution(s) in ExecutionInfo")
    assert ("profile metadata: instance_type trn2.3xlarge, explorer_version 2.31.0, runtime_version 2.29.40, "
            "compiler_version 2.22.12471.0, driver_version 2.25.4") in found.notes
    assert parquet.read_profile(FIXTURES / "fused").schema_version == "7.4.0"


@needs_pyarrow
def test_unknown_major_schema_is_refused_in_one_line(tmp_path: Path, tool: Path) -> None:
    """Schema 8.0.0 (a MAJOR change renames or removes fields): no figure read from it, one line says why,
    and the summary-json fallback is used instead."""
    read = parquet.read_profile(FIXTURES / "schema8")
    assert (read.figures, read.schema_version, read.notes) == ({}, "8.0.0", (SCHEMA_8_REFUSAL,))
    found = _explore(tmp_path, tool, "schema8")
    assert "execution_count" not in found.summary and found.summary["total_time"] == 0.002  # summary-json's
    assert found.notes[-1] == f"summary-json used because Parquet gave no device figures: {SCHEMA_8_REFUSAL}"
    assert "\n" not in found.notes[-1]


def test_without_pyarrow_summary_json_is_the_fallback(tmp_path: Path, tool: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    found = _explore(tmp_path, tool, "naive")
    assert [c[4] for c in fake_tools.explorer_calls(tool)] == ["summary-json", "json"]  # no Parquet call at all
    assert found.summary == {"total_time": 0.002, "hbm_read_bytes": 300.0, "hbm_write_bytes": 100.0,
                             "mbu_estimated_percent": 0.5}
    assert found.notes[-1] == ("summary-json used because Parquet gave no device figures: pyarrow is not installed, "
                               "so neuron-explorer's Parquet is not read (pip install \"reportgen[neuron]\")")
    assert found.evidence("s").programs_per_call() is None


@needs_pyarrow
def test_an_explorer_without_parquet_falls_back(tmp_path: Path, tool: Path) -> None:
    found = _explore(tmp_path, tool, "legacy")
    assert [c[4] for c in fake_tools.explorer_calls(tool)] == ["parquet", "summary-json", "json"]
    assert found.summary["total_time"] == 0.002 and found.counters["nc_exec_running"] == 1.0
    assert found.notes[-1].startswith("summary-json used because Parquet gave no device figures: neuron-explorer "
                                      "failed (exit 2: fake neuron-explorer: no Parquet output")


@needs_pyarrow
@pytest.mark.parametrize(("tables", "note"), [
    ({}, "neuron-explorer wrote no Parquet table reportgen reads (Metadata, Summary, ExecutionInfo, "
         "SystemProfileEvents)"),
    ({"Summary.parquet": b"PAR1 not really parquet"}, "neuron-explorer's Parquet could not be read ("),
])
def test_an_empty_or_damaged_parquet_folder_is_a_note(tmp_path: Path, tables: dict[str, bytes], note: str) -> None:
    for name, data in tables.items():
        (tmp_path / name).write_bytes(data)
    read = parquet.read_profile(tmp_path)
    assert read.figures == {} and len(read.notes) == 1 and read.notes[0].startswith(note)


@needs_pyarrow
def test_a_profile_without_its_schema_version_is_not_read(tmp_path: Path) -> None:
    for name in ("Summary.parquet", "ExecutionInfo.parquet"):
        (tmp_path / name).write_bytes((FIXTURES / "fused" / name).read_bytes())
    read = parquet.read_profile(tmp_path)
    assert read.figures == {} and read.notes == (
        "neuron-explorer's Parquet has no Metadata.profile_schema_version: its schema is unknown, so it is not read",)


def test_executions_without_timestamps_count_but_give_no_time() -> None:
    """Pre-v6 NTFF profiles have no execution timeline (ExecutionInfo: start/end nil): counted, not timed."""
    rows = {"Metadata": [{"profile_schema_version": "7.4.0"}],
            "ExecutionInfo": [{"execution_index": 0, "neff_name": "a.neff", "execution_start_ts": None,
                               "execution_end_ts": None},
                              {"execution_index": 1, "neff_name": "a.neff", "execution_start_ts": 0,
                               "execution_end_ts": 5}]}
    read = parquet.interpret(rows)
    assert read.figures == {"execution_count": 2.0, "neff_count": 1.0}
    assert "1 execution(s) without start/end (pre-v6 NTFF): no execution time" in read.notes
    assert DeviceEvidence("s", summary=read.figures).device_time_field() is None


def _eager_profile_output(root: Path) -> Path:
    """A TorchNeuron profile_output/ of a naive eager capture: 3 profiled steps of 3 ops, one NEFF per op."""
    session = root / "profile_output" / "i-0abc123_pid_4242" / "20261130_120000"
    session.mkdir(parents=True)
    events = []
    for step in range(STEPS):
        t0 = step * 1000
        events.append({"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation", "ts": t0, "dur": 900,
                       "pid": 1, "tid": 1, "args": {}})
        for i in range(3):
            events.append({"ph": "X", "name": "aten::mul", "cat": "cpu_op", "ts": t0 + 10 + 250 * i, "dur": 200,
                           "pid": 1, "tid": 1, "args": {"External id": step * 3 + i + 1}})
    (session / "trace.json").write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    for name in ("neff_a1_vnc_0.neff", "neff_b2_vnc_0.neff", "neff_c3_vnc_0.neff", "profile_nc_0_session_0.ntff",
                 "ntrace.pb", "trace_info.pb"):
        (session / name).write_bytes(b"x")
    return root / "profile_output"


@needs_pyarrow
def test_an_eager_import_reads_the_parquet_and_the_page_shows_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Import of an eager capture (several NEFFs): programs per call, device time and ratios on the page."""
    from datetime import datetime, timezone

    from reportgen.site.build import build_site
    from reportgen.store.loader import load_run
    from reportgen.traces.importer import ImportRequest, import_run

    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_explorer(bin_dir, {"i-0abc123_pid_4242": {"parquet": "naive", **_fallback()}})
    monkeypatch.setenv("PATH", fake_tools.path_with(bin_dir))
    store = tmp_path / "store"
    folder = import_run(ImportRequest(_eager_profile_output(tmp_path), "", "auto"), store,
                        now=datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc))
    run = load_run(folder)
    (v,) = run.variants
    ev = v.device_evidence
    assert ev is not None and ev.profiled_steps == STEPS and ev.programs_per_call() == 3.0
    assert ev.device_time_us_per_step() == pytest.approx(250.0)
    assert ev.summary["vector_engine_active_time_percent"] == 0.125
    assert "device summary from neuron-explorer's Parquet (profile schema 7.4.0)" in ev.notes[0]
    kept = sorted(a.path.rsplit("/", 1)[-1] for a in v.artifacts if a.kind == "neuron-explorer")
    assert kept == [f"{explorer.PARQUET_DIR}-{n}.parquet" for n in (
        "ExecutionInfo_0", "ExecutionInfo_1", "Metadata", "Summary", "SystemProfileEvents")]
    build_site(store, tmp_path / "site", "/", jobs=1)
    html = (tmp_path / "site" / "runs" / run.run_id / "index.html").read_text()
    md = (tmp_path / "site" / "runs" / run.run_id / "report.md").read_text()
    mbu = f"{(37_748_736 + 25_165_824) / 0.00227 / HBM_STACK * 100:.1f} %"
    assert (f'<tr><td class="text name">{v.name}</td><td>3</td><td>3</td>\n<td>250.0</td>\n'
            f"<td>0.0 %</td><td>0.0 %</td><td>{mbu}</td>") in html
    assert "vector 12.5 %" in html and "ridge (FLOP/byte)" in html and "<td>109</td>" in html
    assert f"| 3 | 3 | 250.0 | 0.0 % | 0.0 % | {mbu} |" in md


def test_the_base_install_never_imports_pyarrow() -> None:
    """pyarrow is imported only by the Parquet reader, when it reads: the CLI and the neuron backend load without it."""
    import subprocess

    code = ("import sys; import reportgen.cli, reportgen.devices.neuron.device, reportgen.devices.neuron.parquet; "
            "print('pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_eager_import_without_parquet_reads_every_summary_json_record(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback: no Parquet, a log line before a summary keyed by node with one record per NEFF: the import works,
    every record counts, and a ratio of 0.96 reads 96.0 % on the page."""
    from datetime import datetime, timezone

    from reportgen.site.build import build_site
    from reportgen.store.loader import load_run
    from reportgen.traces.importer import ImportRequest, import_run

    records = [fake_tools.summary_record(t, 1000, 500, vector_engine_active_time_percent=0.96)
               for t in (0.0003, 0.0001, 0.0002)]
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_explorer(bin_dir, {"i-0abc123_pid_4242": {
        "summary_json": fake_tools.keyed_by_node(*records), "events": {"nc_exec_running": 9},
        "log_lines": ['time="2026-11-30T00:00:00Z" level=info msg="Processing NTFF"']}})
    monkeypatch.setenv("PATH", fake_tools.path_with(bin_dir))
    store = tmp_path / "store"
    folder = import_run(ImportRequest(_eager_profile_output(tmp_path), "", "auto"), store,
                        now=datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc))
    run = load_run(folder)
    (v,) = run.variants
    ev = v.device_evidence
    assert ev is not None and ev.summary["total_time"] == pytest.approx(0.0006)
    assert ev.summary["hbm_read_bytes"] == 3000.0 and ev.summary["vector_engine_active_time_percent"] == 0.96
    assert ev.counters_per_step["nc_exec_running"] == 3.0 and ev.programs_per_call() is None
    assert ev.notes[0].startswith("device summary from neuron-explorer summary-json: 3 records summed")
    assert "skipped 1 line(s) printed before the JSON (log lines)" in ev.notes
    build_site(store, tmp_path / "site", "/", jobs=1)
    html = (tmp_path / "site" / "runs" / run.run_id / "index.html").read_text()
    assert "vector 96.0 %" in html and "Device programs and utilisation" not in html
