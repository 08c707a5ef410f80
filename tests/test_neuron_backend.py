"""The neuron backend against the stand-in torch_neuronx and fake Neuron tools (tests/stand_ins/).

No Trainium here: these tests check that reportgen drives the documented TorchNeuron API
(NeuronConfig as experimental_config with neff_cache_dir, NeuronProfiler.export_trace as
on_trace_ready, CPU + PrivateUse1 activities, torch.neuron.synchronize / is_available, compile
backend "neuron"), calls neuron-explorer in its documented form on each variant's session
folder, and shows what it returns in the report. The fake neuron-ls prints a real trn2.3xlarge
capture and the fake explorer real counter names (tests/data/neuron/). They do not show that it
works on hardware.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli
from stand_ins import fake_tools

from reportgen.devices.neuron.device import NeuronBackend
from reportgen.model.run import TimeBasis
from reportgen.store.loader import load_store
from reportgen.text.markdown import md_escape

STAND_INS = ROOT / "tests" / "stand_ins"
OLDER_STAND_IN = STAND_INS / "older"
XLA_STAND_IN = STAND_INS / "xla"
MIN_BYTES = (2 * 2 * 64 + 64) * 4  # rmsnorm --shape 2,64 float32: read x and w, write y
STEPS = 3  # the profiler schedule's active steps


class CpuPlacedNeuronBackend(NeuronBackend):
    """The neuron backend with tensors left on the CPU: the one thing a stand-in cannot provide."""

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
    module.FALLBACK_OPS.clear()
    yield module
    import torch

    monkeypatch.delattr(torch, "neuron", raising=False)


def _variant_spec(ratio: int, per_step_execs: int, copyout: int = 0) -> dict[str, Any]:
    moved = ratio * MIN_BYTES * STEPS
    record = fake_tools.summary_record(0.0004 * STEPS * per_step_execs, moved // 2, moved - moved // 2,
                                       mbu_estimated_percent=0.015 * ratio, dma_transfer_count=4 * per_step_execs,
                                       vector_engine_active_time_percent=0.40, scalar_engine_active_time_percent=0.125)
    return {"summary_json": fake_tools.keyed_by_node(record),
            "events": {"nc_exec_running": per_step_execs * STEPS, "nrt_model_submit": per_step_execs * STEPS,
                       "dmem_buf_copyin": STEPS, "dmem_buf_copyout": copyout * STEPS, "nrt_execute": STEPS}}


@pytest.fixture()
def neuron_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_explorer(bin_dir, {"naive": _variant_spec(3, 7), "fused": _variant_spec(1, 1),
                                                 "compiled": _variant_spec(1, 1, copyout=1)})
    fake_tools.install_neuron_ls(bin_dir, "neuron-ls-j.trn2.3xlarge.json")
    monkeypatch.setenv("PATH", fake_tools.path_with(bin_dir))
    monkeypatch.setenv("STAND_IN_NEURON_CORES", "4")
    for name in ("NEURON_RT_INSPECT_ENABLE", "NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VISIBLE_CORES",
                 "NEURON_RT_NUM_CORES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("REPORTGEN_PEAK_BANDWIDTH_GBPS", raising=False)
    return bin_dir


def test_stand_in_run_reports_counters_traffic_and_timing_source(stand_in, neuron_tools: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from reportgen.profile import command as profile
    from reportgen.site import build_site

    stand_in.FALLBACK_OPS.append("aten::_fake_fallback")
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0")
    monkeypatch.setattr(profile, "select_backend", lambda name: _checked(CpuPlacedNeuronBackend()))
    store = tmp_path / "store"
    args = argparse.Namespace(scenario="rmsnorm", shape="2,64", dtype=None, seed=0, label="stand-in",
                              variants=None, samples=3, warmup=1, threads=None, quiet=True, device="neuron")
    from reportgen.commands import profile_request

    assert profile.run_profile(profile_request(args, store)) == 0

    # The documented capture API, with neff_cache_dir set so the .neff files are kept.
    kinds = [c[0] for c in stand_in.CALLS]
    configs = [c[1] for c in stand_in.CALLS if c[0] == "NeuronConfig"]
    from torch_neuronx.profiling import ProfileMode

    assert len(configs) == 3 and kinds.count("export_trace") == 3
    assert configs[0]["modes"] == [ProfileMode.DEVICE, ProfileMode.RUNTIME]
    assert configs[0]["capture_enabled_for_nc"] == "0" and Path(configs[0]["profile_output_dir"]).name == "naive"
    assert configs[0]["neff_cache_dir"] == "/tmp/neff_cache"
    assert kinds[0] == "torch.neuron.is_available" and "compile_backend" in kinds
    assert kinds.count("torch.neuron.synchronize") > 20

    # neuron-explorer in its documented form, on each variant's session folder.
    calls = [c for c in fake_tools.explorer_calls(neuron_tools) if c[0] == "view"]  # --version: the environment
    # Parquet first; this stand-in gives none, so summary-json and json follow (Parquet: test_neuron_parquet.py);
    # then the Perfetto export (tests/test_neuron_perfetto_versions.py).
    assert len(calls) == 12
    assert all(c[3:5] == ["--output-format", "parquet"] for c in calls[::4])
    for call, variant in zip(calls[1::4], ("naive", "fused", "compiled"), strict=True):
        assert call[:2] == ["view", "-d"] and call[3:5] == ["--output-format", "summary-json"]
        session = Path(call[2])
        assert session.parent.name.startswith("i-0standin_pid_") and session.parent.parent.name == variant
    assert all(c[3:5] == ["--output-format", "json"] and c[-1] == "--ignore-device-profile" for c in calls[2::4])
    assert all(c[3:] == ["--output-format", "perfetto"] for c in calls[3::4])

    (run,) = load_store(store)
    assert run.environment.device_extras["instance_type"] == "trn2.3xlarge"
    assert run.environment.device_extras["logical_neuroncore_config"] == "2"
    assert run.environment.device_extras["neuron_devices"] == "1 device(s) × 4 NeuronCores (4 in all), 96 GiB HBM each"
    assert run.environment.device_extras["NEURON_RT_VISIBLE_CORES"] == "0"
    assert run.device.value == "neuron" and run.environment.device_extras["torch_neuronx_version"] == "0.0.0+stand-in"
    assert run.environment.device_name == "AWS Trainium2 (trn2.3xlarge, LNC=2), NeuronCore 0"
    assert run.peak.bandwidth_bytes_per_s == 0.725e12
    assert run.peak.source.startswith("denominator: one HBM stack of Trainium2 (trn2.3xlarge, LNC=2 (reported by "
                                      "neuron-ls))")
    assert run.peak.flops_per_s == 2e12  # float32 on the Vector Engine, LNC=2; the Tensor Engine's is listed
    assert "not drawn: Tensor Engine 45.25 TFLOPS" in run.peak.flops_source
    by_name = {v.name: v for v in run.variants}
    naive, fused, compiled = by_name["naive"], by_name["fused"], by_name["compiled"]
    for v in run.variants:
        assert v.status.value == "ok", v.error
        assert v.time_basis is TimeBasis.CPU  # trace.json has no device events: no zeros shown as device time
        ev = v.device_evidence
        assert ev is not None and ev.profiled_steps == STEPS
        assert "device time: the NTFF via neuron-explorer" in ev.timing_source
        assert sorted(a.kind for a in v.artifacts) == ["neff", "neuron-explorer", "neuron-explorer", "ntff", "pb", "pb",
                                                       "pftrace", "pftrace"]
    assert naive.device_evidence.counters_per_step["nc_exec_running"] == 7.0  # type: ignore[union-attr]
    assert naive.device_evidence.counters_per_step["nrt_model_submit"] == 7.0  # type: ignore[union-attr]
    assert fused.device_evidence.counters_per_step["nc_exec_running"] == 1.0  # type: ignore[union-attr]
    assert compiled.device_evidence.counters_per_step["dmem_buf_copyout"] == 1.0  # type: ignore[union-attr]
    assert naive.bytes_per_call == MIN_BYTES
    assert naive.device_evidence.traffic_ratio(naive.bytes_per_call) == 3.0  # type: ignore[union-attr]
    assert fused.device_evidence.traffic_ratio(fused.bytes_per_call) == 1.0  # type: ignore[union-attr]
    assert naive.device_evidence.summary["vector_engine_active_time_percent"] == 0.40  # type: ignore[union-attr]
    assert compiled.compile_info is not None and compiled.compile_info.graph_count == 1
    assert compiled.compile_info.graph_break_count == 0 and compiled.compile_info.neff_count == 1
    assert compiled.compile_info.fallback_ops == ("aten::_fake_fallback",)
    assert naive.compile_info is not None and naive.compile_info.graph_count == 0  # eager: NEFFs and fallbacks only

    site = tmp_path / "site"
    build_site(store, site, "/", jobs=1)
    html = (site / "runs" / run.run_id / "index.html").read_text()
    md = (site / "runs" / run.run_id / "report.md").read_text()
    assert '<section id="device-evidence">' in html and "## Device evidence" in md
    for text, esc in ((html, str), (md, md_escape)):
        assert "Adaptive Eager Execution" in text and "REPORTGEN_NEURON_EAGER_FUSION=off" in text
        assert esc("denominator: one HBM stack of Trainium2") in text
        assert esc("aten::_fake_fallback") in text
    assert "<li><strong>naive</strong>: per-call times: wall clock between torch.neuron.synchronize() calls; " \
           "device time: the NTFF via neuron-explorer (total_active_time 0.00808468 s over 3 profiled step(s), " \
           "idle gaps excluded)" in html
    # the legacy json holds no dmem_buf_copyout or model switch here: not known (—), not zero
    assert ('<tr><td class="text name">naive</td>\n<td>7</td><td>7</td><td>1</td><td>—</td><td>—</td><td>—</td>'
            '<td>16</td><td>28</td>') in html
    assert "<td>1.2 KiB</td>\n<td>3.8 KiB</td><td><strong>3.00×</strong></td>" in html
    assert "| naive | 1.2 KiB | 3.8 KiB | **3.00×** |" in md
    assert "| fused | 1.2 KiB | 1.2 KiB | **1.00×** |" in md
    engines = "gpsimd 0.8 %, scalar 12.5 %, sync 1.6 %, tensor 89.5 %, vector 40.0 %"
    assert f"<td>28</td>\n<td class=\"text\">{engines}</td></tr>" in html
    assert f"| naive | 7 | 7 | 1 | — | — | — | 16 | 28 | {engines} |" in md
    assert "<td>4.5 %</td></tr>" in html  # naive's mbu_estimated_percent 0.045, a ratio
    assert f"| compiled | 1 | 0 | 1 | {md_escape('aten::_fake_fallback')} | — |" in md
    assert "host CPU time, the trace has no device events; see Device evidence" in html


def _checked(backend: CpuPlacedNeuronBackend) -> CpuPlacedNeuronBackend:
    backend.check_available()
    return backend


def test_profiler_session_passes_config_and_export(stand_in, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    backend = NeuronBackend()
    with backend.profile_session(tmp_path) as extra:
        from torch_neuronx.profiling import NeuronConfig, NeuronProfiler

        assert isinstance(extra["experimental_config"], NeuronConfig)
        export = extra["on_trace_ready"]
        assert isinstance(export.__self__, NeuronProfiler) and export.__func__ is NeuronProfiler.export_trace
        assert export.__self__.config is extra["experimental_config"]
    assert [str(a).split(".")[-1] for a in backend.profiler_activities()] == ["CPU", "PrivateUse1"]


def test_stand_in_accepts_the_documented_parameters_and_refuses_others(stand_in) -> None:  # type: ignore[no-untyped-def]
    from torch_neuronx.profiling import NeuronConfig, ProfileMode

    config = NeuronConfig(modes=[ProfileMode.DEVICE], max_events_per_nc=10, capture_enabled_for_nc="0,1,2-5",
                          profile_output_dir="/x", neff_cache_dir="/y", precache_node_info=False)
    assert config.kwargs["precache_node_info"] is False
    with pytest.raises(TypeError, match="unexpected keyword"):
        NeuronConfig(profile_output_dir="/x", capture_all=True)
    with pytest.raises(TypeError, match="is a string"):
        NeuronConfig(capture_enabled_for_nc=0)


def test_no_visible_neuroncore_is_device_unavailable(stand_in, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from reportgen.errors import DeviceUnavailable

    monkeypatch.delenv("STAND_IN_NEURON_CORES", raising=False)
    with pytest.raises(DeviceUnavailable, match=r"torch.neuron.is_available\(\) is not True"):
        NeuronBackend().check_available()
    assert ("torch.neuron.is_available", None) in stand_in.CALLS  # asked, as the SDK documents


def test_eager_fusion_off_sets_deterministic_algorithms(stand_in, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import torch

    monkeypatch.setenv("STAND_IN_NEURON_CORES", "1")
    monkeypatch.setenv("REPORTGEN_NEURON_EAGER_FUSION", "off")
    before = torch.are_deterministic_algorithms_enabled()
    try:
        NeuronBackend().check_available()
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before)
    monkeypatch.setenv("REPORTGEN_NEURON_EAGER_FUSION", "maybe")
    from reportgen.errors import UsageError

    with pytest.raises(UsageError, match="expected 'off'"):
        NeuronBackend().check_available()


def test_compile_without_torch_neuronx_is_one_line(tmp_path: Path) -> None:
    code = ("from reportgen.devices.neuron.device import NeuronBackend\n"
            "from reportgen.errors import DeviceUnavailable\n"
            "try:\n    NeuronBackend().compile(lambda x: x)\n"
            "except DeviceUnavailable as e:\n    print('DU:', e)\n")
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("DU: torch.compile(backend='neuron') is not registered; install TorchNeuron")


def test_stand_in_on_path_but_no_device_is_exit_5(tmp_path: Path) -> None:
    proc = run_cli("profile", "--device", "neuron", "--store", str(tmp_path / "store"),
                   env={"PYTHONPATH": str(STAND_INS), "STAND_IN_NEURON_CORES": "0"})
    assert proc.returncode == 5
    assert proc.stderr.strip().startswith("reportgen: error: --device neuron: torch.neuron.is_available() is not True")
    assert not (tmp_path / "store").exists()


def test_older_torchneuron_without_neuronconfig_is_exit_5_before_any_variant(tmp_path: Path) -> None:
    proc = run_cli("profile", "--device", "neuron", "--store", str(tmp_path / "store"),
                   env={"PYTHONPATH": str(OLDER_STAND_IN)})
    assert proc.returncode == 5, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("reportgen: error: --device neuron: torch_neuronx 0.0.1+older-stand-in has no "
                           "profiling.NeuronConfig (an older TorchNeuron")
    assert proc.stdout == "" and not (tmp_path / "store").exists()


def test_xla_torch_neuronx_is_named_and_the_hint_gives_torchneuron(tmp_path: Path) -> None:
    """The DLAMI's aws_neuronx_venv_pytorch_2_9 holds the PyTorch/XLA torch-neuronx: importable, no profiling."""
    proc = run_cli("profile", "--device", "neuron", "--store", str(tmp_path / "store"),
                   env={"PYTHONPATH": str(XLA_STAND_IN)})
    assert proc.returncode == 5, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line == ("reportgen: error: --device neuron: torch_neuronx 2.9.0+xla-stand-in has no "
                    "torch_neuronx.profiling: it is the older PyTorch/XLA torch-neuronx (as in the DLAMI's "
                    "/opt/aws_neuronx_venv_pytorch_2_9), not TorchNeuron; install TorchNeuron (public beta since "
                    "Neuron 2.33, Trn2/Trn3, PyTorch >= 2.10): pip install \"torch-neuronx==2.14.*\" neuronx-cc nki "
                    "--extra-index-url https://pip.repos.neuron.amazonaws.com, or a Neuron DLAMI's "
                    "aws_neuron_venv_pytorch_2_14; or pick --device cuda / cpu")
    assert proc.stdout == "" and not (tmp_path / "store").exists()


