"""AWS Trainium through TorchNeuron (``torch_neuronx``): backend, trace lanes, profile_output layout, versions.

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
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from reportgen.devices.backend import Backend, import_torch
from reportgen.devices.lanes import CategoryPattern, Lane, LaneRules
from reportgen.devices.spec import Device, DeviceSummary, EnvField, ImportLayout, TraceEvidence
from reportgen.errors import DeviceUnavailable
from reportgen.model import DeviceKind, DevicePeak, TimeBasis

INSTALL_HINT = ("install TorchNeuron (torch-neuronx) from AWS's Neuron package index or use a Neuron DLAMI; "
                "or pick --device cuda / cpu")
# Per-chip HBM bandwidth, vendor figures (shared/design/trainium-profiling-facts.md).
VENDOR_BANDWIDTH_BYTES_PER_S = {"trn1": 820 * 1024**3, "trn2": 2.9e12}
DMI_PRODUCT = Path("/sys/devices/virtual/dmi/id/product_name")
ARTIFACT_KINDS = {".neff": "neff", ".ntff": "ntff", ".pb": "pb"}
TRACE_GLOB = "*_pid_*/*/trace.json"
"""TorchNeuron's documented layout: profile_output/<instance-id>_pid_<pid>/<timestamp>/trace.json."""
EXPLORER_NAMES = ("neuron-explorer", "neuron-profile")
EXPLORER_TIMEOUT_S = 300
SUMMARY_KEYS = ("total_time", "hbm_read_bytes", "hbm_write_bytes", "mbu_estimated_percent")


class NeuronBackend(Backend):
    """Runs on NeuronCore 0 of a Trainium chip."""

    kind = DeviceKind.NEURON
    time_basis = TimeBasis.DEVICE

    def check_available(self) -> None:
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
        traces = sorted(out_dir.glob(TRACE_GLOB)) or sorted(out_dir.rglob("trace.json"))
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


# ---------------------------------------------------------------------------------------------
# Import: the profile_output/ folder and neuron-explorer's device summary.


def find_traces(folder: Path) -> list[Path]:
    """The ``trace.json`` files of a profile_output/ folder, one of its ``*_pid_*`` folders, or a capture folder."""
    found = sorted(folder.glob(TRACE_GLOB))
    if not found and "_pid_" in folder.name:
        found = sorted(folder.glob("*/trace.json"))
    if not found and (folder / "trace.json").is_file() and LAYOUT.artifacts(folder):
        found = [folder / "trace.json"]
    return [p for p in found if p.is_file()]


def device_summary(artifacts: tuple[Path, ...], which: Callable[[str], str | None] | None = None) -> DeviceSummary:
    """Run ``neuron-explorer view --output-format summary-json`` on the first .neff/.ntff pair, if possible."""
    which = which or shutil.which
    neff = next((a for a in artifacts if a.suffix.lower() == ".neff"), None)
    ntff = next((a for a in artifacts if a.suffix.lower() == ".ntff"), None)
    exe = next(((n, p) for n in EXPLORER_NAMES if (p := which(n))), None)
    if exe is None:
        return DeviceSummary({}, None, "neuron-explorer (or neuron-profile) is not installed, so there is no "
                                       "device summary (HBM bytes, bandwidth use); install the Neuron tools and "
                                       "re-import to get one")
    if neff is None or ntff is None:
        return DeviceSummary({}, None, f"{exe[0]} is installed but the folder lacks a .neff and .ntff pair: "
                                       "no device summary")
    fmt = "summary-json" if exe[0] == "neuron-explorer" else "json"
    cmd = [exe[1], "view", "--output-format", fmt, "-n", str(neff), "-s", str(ntff)]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=EXPLORER_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return DeviceSummary({}, None, f"{exe[0]} could not run ({type(exc).__name__}): no device summary")
    if proc.returncode != 0:
        err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:200]
        return DeviceSummary({}, None, f"{exe[0]} failed (exit {proc.returncode}: {err}): no device summary")
    try:
        data = json.loads(proc.stdout)
    except (ValueError, RecursionError):
        return DeviceSummary({}, None, f"{exe[0]} printed no JSON summary: no device summary")
    figures = {k: float(v) for k in SUMMARY_KEYS if (v := _find_key(data, k)) is not None}
    return DeviceSummary(figures, proc.stdout, f"device summary from {exe[0]} ({ntff.name}): "
                         + (", ".join(f"{k} {v:g}" for k, v in figures.items()) or "none of "
                            + ", ".join(SUMMARY_KEYS) + " found (its schema may have changed)"))


def _find_key(data: Any, key: str, depth: int = 0) -> float | None:
    """The first numeric value under ``key`` anywhere in ``data`` (the summary schema varies by SDK)."""
    if depth > 20:
        return None
    if isinstance(data, dict):
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        items = list(data.values())
    elif isinstance(data, list):
        items = data
    else:
        return None
    for child in items:
        found = _find_key(child, key, depth + 1)
        if found is not None:
            return found
    return None


LAYOUT = ImportLayout(
    name="neuron-profile-output",
    description=f"TorchNeuron profile_output/ ({TRACE_GLOB})",
    find_traces=find_traces,
    artifact_suffixes=tuple(ARTIFACT_KINDS),
    summarize=device_summary,
)

DEVICE = Device(
    kind=DeviceKind.NEURON,
    title="AWS Trainium (Neuron)",
    lanes=LaneRules(
        runtime_categories=frozenset({"nrt"}),
        patterns=(
            CategoryPattern(Lane.DEVICE, contains="neuron", and_any=("device", "hw", "hardware", "kernel", "exec"),
                            work=True),
            CategoryPattern(Lane.RUNTIME, contains="neuron"),
            CategoryPattern(Lane.RUNTIME, prefix="nrt"),
        ),
    ),
    evidence=TraceEvidence(category_contains=("neuron", "privateuse1"), category_prefixes=("nrt",),
                           device_name_contains=("neuron", "trainium"), runtime_name_prefixes=("nrt",)),
    evidence_rank=10,
    environment_fields=(EnvField("torch_neuronx_version", "torch-neuronx"), EnvField("neuronx_cc_version", "neuronx-cc")),
    backend=NeuronBackend,
    auto_rank=10,
    import_layout=LAYOUT,
)
