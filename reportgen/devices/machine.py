"""``reportgen machine``: what reportgen detects here and what a run here is compared against, each with its source.

Nothing is measured and torch is not imported: facts come from the system and the device tools
(``/proc``, sysfs, ``nvidia-smi``, ``neuron-ls`` / ``neuron-monitor``), figures from the vendors'
documents. Where a figure is measured by each profile run instead (a copy benchmark, a matmul), it
says so. What cannot be found is named with the reason, never left out.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from reportgen import __version__
from reportgen.devices import cpu, cuda
from reportgen.devices.host import cpu_model, dist_version
from reportgen.devices.neuron import chips, hardware
from reportgen.model.run import DeviceKind

MACHINE_SCHEMA_VERSION = 1
DTYPES = ("bfloat16", "float16", "float32")
MEASURED_AT_PROFILE = "measured by each profile run on this machine, not here"


@dataclass(frozen=True)
class Fact:
    """One thing reportgen knows about this machine: its value (None: not found) and where it comes from."""

    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class Roof:
    """A compute roof for one dtype (and engine, on Trainium), in FLOP/s, with its source."""

    dtype: str
    engine: str
    flops_per_s: float | None
    source: str


@dataclass(frozen=True)
class MachineReport:
    """Everything ``reportgen machine`` prints."""

    device: str
    facts: tuple[Fact, ...]
    bandwidth_bytes_per_s: float | None
    bandwidth_source: str
    roofs: tuple[Roof, ...]

    def as_json(self) -> dict[str, object]:
        """The report as versioned JSON (``--json``)."""
        return {"schema_version": MACHINE_SCHEMA_VERSION, "device": self.device,
                "facts": {f.name: {"value": f.value, "source": f.source} for f in self.facts},
                "bandwidth_ceiling": {"bytes_per_s": self.bandwidth_bytes_per_s, "source": self.bandwidth_source},
                "compute_roofs": [{"dtype": r.dtype, "engine": r.engine, "flops_per_s": r.flops_per_s,
                                   "source": r.source} for r in self.roofs]}


Which = Callable[[str], "str | None"]


def auto_device(which: Which = shutil.which) -> DeviceKind:
    """The device ``--device auto`` describes: Neuron where its tools are installed, else CUDA where nvidia-smi is,
    else the CPU (the order ``reportgen profile`` tries devices in)."""
    if which("neuron-ls"):
        return DeviceKind.NEURON
    if which("nvidia-smi"):
        return DeviceKind.CUDA
    return DeviceKind.CPU


def describe(device: DeviceKind, environ: Mapping[str, str] = os.environ) -> MachineReport:
    """The report for ``device`` on this machine."""
    common = _software_facts()
    if device is DeviceKind.NEURON:
        return _neuron(common, environ)
    if device is DeviceKind.CUDA:
        return _cuda(common, environ)
    return _cpu(common)


def _software_facts() -> tuple[Fact, ...]:
    torch = dist_version("torch")
    return (Fact("reportgen", __version__, "installed"),
            Fact("python", sys.version.split()[0], "this interpreter"),
            Fact("platform", platform.platform(), "platform.platform()"),
            Fact("torch", torch, "installed distribution" if torch else "not found: torch is not installed "
                 "(reportgen profile needs it: pip install 'reportgen[profile]')"))


def _cpu(common: tuple[Fact, ...]) -> MachineReport:
    levels = cpu.cache_levels()
    facts = (Fact("cpu", cpu_model(), "/proc/cpuinfo" if cpu_model() else "not found: no model name reported"),
             Fact("logical_cpus", str(os.cpu_count()) if os.cpu_count() else None, "os.cpu_count()"),
             Fact("caches", ", ".join(f"{c.name} {c.size_bytes // 1024} KiB" for c in levels) or None,
                  "sysfs (/sys/devices/system/cpu/cpu0/cache)" if levels else "not found: sysfs lists no caches"))
    roof = Roof("any", "cores", None, f"{MEASURED_AT_PROFILE} (a matmul of the run's dtype)")
    return MachineReport(DeviceKind.CPU.value, common + facts, None,
                         f"{MEASURED_AT_PROFILE} (copies at several working-set sizes, one ceiling per cache level)",
                         (roof,))


def _cuda(common: tuple[Fact, ...], environ: Mapping[str, str]) -> MachineReport:
    gpu = _nvidia_smi_gpu()
    name = gpu.get("name")
    facts = tuple(Fact(k, v, "nvidia-smi" if v else f"not found: {gpu.get('_why', 'nvidia-smi did not report it')}")
                  for k, v in (("gpu", name), ("memory_total", gpu.get("memory.total")),
                               ("driver_version", gpu.get("driver_version")), ("gpu_uuid", gpu.get("uuid")),
                               ("compute_mode", gpu.get("compute_mode")), ("mig_mode", gpu.get("mig.mode.current"))))
    visible = Fact("CUDA_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES"),
                   "environment" if "CUDA_VISIBLE_DEVICES" in environ else "not set: every GPU visible, the first used")
    roofs = tuple(Roof(d, "dense", *cuda.vendor_compute_roof(name or "(unknown GPU)", d)) for d in DTYPES)
    return MachineReport(DeviceKind.CUDA.value, common + facts + (visible,), None,
                         f"{MEASURED_AT_PROFILE} (a 2 GiB device-to-device copy)", roofs)


SMI_QUERY = ("name", "memory.total", "driver_version", "uuid", "compute_mode", "mig.mode.current")


def _nvidia_smi_gpu() -> dict[str, str]:
    """The first visible GPU's fields as nvidia-smi prints them; ``_why`` when it cannot say."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"_why": "nvidia-smi is not on PATH"}
    try:
        out = subprocess.run([exe, f"--query-gpu={','.join(SMI_QUERY)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"_why": f"nvidia-smi failed ({type(exc).__name__})"}
    values = [v.strip() for v in (out.strip().splitlines() or [""])[0].split(",")]
    if len(values) != len(SMI_QUERY):
        return {"_why": "nvidia-smi printed no GPU"}
    return {k: v for k, v in zip(SMI_QUERY, values, strict=True) if v not in ("", "[N/A]", "N/A")}


def _neuron(common: tuple[Fact, ...], environ: Mapping[str, str]) -> MachineReport:
    ls = hardware.detect()
    found = chips.chip_for(ls.instance_type, ls.device_type)
    lnc = chips.resolve_lnc(found[1] if found else None, ls.lnc, ls.lnc_source, environ.get(hardware.LNC_ENV))
    missing = f"not found: {ls.note}"

    def reported(name: str, value: object) -> Fact:
        return Fact(name, None if value is None else str(value), ls.note if value is not None else missing)

    facts = (reported("instance_type", ls.instance_type),
             Fact("chip", found[1].name if found else None,
                  f"the instance family ({found[0]})" if found else "not found: no documented Trainium family"),
             Fact("logical_neuroncore_config", str(lnc.value) if lnc.value is not None else None, lnc.text),
             reported("neuron_devices", ls.device_count), reported("neuroncores_per_device", ls.cores_per_device),
             reported("neuroncores_total", ls.cores_total), reported("hbm_bytes_per_device", ls.hbm_bytes_per_device),
             *(Fact(k, environ.get(k), "environment" if k in environ else "not set: the runtime gives this process "
                    "every NeuronCore") for k in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")),
             *(Fact(d, dist_version(d), "installed distribution" if dist_version(d) else f"not found: {d} is not "
                    "installed") for d in ("torch-neuronx", "neuronx-cc")),
             *(Fact(t, shutil.which(t), "PATH" if shutil.which(t) else f"not found: {t} is not on PATH")
               for t in ("neuron-ls", "neuron-monitor", "neuron-explorer")))
    ceiling = chips.core_ceiling(ls.instance_type, lnc, ls.device_type)
    roofs: list[Roof] = []
    for dtype in DTYPES:
        for r in chips.engine_roofs(ls.instance_type, lnc, dtype, ls.device_type):
            roofs.append(Roof(dtype, r.engine, r.flops_per_s, r.source))
        share = chips.chip_share(ls.instance_type, lnc, dtype, ls.device_type)
        if share is not None:
            roofs.append(Roof(dtype, share.engine, share.flops_per_s, share.source))
    if not roofs:
        roofs.append(Roof("any", "any", None, chips.core_compute_roof(ls.instance_type, lnc, "bfloat16",
                                                                      ls.device_type)[1]))
    return MachineReport(DeviceKind.NEURON.value, common + facts, ceiling.bandwidth_bytes_per_s, ceiling.source,
                         tuple(roofs))


def report_lines(report: MachineReport) -> list[str]:
    """The report for a terminal: one fact per line with its source in brackets, then the ceiling and the roofs."""
    width = max(len(f.name) for f in report.facts)
    lines = [f"device: {report.device}"]
    lines += [f"  {f.name:<{width}}  {f.value if f.value is not None else '(not found)'}  [{f.source}]"
              for f in report.facts]
    bw = f"{report.bandwidth_bytes_per_s / 1e12:.4g} TB/s" if report.bandwidth_bytes_per_s else "(none here)"
    lines.append(f"bandwidth ceiling: {bw}  [{report.bandwidth_source}]")
    lines.append("compute roofs:")
    for r in report.roofs:
        flops = f"{r.flops_per_s / 1e12:.4g} TFLOP/s" if r.flops_per_s else "(none)"
        lines.append(f"  {r.dtype} {r.engine}: {flops}  [{r.source}]")
    return lines
