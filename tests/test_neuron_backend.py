"""The neuron backend against the stand-in torch_neuronx (tests/stand_ins): the calls it makes.

No Trainium here: these tests check that reportgen drives the documented TorchNeuron API
(NeuronConfig as experimental_config, NeuronProfiler.export_trace as on_trace_ready,
CPU + PrivateUse1 activities, torch.neuron.synchronize, compile backend "neuron") and
collects the profile_output layout. They do not show that it works on real hardware.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli

from reportgen.bundle import load_store
from reportgen.devices.neuron import NeuronBackend

STAND_INS = ROOT / "tests" / "stand_ins"


class CpuPlacedNeuronBackend(NeuronBackend):
    """The neuron backend with tensors left on the CPU: the one thing a stand-in cannot provide."""

    def check_available(self) -> None:
        importlib.import_module("torch_neuronx.profiling")

    def torch_device(self) -> Any:
        import torch

        return torch.device("cpu")


@pytest.fixture()
def stand_in(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(STAND_INS))
    for name in [m for m in sys.modules if m.startswith("torch_neuronx")]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("torch_neuronx")
    module.CALLS.clear()
    yield module
    import torch

    monkeypatch.delattr(torch, "neuron", raising=False)


def test_full_profile_drives_the_documented_api(stand_in, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from reportgen import profile

    monkeypatch.setattr(profile, "select_backend", lambda name: CpuPlacedNeuronBackend())
    args = argparse.Namespace(scenario="rmsnorm", shape="2,64", dtype=None, seed=0, label="stand-in",
                              variants=None, samples=3, warmup=1, threads=None, quiet=True, device="neuron")
    from reportgen.cli import profile_request

    code = profile.run_profile(profile_request(args, tmp_path))
    assert code == 0
    kinds = [c[0] for c in stand_in.CALLS]
    configs = [c[1] for c in stand_in.CALLS if c[0] == "NeuronConfig"]
    assert len(configs) == 3  # one profiler session per variant
    from torch_neuronx.profiling import ProfileMode

    assert configs[0]["modes"] == [ProfileMode.DEVICE, ProfileMode.RUNTIME]
    assert configs[0]["capture_enabled_for_nc"] == "0"
    assert Path(configs[0]["profile_output_dir"]).name == "naive"
    assert kinds.count("NeuronProfiler") == 3 and kinds.count("export_trace") == 3
    assert "compile_backend" in kinds  # torch.compile(backend="neuron") reached the registered backend
    assert kinds.count("torch.neuron.synchronize") > 20
    (run,) = load_store(tmp_path)
    assert run.device.value == "neuron" and run.environment.device_extras["torch_neuronx_version"] == "0.0.0+stand-in"
    for v in run.variants:
        assert v.status.value == "ok", v.error
        assert v.trace_path == f"traces/{v.name}.pt.trace.json.gz"
        assert sorted(a.kind for a in v.artifacts) == ["neff", "ntff", "pb", "pb"]
        for a in v.artifacts:
            assert (tmp_path / run.run_id / a.path).read_bytes().startswith(b"stand-in torch_neuronx")


def test_profiler_session_passes_config_and_export(stand_in, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    backend = NeuronBackend()
    with backend.profile_session(tmp_path) as extra:
        from torch_neuronx.profiling import NeuronConfig, NeuronProfiler

        assert isinstance(extra["experimental_config"], NeuronConfig)
        export = extra["on_trace_ready"]
        assert isinstance(export.__self__, NeuronProfiler) and export.__func__ is NeuronProfiler.export_trace
        assert export.__self__.config is extra["experimental_config"]
    assert [str(a).split(".")[-1] for a in backend.profiler_activities()] == ["CPU", "PrivateUse1"]


def test_device_without_neuron_registration_is_device_unavailable(stand_in) -> None:  # type: ignore[no-untyped-def]
    from reportgen.errors import DeviceUnavailable

    with pytest.raises(DeviceUnavailable, match="torch has no 'neuron' device"):
        NeuronBackend().check_available()


def test_compile_without_torch_neuronx_is_one_line(tmp_path: Path) -> None:
    code = ("from reportgen.devices.neuron import NeuronBackend\n"
            "from reportgen.errors import DeviceUnavailable\n"
            "try:\n    NeuronBackend().compile(lambda x: x)\n"
            "except DeviceUnavailable as e:\n    print('DU:', e)\n")
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("DU: torch.compile(backend='neuron') is not registered; install TorchNeuron")


def test_peak_is_the_vendor_figure_for_the_instance(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from reportgen.devices import neuron

    dmi = tmp_path / "product_name"
    dmi.write_text("trn2.48xlarge\n")
    monkeypatch.setattr(neuron, "DMI_PRODUCT", dmi)
    peak = NeuronBackend().measure_peak()
    assert peak.bandwidth_bytes_per_s == 2.9e12 and "vendor figure for one trn2 chip" in peak.source
    dmi.write_text("c7i.large\n")
    assert NeuronBackend().measure_peak().bandwidth_bytes_per_s is None
    monkeypatch.setenv("REPORTGEN_PEAK_BANDWIDTH_GBPS", "700")
    assert NeuronBackend().measure_peak().bandwidth_bytes_per_s == 700e9


def test_stand_in_on_path_but_no_device_is_exit_5(tmp_path: Path) -> None:
    proc = run_cli("profile", "--device", "neuron", "--store", str(tmp_path),
                   env={"PYTHONPATH": str(STAND_INS)})
    assert proc.returncode == 5
    assert proc.stderr.strip().startswith("reportgen: error: --device neuron: torch has no 'neuron' device")
