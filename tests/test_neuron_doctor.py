"""``reportgen doctor --device neuron``: the diagnostics bundle, made here with the stand-in and fake tools."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from conftest import ROOT, run_cli
from stand_ins import fake_tools

from reportgen.devices.neuron.device import INSTALL_HINT

STAND_INS = ROOT / "tests" / "stand_ins"


def _capture(root: Path) -> Path:
    session = root / "profile_output" / "i-0abc_pid_7" / "20261130_000000"
    session.mkdir(parents=True)
    for name in ("trace.json", "neff_1_vnc_0.neff", "neff_2_vnc_0.neff", "profile_nc_0_session_0.ntff", "ntrace.pb"):
        (session / name).write_bytes(b"placeholder")
    return root / "profile_output"


def test_doctor_writes_diagnostics_and_an_archive_even_when_profile_fails(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_ls(bin_dir, "neuron-ls-j.trn2.3xlarge.json")  # a real capture
    fake_tools.install_neuron_explorer(bin_dir, {"i-0abc_pid_7": {
        "summary_json": {"total_time": 0.001, "hbm_read_bytes": 64, "hbm_write_bytes": 32},
        "events": {"nc_exec_running": 4}}})
    capture = _capture(tmp_path)
    out = tmp_path / "diag"
    proc = run_cli("doctor", "--device", "neuron", "--out", str(out), "--profile-output", str(capture),
                   env={"PYTHONPATH": str(STAND_INS), "PATH": fake_tools.path_with(bin_dir),
                        "STAND_IN_NEURON_CORES": "0", "NEURON_RT_INSPECT_ENABLE": "1"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("profile exit code 5: reportgen: error: --device neuron: torch.neuron.is_available() is "
                               "not True (no NeuronCore visible to this process)")
    assert lines[0].endswith(INSTALL_HINT) and "aws_neuron_venv_pytorch_2_14" in INSTALL_HINT
    assert lines[-1] == f"attach to the issue: {tmp_path / 'diag.tar.gz'}"
    diag = json.loads((out / "diagnostics.json").read_text())
    assert diag["torch_neuronx_module"] == "0.0.0+stand-in"
    assert diag["neuron_ls"] == {"instance_type": "trn2.3xlarge", "logical_neuroncore_config": 2,
                                 "note": "read from neuron-ls -j: 1 Neuron device(s)", "raw_file": "neuron-ls.json"}
    assert (out / "neuron-ls.json").read_bytes() == (fake_tools.CAPTURES / "neuron-ls-j.trn2.3xlarge.json").read_bytes()
    assert diag["environment"]["NEURON_RT_INSPECT_ENABLE"] == "1"
    assert diag["tools"]["neuron-explorer"] == str(bin_dir / "neuron-explorer")
    assert diag["profile"]["exit_code"] == 5 and diag["bundle_files"] == []
    assert (out / "profile.stderr.txt").read_text().startswith("reportgen: error: --device neuron")
    found = diag["profile_output"]
    assert [f["path"] for f in found["files"]] == [
        "i-0abc_pid_7/20261130_000000/neff_1_vnc_0.neff", "i-0abc_pid_7/20261130_000000/neff_2_vnc_0.neff",
        "i-0abc_pid_7/20261130_000000/ntrace.pb", "i-0abc_pid_7/20261130_000000/profile_nc_0_session_0.ntff",
        "i-0abc_pid_7/20261130_000000/trace.json"]
    (session,) = found["sessions"]
    assert session["session"] == "i-0abc_pid_7/20261130_000000"
    assert session["summary"] == {"total_time": 0.001, "hbm_read_bytes": 64.0, "hbm_write_bytes": 32.0}
    assert session["counters_total"]["nc_exec_running"] == 4.0
    for rel in session["raw_outputs"]:
        assert json.loads((out / rel).read_text())
    with tarfile.open(tmp_path / "diag.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"diag/diagnostics.json", "diag/neuron-ls.json", "diag/profile.stderr.txt"} <= names


def test_doctor_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "diag").mkdir()
    (tmp_path / "diag" / "x").write_text("keep me")
    proc = run_cli("doctor", "--device", "neuron", "--out", str(tmp_path / "diag"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (f"reportgen: error: --out {tmp_path / 'diag'}: exists and is not an empty folder; "
                                   "pick a new folder")
    assert (tmp_path / "diag" / "x").read_text() == "keep me"
