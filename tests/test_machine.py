"""``reportgen machine``: what is detected here and what a run is compared against, with sources.

The Neuron case runs the command with a fake ``neuron-ls`` that prints real captures (tests/data/neuron/)
byte for byte, and a fake ``neuron-monitor`` that streams a real capture where neuron-ls has no instance type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from stand_ins import fake_tools


def _machine(bin_dir: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    proc = run_cli("machine", *args, env={"PATH": fake_tools.path_with(bin_dir), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return proc


def test_neuron_on_trn2_reads_the_real_neuron_ls_and_gives_one_hbm_stack(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_ls(bin_dir, "neuron-ls-j.trn2.3xlarge.json")
    doc = json.loads(_machine(bin_dir, "--device", "neuron", "--json").stdout)
    assert doc["schema_version"] == 1 and doc["device"] == "neuron"
    facts = {k: v["value"] for k, v in doc["facts"].items()}
    assert (facts["instance_type"], facts["chip"], facts["logical_neuroncore_config"]) == (
        "trn2.3xlarge", "Trainium2", "2")
    assert (facts["neuron_devices"], facts["neuroncores_per_device"], facts["neuroncores_total"]) == ("1", "4", "4")
    assert facts["hbm_bytes_per_device"] == "103079215104"
    assert doc["facts"]["logical_neuroncore_config"]["source"] == "LNC=2 (reported by neuron-ls)"
    assert facts["torch-neuronx"] is None and doc["facts"]["torch-neuronx"]["source"].startswith("not found: ")
    ceiling = doc["bandwidth_ceiling"]
    assert ceiling["bytes_per_s"] == pytest.approx(2.9e12 / 4)
    assert ceiling["source"].startswith("denominator: one HBM stack of Trainium2 (trn2.3xlarge, LNC=2")
    roofs = {(r["dtype"], r["engine"]): r for r in doc["compute_roofs"]}
    assert roofs[("bfloat16", "Vector Engine")]["flops_per_s"] == pytest.approx(2e12)
    assert roofs[("bfloat16", "Tensor Engine")]["flops_per_s"] == pytest.approx(158e12)
    assert roofs[("float16", "chip share")]["flops_per_s"] == pytest.approx(667e12 / 8 * 2)
    assert "neuron-core-v3.rst" in roofs[("float32", "Scalar Engine")]["source"]


def test_neuron_without_an_instance_type_falls_back_to_neuron_monitor_and_names_what_is_missing(
        tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_ls(bin_dir, "neuron-ls-j.trn1.2xlarge.json")
    fake_tools.install_neuron_monitor(bin_dir, "neuron-monitor.trn1.2xlarge.jsonl")
    doc = json.loads(_machine(bin_dir, "--device", "neuron", "--json").stdout)
    facts = doc["facts"]
    assert facts["instance_type"]["value"] == "trn1.2xlarge"
    assert facts["chip"]["value"] == "Trainium"
    assert "neuron-monitor" in facts["instance_type"]["source"]
    assert doc["bandwidth_ceiling"]["bytes_per_s"] == pytest.approx(820 * 1024**3)


def test_neuron_with_no_tools_names_each_missing_fact(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = run_cli("machine", "--device", "neuron", env={"PATH": str(empty)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "device: neuron"
    instance = next(line for line in lines if line.lstrip().startswith("instance_type"))
    assert "(not found)" in instance and "neuron-ls is not installed" in instance
    assert any(line.startswith("bandwidth ceiling: (none here)  [denominator: none;") for line in lines)


def test_auto_picks_the_cpu_without_device_tools_and_says_what_a_profile_measures(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    doc = json.loads(run_cli("machine", "--json", env={"PATH": str(empty)}).stdout)
    assert doc["device"] == "cpu"
    assert doc["facts"]["logical_cpus"]["value"] is not None
    assert doc["bandwidth_ceiling"] == {"bytes_per_s": None, "source": "measured by each profile run on this "
                                        "machine, not here (copies at several working-set sizes, one ceiling per "
                                        "cache level)"}


def test_cuda_without_nvidia_smi_names_it_and_gives_no_roof(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    doc = json.loads(run_cli("machine", "--device", "cuda", "--json", env={"PATH": str(empty)}).stdout)
    assert doc["facts"]["gpu"] == {"value": None, "source": "not found: nvidia-smi is not on PATH"}
    assert all(r["flops_per_s"] is None for r in doc["compute_roofs"])
