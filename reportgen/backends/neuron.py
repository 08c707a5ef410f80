"""The Trainium backend through TorchNeuron (``torch_neuronx``), as the Neuron SDK documents it.

NeuronConfig is handed to ``torch.profiler.profile`` as ``experimental_config`` and
NeuronProfiler.export_trace as ``on_trace_ready``; activities CPU + PrivateUse1; sync with
``torch.neuron.synchronize()``; compile with ``backend="neuron"``. The profiler writes
``profile_output/<instance>_pid_<pid>/<timestamp>/`` holding trace.json, .neff, .ntff, .pb.

Not yet run on real Trainium hardware: tested against a stand-in torch_neuronx that records
the calls (tests/stand_ins/). See docs/profiling.md.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from reportgen.backends.base import Backend
from reportgen.errors import DeviceUnavailable
from reportgen.model import DeviceKind, DevicePeak, TimeBasis

INSTALL_HINT = ("install TorchNeuron (torch-neuronx) from AWS's Neuron package index or use a Neuron DLAMI; "
                "or pick --device cuda / cpu")
# Per-chip HBM bandwidth, vendor figures (shared/design/trainium-profiling-facts.md).
VENDOR_BANDWIDTH_BYTES_PER_S = {"trn1": 820 * 1024**3, "trn2": 2.9e12}
DMI_PRODUCT = Path("/sys/devices/virtual/dmi/id/product_name")
ARTIFACT_KINDS = {".neff": "neff", ".ntff": "ntff", ".pb": "pb"}


class NeuronBackend(Backend):
    """Runs on NeuronCore 0 of a Trainium chip."""

    kind = DeviceKind.NEURON
    time_basis = TimeBasis.DEVICE

    def check_available(self) -> None:
        from reportgen.backends import import_torch

        torch = import_torch()
        try:
            importlib.import_module("torch_neuronx")
            importlib.import_module("torch_neuronx.profiling")
        except ImportError as exc:
            raise DeviceUnavailable(f"--device neuron: torch_neuronx cannot be imported ({exc}); {INSTALL_HINT}") from None
        try:
            torch.device("neuron")
        except RuntimeError as exc:
            raise DeviceUnavailable(f"--device neuron: torch has no 'neuron' device ({exc}); {INSTALL_HINT}") from None

    def torch_device(self) -> Any:
        import torch

        return torch.device("neuron")

    def synchronize(self) -> None:
        import torch

        torch.neuron.synchronize()  # type: ignore[attr-defined]  # registered by torch_neuronx

    def profiler_activities(self) -> list[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        try:
            return torch.compile(fn, backend="neuron")
        except Exception as exc:  # torch._dynamo.exc.InvalidBackend when torch_neuronx did not register it
            if type(exc).__name__ == "InvalidBackend":
                raise DeviceUnavailable(f"torch.compile(backend='neuron') is not registered; {INSTALL_HINT}") from None
            raise

    def device_name(self) -> str:
        instance = _instance_type()
        return f"AWS Trainium ({instance}), NeuronCore 0" if instance else "AWS Trainium, NeuronCore 0"

    def measure_peak(self) -> DevicePeak:
        override = self.peak_override()
        if override:
            return override
        instance = _instance_type() or ""
        family = instance.split(".")[0]
        bw = VENDOR_BANDWIDTH_BYTES_PER_S.get(family)
        if bw is None:
            return DevicePeak(None, None, f"unknown for instance type {instance or '(not found)'}; "
                              "set $REPORTGEN_PEAK_BANDWIDTH_GBPS")
        return DevicePeak(bw, None, f"vendor figure for one {family} chip (HBM); a single NeuronCore may reach "
                          "only its share")

    def profile_session(self, out_dir: Path) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return _neuron_session(out_dir)

    def collect_artifacts(self, out_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
        traces = sorted(out_dir.glob("*_pid_*/*/trace.json")) or sorted(out_dir.rglob("trace.json"))
        trace = traces[-1] if traces else None
        folder = trace.parent if trace else out_dir
        found = [(p, ARTIFACT_KINDS[p.suffix]) for p in sorted(folder.rglob("*")) if p.suffix in ARTIFACT_KINDS]
        return (trace, found)

    def environment_extras(self) -> dict[str, str | None]:
        module = importlib.import_module("torch_neuronx")
        version = getattr(module, "__version__", None) or _dist_version("torch-neuronx")
        return {"torch_neuronx_version": version, "neuronx_cc_version": _dist_version("neuronx-cc")}


@contextlib.contextmanager
def _neuron_session(out_dir: Path) -> Iterator[dict[str, Any]]:
    """NeuronConfig + NeuronProfiler wired into torch.profiler as the SDK documents."""
    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

    config = NeuronConfig(
        modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME],
        profile_output_dir=str(out_dir),
        capture_enabled_for_nc="0",
        max_events_per_nc=1_000_000,
    )
    profiler = NeuronProfiler(config)
    yield {"experimental_config": config, "on_trace_ready": profiler.export_trace}


def _instance_type() -> str | None:
    try:
        text = DMI_PRODUCT.read_text().strip()
    except OSError:
        return None
    return text if text.startswith("trn") else None


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
