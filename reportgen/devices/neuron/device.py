"""AWS Trainium through TorchNeuron (``torch_neuronx``): backend, trace lanes, profile_output layout, versions.

NeuronConfig is handed to ``torch.profiler.profile`` as ``experimental_config`` and
NeuronProfiler.export_trace as ``on_trace_ready``; activities CPU + PrivateUse1; sync with
``torch.neuron.synchronize()``; compile with ``backend="neuron"``. The profiler writes
``profile_output/<instance>_pid_<pid>/<timestamp>/`` holding trace.json, .neff, .ntff, .pb;
neuron-explorer reads that session folder for the device's own figures (reportgen/neuron/).

Not yet run on real Trainium hardware: tested against a stand-in torch_neuronx that records
the calls, and fake Neuron tools that print what the real ones printed on trn1, trn2 and inf2
(tests/stand_ins/, tests/data/neuron/). See docs/profiling.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.metadata
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from reportgen.devices.backend import Backend, import_torch
from reportgen.devices.host import dist_version
from reportgen.devices.lanes import CategoryPattern, Lane, LaneRules
from reportgen.devices.neuron import chips, explorer, hardware, perfetto, versions
from reportgen.devices.spec import Device, DeviceSummary, EnvField, ImportLayout, TraceEvidence, first_link
from reportgen.errors import DeviceUnavailable
from reportgen.model.evidence import VariantEvidence
from reportgen.model.run import DeviceEvidence, DeviceKind, DevicePeak, TimeBasis

INSTALL_HINT = ("install TorchNeuron (public beta since Neuron 2.33, Trn2/Trn3, PyTorch >= 2.10): pip install "
                "\"torch-neuronx==2.14.*\" neuronx-cc nki --extra-index-url https://pip.repos.neuron.amazonaws.com, "
                "or a Neuron DLAMI's aws_neuron_venv_pytorch_2_14; or pick --device cuda / cpu")
XLA_VENV = "/opt/aws_neuronx_venv_pytorch_2_9"
"""A DLAMI venv whose torch-neuronx is the PyTorch/XLA package: importable, but no torch_neuronx.profiling."""
ARTIFACT_KINDS = {".neff": "neff", ".ntff": "ntff", ".pb": "pb"}
NEFF_CACHE_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
NEFF_CACHE_DEFAULT = "/tmp/neff_cache"  # TorchNeuron's documented default
EAGER_FUSION_ENV = "REPORTGEN_NEURON_EAGER_FUSION"
"""``off``: call torch.use_deterministic_algorithms(True), which the SDK says turns Adaptive Eager Execution off."""
TRACE_GLOB = "*_pid_*/*/trace.json"
"""TorchNeuron's documented layout: profile_output/<instance-id>_pid_<pid>/<timestamp>/trace.json."""
TRACE_NAMES = ("trace.json", "neuron_framework_trace_rank_*.json")
"""The framework trace's names: trace.json, and the alternative the SDK's neuron-explorer troubleshooting page
names (``neuron_framework_trace_rank_<N>.json``, to be put in the ``<instance-id>_pid_<pid>/`` folder)."""


NEURON_MEMORY_UNAVAILABLE = (
    "unavailable on neuron: the profiler's memory events do not cover NeuronCore memory, and torch-neuronx's own "
    "memory statistics (its memory-profiling guide; read after torch.neuron.synchronize()) are not read by reportgen yet")