def test_inspect_env_is_warned_about_in_the_environment(stand_in, neuron_tools: Path,  # type: ignore[no-untyped-def]
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_RT_INSPECT_ENABLE", "1")
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    monkeypatch.setenv("NEURON_RT_NUM_CORES", "1")
    backend = NeuronBackend()
    extras = backend.environment_extras()
    assert extras["warning"] is not None and extras["warning"].startswith("$NEURON_RT_INSPECT_ENABLE=1 is set")
    assert extras["NEURON_LOGICAL_NC_CONFIG"] == "1" and extras["instance_type"] == "trn2.3xlarge"
    assert extras["NEURON_RT_NUM_CORES"] == "1" and "NEURON_RT_VISIBLE_CORES" not in extras
    assert extras["eager_fusion"] is not None and extras["eager_fusion"].startswith("default (Adaptive Eager")
    # this process's $NEURON_LOGICAL_NC_CONFIG=1 wins over neuron-ls's LNC=2: one physical core's engines
    assert backend.compute_peak("bfloat16")[0] == 1e12
    assert "LNC=1 (from $NEURON_LOGICAL_NC_CONFIG)" in backend.measure_peak().source
    monkeypatch.setenv("NEURON_RT_INSPECT_ENABLE", "0")  # its documented default: off, no warning
    assert "warning" not in NeuronBackend().environment_extras()
    assert json.loads((neuron_tools / "neuron-ls-config.json").read_text())["accepts"] == [["-j"]]


def test_the_profiler_traces_the_core_this_process_uses(stand_in, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                        tmp_path: Path) -> None:
    """capture_enabled_for_nc names torch.neuron.current_device(), not a hard-coded "0"."""
    from reportgen.devices.neuron.device import _neuron_session

    monkeypatch.setenv("STAND_IN_NEURON_CURRENT", "1")
    with _neuron_session(tmp_path) as kwargs:
        assert kwargs["experimental_config"].kwargs["capture_enabled_for_nc"] == "1"
