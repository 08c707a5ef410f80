"""neuron-explorer reading and the Trainium ceilings, against fakes that follow the documents.

The fake executable checks its argv against the documented form (``view -d <session>
--output-format summary-json|json``); the records carry the documented field names (SCH Summary,
SystemProfileEvents). Nothing here has seen a real NTFF.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from stand_ins import fake_tools

from reportgen.devices.neuron import explorer, hardware

STEPS = 3


def _session(root: Path, variant: str = "v") -> Path:
    session = root / variant / "i-0abc_pid_1" / "20261130_000000"
    session.mkdir(parents=True)
    for name in ("neff_a_vnc_0.neff", "neff_b_vnc_0.neff", "profile_nc_0_session_0.ntff", "trace.json"):
        (session / name).write_bytes(b"x")
    return session


def _spec(summary_json: object) -> dict[str, object]:
    return {"summary_json": summary_json, "events": {"nc_exec_running": 6, "nrt_model_submit": 3, "other": 2}}


def test_summary_and_counters_from_files_the_tool_writes(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    record = fake_tools.summary_record(0.003, 1000, 500, mbu_estimated_percent=2.5, dma_transfer_count=9,
                                       tensor_engine_active_time_percent=1.0, tensor_engine_instruction_count=4,
                                       unrelated_field=7)
    fake_tools.install_neuron_explorer(bin_dir, {"v": _spec({"summary": [record]})})
    session = _session(tmp_path / "work")
    found = explorer.explore(session, STEPS, tmp_path / "scratch", which=lambda n: str(bin_dir / n))
    assert found.summary == {"total_time": 0.003, "hbm_read_bytes": 1000.0, "hbm_write_bytes": 500.0,
                             "mbu_estimated_percent": 2.5, "dma_transfer_count": 9.0,
                             "tensor_engine_active_time_percent": 1.0, "tensor_engine_instruction_count": 4.0}
    # 11 events of NeuronCore 0 (the fake adds one of NeuronCore 1, which is not counted), over 3 steps
    assert found.counters == {"nc_exec_running": 2.0, "nrt_model_submit": 1.0, "dmem_buf_copyin": 0.0,
                              "dmem_buf_copyout": 0.0, "nc_model_switch": 0.0, "nrt_model_switch": 0.0,
                              "system_trace_events": 11 / 3}
    assert sorted(found.raw) == [explorer.SUMMARY_FILE, explorer.SYSTEM_FILE]
    assert json.loads(found.raw[explorer.SUMMARY_FILE]) == {"summary": [record]}
    calls = fake_tools.explorer_calls(bin_dir)
    assert calls == [
        ["view", "-d", str(session), "--output-format", "summary-json", "--output-file",
         str(tmp_path / "scratch" / explorer.SUMMARY_FILE)],
        ["view", "-d", str(session), "--output-format", "json", "--output-file",
         str(tmp_path / "scratch" / explorer.SYSTEM_FILE), "--ignore-device-profile"]]
    assert found.tool.startswith("neuron-explorer view -d i-0abc_pid_1/20261130_000000 --output-format summary-json")
    evidence = found.evidence("source")
    assert evidence.hbm_bytes_per_step() == 500.0 and evidence.traffic_ratio(250) == 2.0
    assert evidence.floor_us(1e9) == pytest.approx(0.5) and evidence.device_time_us_per_step() == pytest.approx(1000.0)


def test_stdout_is_read_when_no_output_file_is_written(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_explorer(bin_dir, {"v": _spec(fake_tools.summary_record(0.001, 10, 10))}, stdout=True)
    found = explorer.explore(_session(tmp_path / "w"), STEPS, tmp_path / "s", which=lambda n: str(bin_dir / n))
    assert found.summary["hbm_read_bytes"] == 10.0 and found.counters["nc_exec_running"] == 2.0
    assert not (tmp_path / "s" / explorer.SUMMARY_FILE).exists()  # it printed; the raw bytes are still kept
    assert json.loads(found.raw[explorer.SUMMARY_FILE])["total_time"] == 0.001


@pytest.mark.parametrize(("payload", "note"), [
    ({"a": fake_tools.summary_record(1, 1, 1), "b": fake_tools.summary_record(2, 2, 2)},
     "summary-json holds 2 Summary records (objects with total_time); reportgen reads exactly one"),
    ({"hbm_read_bytes": 5}, "summary-json holds 0 Summary records"),
])
def test_summary_is_refused_unless_exactly_one_record(payload: object, note: str) -> None:
    figures, text = explorer.parse_summary(json.dumps(payload).encode())
    assert figures == {} and text.startswith(note)


def test_summary_fields_are_not_taken_from_other_records() -> None:
    """Unlike a first-match-anywhere search, a figure outside the Summary record is not read."""
    raw = json.dumps({"metadata": {"hbm_read_bytes": 999}, "summary": {"total_time": 0.5}}).encode()
    figures, note = explorer.parse_summary(raw)
    assert figures == {"total_time": 0.5} and "absent: hbm_read_bytes, hbm_write_bytes" in note


def test_system_counts_need_the_documented_event_fields() -> None:
    raw = json.dumps([{"name": "nc_exec_running"}, {"name": "nc_exec_running", "trace_event_source": "neuron_hw"},
                      {"name": "nrt_model_submit", "trace_event_source": "neuron_rt", "nc_idx": 3}]).encode()
    counts, note = explorer.parse_system_counts(raw)
    assert counts["nc_exec_running"] == 1.0 and counts["nrt_model_submit"] == 0.0
    assert counts["system_trace_events"] == 1.0 and "1 events of NeuronCore 0" in note
    assert explorer.parse_system_counts(b"[{}]") == ({}, "json export holds no system-trace events (objects with "
                                                         "name and trace_event_source): no counters")
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
                            "json (system trace): neuron-explorer failed (exit 3: cannot read NTFF)")
    assert explorer.timing_source(failed, 2).endswith("device time: the device events in trace.json")


def test_session_is_the_folder_holding_the_ntff(tmp_path: Path) -> None:
    session = _session(tmp_path, "v")
    assert explorer.session_dir(tmp_path / "v") == session
    assert explorer.session_dir(session) == session
    assert explorer.session_dir(tmp_path / "empty") is None


@pytest.mark.parametrize(("instance", "family", "chip"), [
    ("trn1.32xlarge", "trn1", "Trainium"), ("trn1n.32xlarge", "trn1n", "Trainium"),
    ("trn2.48xlarge", "trn2", "Trainium2"), ("trn2u.48xlarge", "trn2u", "Trainium2"),
    ("trn3.48xlarge", "trn3", "Trainium3"), ("TRN2.3XLARGE", "trn2", "Trainium2"),
])
def test_instance_families(instance: str, family: str, chip: str) -> None:
    found = hardware.chip_for_instance(instance)
    assert found is not None and found[0] == family and found[1].name == chip


@pytest.mark.parametrize("instance", ["c7i.large", "inf2.xlarge", "trn", "trnx.large", "", "trn9.large"])
def test_other_instances_have_no_chip(instance: str) -> None:
    assert hardware.chip_for_instance(instance) is None
    assert hardware.core_ceiling(instance, "1").bandwidth_bytes_per_s is None


def test_ceiling_for_one_neuroncore_states_its_denominator() -> None:
    trn2 = hardware.core_ceiling("trn2u.48xlarge", "2")
    assert trn2.bandwidth_bytes_per_s == pytest.approx(0.725e12)
    assert trn2.denominator.startswith("denominator: one HBM stack of Trainium2 (trn2u.48xlarge, LNC=2): 2.9 TB/s "
                                       "per chip / 4 stacks = 0.725 TB/s, derived")
    trn3 = hardware.core_ceiling("trn3.48xlarge", None)
    assert trn3.bandwidth_bytes_per_s == 4.9e12 and "the whole Trainium3 chip" in trn3.denominator
    assert "LNC not reported" in trn3.denominator and "underestimate" in trn3.denominator
    trn1 = hardware.core_ceiling("trn1n.32xlarge", "1")
    assert trn1.bandwidth_bytes_per_s == 820 * 1024**3 and "820 GiB/s" in trn1.denominator
    assert "TorchNeuron targets Trn2/Trn3, not this chip" in trn1.denominator
    assert hardware.core_ceiling(None, None).denominator.startswith("denominator: none; instance type (not found")


def test_neuron_ls_json(tmp_path: Path) -> None:
    ok = hardware.parse_neuron_ls(b'{"instance-type": "trn2.48xlarge", "logical-neuroncore-config": 2}')
    assert (ok.instance_type, ok.lnc, ok.note) == ("trn2.48xlarge", "2", "read from neuron-ls -j")
    part = hardware.parse_neuron_ls(b'{"instance-type": "trn2.48xlarge"}')
    assert part.lnc is None and part.note.endswith("printed no logical-neuroncore-config")
    assert hardware.parse_neuron_ls(b"[1]").instance_type is None
    assert hardware.parse_neuron_ls(b"oops").note == "neuron-ls -j printed no JSON"
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_ls(bin_dir, {"instance-type": "trn3.48xlarge", "logical-neuroncore-config": "1"})
    read = hardware.read_neuron_ls(which=lambda n: str(bin_dir / n))
    assert (read.instance_type, read.lnc) == ("trn3.48xlarge", "1")
    assert hardware.read_neuron_ls(which=lambda n: None).note.startswith("neuron-ls is not installed")


def test_environment_facts_warn_about_inspect() -> None:
    ls = hardware.NeuronLs("trn2.48xlarge", "2", b"{}", "read from neuron-ls -j")
    assert "warning" not in hardware.environment_facts(ls, {})
    facts = hardware.environment_facts(ls, {"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_LOGICAL_NC_CONFIG": "2"})
    assert facts["warning"].startswith("$NEURON_RT_INSPECT_ENABLE=1 is set: the Neuron SDK says it must not be set "
                                       "together with torch.profiler")
    assert facts["NEURON_LOGICAL_NC_CONFIG"] == "2" and facts["instance_type"] == "trn2.48xlarge"


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
    from reportgen.traces.reader import Lane, lane_of

    assert lane_of("privateuse1_driver") is Lane.RUNTIME
    assert lane_of("PrivateUse1_Driver") is Lane.RUNTIME