class NeuronBackend(Backend):
    """Runs on NeuronCore 0 of a Trainium chip."""

    kind = DeviceKind.NEURON
    time_basis = TimeBasis.DEVICE  # per variant it becomes CPU when trace.json holds no device events

    def __init__(self) -> None:
        self._neuron_ls: hardware.NeuronLs | None = None

    def check_available(self) -> None:
        torch = import_torch()
        try:
            module = importlib.import_module("torch_neuronx")
        except ImportError as exc:
            raise DeviceUnavailable(f"device neuron: torch_neuronx cannot be imported ({exc}); {INSTALL_HINT}",
                                    field="device") from None
        _check_profiler(module)
        is_available = getattr(getattr(torch, "neuron", None), "is_available", None)
        if is_available is None or not is_available():
            raise DeviceUnavailable("device neuron: torch.neuron.is_available() is not True (no NeuronCore visible "
                                    f"to this process); run on a Trn2/Trn3 instance; {INSTALL_HINT}", field="device")
        if _eager_fusion_off():
            torch.use_deterministic_algorithms(True)

    def torch_device(self) -> Any:
        import torch

        return torch.device("neuron")

    def synchronize(self) -> None:
        import torch

        torch.neuron.synchronize()  # type: ignore[attr-defined]  # registered by torch_neuronx

    def profiler_activities(self) -> list[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

    memory_device_type = None

    def memory_unavailable(self) -> str | None:
        return NEURON_MEMORY_UNAVAILABLE

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        try:
            return torch.compile(fn, backend="neuron")
        except Exception as exc:  # torch._dynamo.exc.InvalidBackend when torch_neuronx did not register it
            if type(exc).__name__ == "InvalidBackend":
                raise DeviceUnavailable(f"torch.compile(backend='neuron') is not registered; {INSTALL_HINT}") from None
            raise

    def neuron_ls(self) -> hardware.NeuronLs:
        """``neuron-ls -j`` (instance type, LNC, devices), with neuron-monitor where it lacks the instance type; once."""
        if self._neuron_ls is None:
            self._neuron_ls = hardware.detect()
        return self._neuron_ls

    def _lnc(self) -> chips.Lnc:
        ls = self.neuron_ls()
        found = chips.chip_for(ls.instance_type, ls.device_type)
        return chips.resolve_lnc(found[1] if found else None, ls.lnc, ls.lnc_source, os.environ.get(hardware.LNC_ENV))

    def device_name(self) -> str:
        ls = self.neuron_ls()
        found = chips.chip_for(ls.instance_type, ls.device_type)
        chip = found[1].name if found else "Trainium"
        where = ", ".join(x for x in (ls.instance_type, f"LNC={ls.lnc}" if ls.lnc is not None else None) if x)
        return f"AWS {chip}{f' ({where})' if where else ''}, NeuronCore {current_core()}"

    def measure_peak(self) -> DevicePeak:
        override = self.peak_override()
        if override:
            return override
        ls = self.neuron_ls()
        return chips.core_ceiling(ls.instance_type, self._lnc(), ls.device_type)

    def compute_peak(self, dtype: str) -> tuple[float | None, str]:
        """The Vector Engine's roof (RMSNorm's engine), every other engine's listed beside it (chips.py)."""
        ls = self.neuron_ls()
        return chips.core_compute_roof(ls.instance_type, self._lnc(), dtype, ls.device_type)

    def profile_session(self, out_dir: Path) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return _neuron_session(out_dir)

    def collect_artifacts(self, out_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
        traces = find_traces(out_dir) or sorted(p for name in TRACE_NAMES for p in out_dir.rglob(name)
                                                if first_link(out_dir, p) is None)
        trace = traces[-1] if traces else None
        folder = trace.parent if trace else out_dir
        found = [(p, ARTIFACT_KINDS[p.suffix]) for p in sorted(folder.rglob("*"))
                 if p.suffix in ARTIFACT_KINDS and first_link(folder, p) is None]  # never a linked file
        return (trace, found)

    def variant_evidence(self, out_dir: Path, steps: int, device_events_per_step: int | None) -> VariantEvidence:
        session = explorer.session_dir(out_dir)
        basis = None if device_events_per_step else TimeBasis.CPU
        fallbacks = _fallback_ops()
        if session is None:
            source = explorer.timing_source(None, device_events_per_step,
                                            why_none="the capture wrote no session folder with an .ntff")
            return VariantEvidence(DeviceEvidence(source, profiled_steps=steps), basis, None, fallbacks)
        scratch = out_dir / "neuron-explorer"
        found = explorer.explore(session, steps, scratch)
        files = []
        for name, raw in found.raw.items():
            path = scratch / name
            if not path.is_file():
                path.write_bytes(raw)
            files.append((path, "neuron-explorer"))
        exe = shutil.which(explorer.EXPLORER)
        if exe is not None:  # without the tool, explore's note already says so
            exported = perfetto.export(exe, session, scratch, subprocess.run)
            files.extend((p, perfetto.PFTRACE_KIND) for p in exported.files)
            found = dataclasses.replace(found, notes=(*found.notes, *exported.notes))
        neffs = len({p.name for p in session.glob("*.neff")})
        device = found.evidence(explorer.timing_source(found, device_events_per_step))
        return VariantEvidence(device, basis, neffs, fallbacks, tuple(files))

    def environment_extras(self) -> dict[str, str | None]:
        module = importlib.import_module("torch_neuronx")
        version = getattr(module, "__version__", None) or dist_version("torch-neuronx")
        extras: dict[str, str | None] = {"torch_neuronx_version": version,
                                         "neuronx_cc_version": dist_version("neuronx-cc")}
        extras.update(hardware.environment_facts(self.neuron_ls(), tool_versions=versions.read_versions()))
        extras["eager_fusion"] = (f"off (${EAGER_FUSION_ENV}=off: torch.use_deterministic_algorithms(True))"
                                  if _eager_fusion_off() else
                                  f"default (Adaptive Eager Execution may fuse queued eager ops; "
                                  f"${EAGER_FUSION_ENV}=off turns it off)")
        extras["neff_cache_dir"] = _neff_cache_dir()
        return extras


def _check_profiler(module: Any) -> None:
    """Refuse a torch_neuronx without the documented profiler: the PyTorch/XLA package, or an older TorchNeuron."""
    version = getattr(module, "__version__", None) or dist_version("torch-neuronx") or "(unknown version)"
    try:
        profiling = importlib.import_module("torch_neuronx.profiling")
    except ModuleNotFoundError as exc:
        if exc.name != "torch_neuronx.profiling":
            raise DeviceUnavailable(f"device neuron: torch_neuronx.profiling cannot be imported ({exc}); "
                                    f"{INSTALL_HINT}", field="device") from None
        raise DeviceUnavailable(f"device neuron: torch_neuronx {version} has no torch_neuronx.profiling: it is the "
                                f"older PyTorch/XLA torch-neuronx (as in the DLAMI's {XLA_VENV}), not TorchNeuron; "
                                f"{INSTALL_HINT}", field="device") from None
    except ImportError as exc:
        raise DeviceUnavailable(f"device neuron: torch_neuronx.profiling cannot be imported ({exc}); {INSTALL_HINT}",
                                field="device") from None
    if not hasattr(profiling, "NeuronConfig"):
        raise DeviceUnavailable(f"device neuron: torch_neuronx {version} has no profiling.NeuronConfig (an older "
                                "TorchNeuron, or the PyTorch/XLA package, whose profiler reportgen does not drive); "
                                f"{INSTALL_HINT}", field="device")


@contextlib.contextmanager
def _neuron_session(out_dir: Path) -> Iterator[dict[str, Any]]:
    """NeuronConfig + NeuronProfiler wired into torch.profiler as the SDK documents."""
    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

    config = NeuronConfig(
        modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME],
        profile_output_dir=str(out_dir),
        capture_enabled_for_nc=str(current_core()),
        max_events_per_nc=1_000_000,
        neff_cache_dir=_neff_cache_dir(),  # without it the .neff files may be missing from the session (CAP:305-323)
    )
    profiler = NeuronProfiler(config)
    yield {"experimental_config": config, "on_trace_ready": profiler.export_trace}


def current_core() -> int:
    """The NeuronCore this process's tensors go to, in the process's own numbering (``torch.neuron.current_device()``
    where TorchNeuron has it, as public TorchNeuron code calls it; else 0): the one core the profiler is asked to
    trace. Under NEURON_RT_VISIBLE_CORES (``ab`` gives each worker one core) the process numbers its cores from 0;
    that ``capture_enabled_for_nc`` takes this numbering is assumed, not documented."""
    import torch

    get = getattr(getattr(torch, "neuron", None), "current_device", None)
    try:
        index = int(get()) if callable(get) else 0
    except (TypeError, ValueError, RuntimeError):
        index = 0
    return max(index, 0)


def _neff_cache_dir() -> str:
    """Where TorchNeuron caches compiled NEFFs: $TORCH_NEURONX_NEFF_CACHE_DIR, else its default."""
    return os.environ.get(NEFF_CACHE_ENV) or NEFF_CACHE_DEFAULT


def _eager_fusion_off() -> bool:
    value = os.environ.get(EAGER_FUSION_ENV, "").strip().lower()
    if value and value not in ("off", "on"):
        from reportgen.errors import UsageError

        raise UsageError(f"${EAGER_FUSION_ENV}={value!r}: expected 'off' (or 'on', the default)")
    return value == "off"


def _fallback_ops() -> tuple[str, ...] | None:
    """``torch_neuronx.get_fallback_ops()`` (ops that ran on the CPU), where this TorchNeuron has it."""
    module = importlib.import_module("torch_neuronx")
    get = getattr(module, "get_fallback_ops", None)
    if get is None:
        return None
    return tuple(sorted({str(op) for op in get()}))


# ---------------------------------------------------------------------------------------------
# Import: the profile_output/ folder and neuron-explorer's device summary.


def find_traces(folder: Path) -> list[Path]:
    """The framework traces (TRACE_NAMES) of a profile_output/ folder, one of its ``*_pid_*`` folders, or a capture
    folder: in ``<instance>_pid_<pid>/<timestamp>/`` (TorchNeuron) or ``<instance>_pid_<pid>/`` (inspect capture)."""
    found = _named(folder, "*_pid_*/*/") or _named(folder, "*_pid_*/", with_artifacts=True)
    if not found and "_pid_" in folder.name:
        found = _named(folder, "*/") or _named(folder, "", with_artifacts=True)
    if not found:
        found = _named(folder, "", with_artifacts=True)
    return found


def _named(folder: Path, prefix: str, with_artifacts: bool = False) -> list[Path]:
    """Files named as a framework trace under ``folder/prefix`` (only beside Neuron files if ``with_artifacts``)."""
    found = sorted(p for name in TRACE_NAMES for p in folder.glob(prefix + name)
                   if p.is_file() and first_link(folder, p) is None)  # glob enters linked folders: skip them
    with_trace_json = {p.parent for p in found if p.name == TRACE_NAMES[0]}
    return [p for p in found if (p.name == TRACE_NAMES[0] or p.parent not in with_trace_json)
            and (not with_artifacts or LAYOUT.artifacts(p.parent))]


def device_summary(trace: Path, steps: int, scratch: Path) -> DeviceSummary:
    """neuron-explorer on the capture session holding ``trace`` (reportgen/devices/neuron/explorer.py), as the import keeps it."""
    session = explorer.session_dir(trace.parent)
    if session is None:
        def no_session(device_events: int | None) -> DeviceEvidence:
            return DeviceEvidence(explorer.timing_source(None, device_events, imported=True,
                                                         why_none="no .ntff beside this trace.json"))

        return DeviceSummary({}, (), no_session, "neuron-explorer")
    found = explorer.explore(session, steps, scratch)

    def evidence(device_events: int | None) -> DeviceEvidence:
        return found.evidence(explorer.timing_source(found, device_events, imported=True))

    return DeviceSummary(dict(found.raw), found.notes, evidence, "neuron-explorer")


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
