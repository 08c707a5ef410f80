"""neuron-explorer reading: summary-json as real scripts read it, against a fake that prints real counter names.

The fake executable checks its argv against the documented form (``view -d <session>
--output-format parquet|summary-json|json``) and, configured without Parquet, fails it, so these
tests read the summary-json fallback (the Parquet reader: tests/test_neuron_parquet.py); its
summary-json records carry the counter names and values
of a real inf2 summary (tests/data/neuron/), keyed by node, one per NEFF for an eager capture,
sometimes after log lines. The system-trace records carry the documented SystemProfileEvents
names (not checked against a real export). Nothing here has seen a real NTFF.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from stand_ins import fake_tools

from reportgen.devices.neuron import explorer
from reportgen.devices.neuron.summary import load_json, parse_summary

STEPS = 3
LOG_LINE = 'time="2026-11-30T00:00:00Z" level=info msg="Processing NTFF" file=profile_nc_0_session_0.ntff'


def _session(root: Path, variant: str = "v") -> Path:
    session = root / variant / "i-0abc_pid_1" / "20261130_000000"
    session.mkdir(parents=True)
    for name in ("neff_a_vnc_0.neff", "neff_b_vnc_0.neff", "profile_nc_0_session_0.ntff", "trace.json"):
        (session / name).write_bytes(b"x")
    return session


def _spec(summary_json: object, **extra: object) -> dict[str, object]:
    return {"summary_json": summary_json, "events": {"nc_exec_running": 6, "nrt_model_submit": 3, "other": 2},
            **extra}


def test_summary_and_counters_from_files_the_tool_writes(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    record = fake_tools.summary_record(0.003, 1000, 500, mbu_estimated_percent=0.025, dma_transfer_count=9,
                                       tensor_engine_active_time_percent=0.5, tensor_engine_instruction_count=4)
    fake_tools.install_neuron_explorer(bin_dir, {"v": _spec(fake_tools.keyed_by_node(record), summary_to="file")})
    session = _session(tmp_path / "work")
    found = explorer.explore(session, STEPS, tmp_path / "scratch", which=lambda n: str(bin_dir / n))
    real = fake_tools.real_counters()
    scale = 0.003 / float(real["total_time"])
    assert found.summary == pytest.approx({
        "total_time": 0.003, "hbm_read_bytes": 1000.0, "hbm_write_bytes": 500.0, "mbu_estimated_percent": 0.025,
        "mbu_min_read_util_percent": real["mbu_min_read_util_percent"], "dma_transfer_count": 9.0,
        "spill_save_bytes": 0.0, "spill_reload_bytes": 0.0, "total_active_time": float(real["total_active_time"]) * scale,
        "total_active_time_percent": real["total_active_time_percent"],
        "mfu_estimated_percent": real["mfu_estimated_percent"], "hfu_estimated_percent": real["hfu_estimated_percent"],
        "model_flops": 67108864.0, "hardware_flops": 136380416.0, "tensor_engine_active_time_percent": 0.5,
        "tensor_engine_instruction_count": 4.0, "tensor_engine_active_time": float(real["tensor_engine_active_time"]) * scale,
        "scalar_engine_instruction_count": 57.0, "scalar_engine_active_time_percent": real["scalar_engine_active_time_percent"],
        "vector_engine_instruction_count": 53.0, "vector_engine_active_time_percent": real["vector_engine_active_time_percent"],
        "gpsimd_engine_instruction_count": 27.0, "gpsimd_engine_active_time_percent": real["gpsimd_engine_active_time_percent"],
        "sync_engine_instruction_count": 37.0, "sync_engine_active_time_percent": real["sync_engine_active_time_percent"]})
    assert found.notes[:2] == ("device summary from neuron-explorer summary-json",
                               "versions reported: profiler_version 2.28.23.0, runtime_version 2.30.51, "
                               "compiler_version 2.23.6484.0, driver_version 2.26.0")
    assert found.notes[-1].startswith("summary-json used because Parquet gave no device figures: neuron-explorer "
                                      "failed (exit 2: fake neuron-explorer: no Parquet output for this session")
    # 11 events of NeuronCore 0 (the fake adds one of NeuronCore 1 and a framework event of no core, which are
    # not counted), over 3 steps; names the legacy json does not hold are not known, not zero
    assert found.counters == {"nc_exec_running": 2.0, "nrt_model_submit": 1.0, "system_trace_events": 11 / 3}
    assert sorted(found.raw) == [explorer.SUMMARY_FILE, explorer.SYSTEM_FILE]
    assert json.loads(found.raw[explorer.SUMMARY_FILE]) == {fake_tools.NODE: record}
    calls = fake_tools.explorer_calls(bin_dir)
    assert calls == [
        ["view", "-d", str(session), "--output-format", "parquet", "--output-file",
         str(tmp_path / "scratch" / explorer.PARQUET_DIR)],
        ["view", "-d", str(session), "--output-format", "summary-json", "--output-file",
         str(tmp_path / "scratch" / explorer.SUMMARY_FILE)],
        ["view", "-d", str(session), "--output-format", "json", "--output-file",
         str(tmp_path / "scratch" / explorer.LEGACY_DIR / explorer.LEGACY_SYSTEM), "--ignore-device-profile"]]
    assert found.tool.startswith("neuron-explorer view -d i-0abc_pid_1/20261130_000000 --output-format summary-json")
    evidence = found.evidence("source")
    assert evidence.hbm_bytes_per_step() == 500.0 and evidence.traffic_ratio(250) == 2.0
    assert evidence.floor_us(1e9) == pytest.approx(0.5)
    # device time is total_active_time (idle gaps excluded) where the summary has it
    assert evidence.device_time_field() == "total_active_time"
    assert evidence.device_time_us_per_step() == pytest.approx(float(real["total_active_time"]) * scale * 1e6 / 3)
    assert "(total_active_time 0.00288739 s over 3 profiled step(s), idle gaps excluded)" in \
        explorer.timing_source(found, None)


def test_stdout_with_log_lines_before_the_json_is_read(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    record = {"total_time": 0.001, "hbm_read_bytes": 10, "hbm_write_bytes": 10}
    fake_tools.install_neuron_explorer(bin_dir, {"v": _spec(fake_tools.keyed_by_node(record),
                                                            log_lines=[LOG_LINE, ""])}, stdout=True)
    found = explorer.explore(_session(tmp_path / "w"), STEPS, tmp_path / "s", which=lambda n: str(bin_dir / n))
    assert found.summary["hbm_read_bytes"] == 10.0 and found.counters["nc_exec_running"] == 2.0
    assert not (tmp_path / "s" / explorer.SUMMARY_FILE).exists()  # it printed; the raw bytes are still kept
    assert found.raw[explorer.SUMMARY_FILE].startswith(LOG_LINE.encode())  # kept as printed
    assert found.notes[:2] == ("device summary from neuron-explorer summary-json (absent: mbu_estimated_percent, "
                               "mbu_min_read_util_percent, dma_transfer_count, spill_save_bytes, spill_reload_bytes)",
                               "skipped 1 line(s) printed before the JSON (log lines)")
    assert load_json(b"[INFO] starting\n{\"a\": [1]}\ntrailing log\n") == ({"a": [1]}, 1)
    assert load_json(b"level=info msg=x\n") == (None, 1)


def test_several_records_are_all_summed_and_attributed() -> None:
    """An eager capture: one record per NEFF. Every one counts; ratios are total_time-weighted, never summed."""
    a = fake_tools.summary_record(0.001, 100, 50, vector_engine_active_time_percent=0.9, dma_transfer_count=2)
    b = fake_tools.summary_record(0.003, 300, 150, vector_engine_active_time_percent=0.5, dma_transfer_count=4)
    c = {**fake_tools.summary_record(0.004, 400, 200, vector_engine_active_time_percent=0.3, dma_transfer_count=6)}
    del c["mbu_min_read_util_percent"]
    raw = (LOG_LINE + "\n" + json.dumps(fake_tools.keyed_by_node(a, b, c))).encode()
    read = parse_summary(raw)
    assert read.records == 3
    f = read.figures
    assert f["total_time"] == pytest.approx(0.008) and f["hbm_read_bytes"] == 800.0 and f["hbm_write_bytes"] == 400.0
    assert f["dma_transfer_count"] == 12.0
    assert f["vector_engine_active_time_percent"] == pytest.approx((0.9 * 1 + 0.5 * 3 + 0.3 * 4) / 8)
    assert f["mbu_estimated_percent"] == pytest.approx(fake_tools.real_counters()["mbu_estimated_percent"])
    assert "mbu_min_read_util_percent" not in f
    assert read.notes == (
        "device summary from neuron-explorer summary-json: 3 records summed (times, bytes and counts added; "
        "*_percent ratios averaged weighted by total_time) (absent: mbu_min_read_util_percent)",
        "skipped 1 line(s) printed before the JSON (log lines)",
        "left out, given by only some records: mbu_min_read_util_percent",
        f"records: {fake_tools.NODE}#0: total_time 0.001 s; {fake_tools.NODE}#1: total_time 0.003 s; "
        f"{fake_tools.NODE}#2: total_time 0.004 s",
        "versions reported: profiler_version 2.28.23.0, runtime_version 2.30.51, compiler_version 2.23.6484.0, "
        "driver_version 2.26.0")


def test_the_real_inf2_counters_are_kept_as_ratios() -> None:
    """mfu_estimated_percent 0.0049 (67 MFLOP in 150 µs) is stored as 0.0049, not 0.49 nor 49."""
    read = parse_summary(json.dumps(fake_tools.keyed_by_node(fake_tools.real_counters())).encode())
    assert read.figures["mfu_estimated_percent"] == 0.004885633591650872
    assert read.figures["total_active_time_percent"] == 0.9624620787879505
    assert read.figures["total_time"] == 0.000149710075 and read.figures["total_active_time"] == 0.00014409027


def test_schema_version_is_recorded_and_an_unknown_major_refused() -> None:
    record = {"total_time": 0.5, "hbm_read_bytes": 1, "hbm_write_bytes": 1}
    known = parse_summary(json.dumps({"metadata": {"profile_schema_version": "7.4.0"}, "n": record}).encode())
    assert known.schema_version == "7.4.0" and "profile schema 7.4.0" in known.notes and known.figures
    newer = parse_summary(json.dumps({"metadata": {"profile_schema_version": "8.0.0"}, "n": record}).encode())
    assert (newer.figures, newer.schema_version) == ({}, "8.0.0")
    (line,) = newer.notes
    assert line == ("neuron-explorer profile schema 8.0.0 is not one reportgen reads (major version 7, documented "
                    "7.4.0): no device summary; use a neuron-explorer of schema 7.x or a reportgen that reads 8.0.0")
    assert "\n" not in line


@pytest.mark.parametrize(("payload", "note"), [
    ({"hbm_read_bytes": 5}, "summary-json holds no Summary record (no object with a numeric total_time)"),
    ({"n": {"total_time": "0.1"}}, "summary-json holds no Summary record"),
])
def test_summary_without_a_record_is_a_note(payload: object, note: str) -> None:
    read = parse_summary(json.dumps(payload).encode())
    assert read.figures == {} and read.notes[0].startswith(note)
    assert parse_summary(b"level=info msg=only logs\n").notes == ("summary-json is not JSON: no device summary",)


def test_summary_fields_are_not_taken_from_other_records() -> None:
    """Unlike a first-match-anywhere search, a figure outside a Summary record is not read."""
    raw = json.dumps({"metadata": {"hbm_read_bytes": 999}, "summary": {"total_time": 0.5}}).encode()
    read = parse_summary(raw)
    assert read.figures == {"total_time": 0.5} and "absent: hbm_read_bytes, hbm_write_bytes" in read.notes[0]


def test_system_counts_need_the_documented_event_fields() -> None:
    raw = json.dumps([{"name": "nc_exec_running"}, {"name": "nc_exec_running", "trace_event_source": "neuron_hw"},
                      {"name": "nrt_model_submit", "trace_event_source": "neuron_rt", "nc_idx": 3}]).encode()
    counts, note = explorer.parse_system_counts(raw)
    assert counts == {"nc_exec_running": 1.0, "system_trace_events": 1.0}  # nrt_model_submit: core 3 only
    assert "1 events of NeuronCore 0" in note and "not known: nrt_model_submit" in note
    assert explorer.parse_system_counts(b"[{}]") == ({}, "json export holds no system-trace events of NeuronCore 0 "
                                                         "(name with group or trace_event_source; lnc_idx or nc_idx): "
                                                         "no counters")
    assert explorer.parse_system_counts(b"not json")[0] == {}


def test_missing_or_failing_tool_is_a_note_not_data(tmp_path: Path) -> None:
    session = _session(tmp_path / "w")
    none = explorer.explore(session, STEPS, tmp_path / "s", which=lambda n: None)
    assert none.summary == {} and none.counters == {} and none.notes[0].startswith("neuron-explorer is not installed")
    source = explorer.timing_source(none, None)
    assert source.startswith("per-call times: wall clock between torch.neuron.synchronize() calls only; no device "
                             "time (neuron-explorer is not installed")

    def failing(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(argv, 3, b"", b"cannot read NTFF\n")

    failed = explorer.explore(session, STEPS, tmp_path / "s", which=lambda n: "/opt/x/neuron-explorer", run=failing)
    assert failed.notes == ("summary-json: neuron-explorer failed (exit 3: cannot read NTFF)",
                            "json (system trace): neuron-explorer failed (exit 3: cannot read NTFF)",
                            "summary-json used because Parquet gave no device figures: neuron-explorer failed "
                            "(exit 3: cannot read NTFF)")
    assert explorer.timing_source(failed, 2).endswith("device time: the device events in trace.json")


def test_session_is_the_folder_holding_the_ntff(tmp_path: Path) -> None:
    session = _session(tmp_path, "v")
    assert explorer.session_dir(tmp_path / "v") == session
    assert explorer.session_dir(session) == session
    assert explorer.session_dir(tmp_path / "empty") is None
    inspect = tmp_path / "inspect" / "i-0abc_pid_9"  # the runtime's inspect capture: files in the pid folder
    inspect.mkdir(parents=True)
    (inspect / "123_instid_0_vnc_0.ntff").write_bytes(b"x")
    assert explorer.session_dir(tmp_path / "inspect") == inspect and explorer.session_dir(inspect) == inspect


def test_framework_trace_is_found_under_its_alternative_name(tmp_path: Path) -> None:
    from reportgen.devices.neuron.device import find_traces

    session = _session(tmp_path, "v")
    (session / "trace.json").unlink()
    (session / "neuron_framework_trace_rank_0.json").write_text("{}")
    assert find_traces(tmp_path / "v") == [session / "neuron_framework_trace_rank_0.json"]
    (session / "trace.json").write_text("{}")  # trace.json wins in the folder holding both
    assert find_traces(tmp_path / "v") == [session / "trace.json"]
    pid = tmp_path / "moved" / "i-0abc_pid_2"  # where the SDK's troubleshooting page says to move it
    pid.mkdir(parents=True)
    for name in ("neuron_framework_trace_rank_3.json", "neff_1.neff", "1_instid_0_vnc_0.ntff"):
        (pid / name).write_text("{}")
    assert find_traces(tmp_path / "moved") == [pid / "neuron_framework_trace_rank_3.json"]
    assert find_traces(pid) == [pid / "neuron_framework_trace_rank_3.json"]
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "neuron_framework_trace_rank_0.json").write_text("{}")  # no Neuron files beside it
    assert find_traces(tmp_path / "loose") == []


def test_compile_info_counts_graphs_and_breaks_from_dynamo() -> None:
    """On any device: a print() inside a compiled function is one graph break and two graphs."""
    import torch

    from reportgen.model.evidence import VariantEvidence, compile_info_since, dynamo_snapshot, eager_compile_info

    def with_break(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        print("graph break here")
        return y + 1

    before = dynamo_snapshot(torch)
    torch.compile(with_break, backend="eager")(torch.ones(3))
    info = compile_info_since(before, dynamo_snapshot(torch), VariantEvidence())
    assert (info.graph_count, info.graph_break_count, info.neff_count, info.fallback_ops) == (2, 1, None, None)
    assert len(info.break_reasons) == 1 and "print" in info.break_reasons[0]
    assert "\n" not in info.break_reasons[0]
    assert eager_compile_info(VariantEvidence()) is None
    eager = eager_compile_info(VariantEvidence(neff_count=4, fallback_ops=()))
    assert eager is not None and (eager.graph_count, eager.neff_count, eager.fallback_ops) == (0, 4, ())


def test_privateuse1_driver_events_are_runtime_not_device_work() -> None:
    from reportgen.devices.lanes import Lane
    from reportgen.traces.events import lane_of

    assert lane_of("privateuse1_driver") is Lane.RUNTIME
    assert lane_of("PrivateUse1_Driver") is Lane.RUNTIME
