"""What the Neuron tools say about this machine: ``neuron-ls``, ``neuron-monitor``, and the NEURON_* settings.

Read as the real tools print it (captures by others on trn1, trn2 and inf2 in tests/data/neuron/, and
the SDK's ``tools/neuron-sys-tools/`` pages): ``neuron-ls -j`` prints a top-level JSON ARRAY, one
object per Neuron device, snake_case keys (``nc_count``, ``memory_size`` in bytes, and on recent
tools ``instance_type`` / ``logical_neuroncore_config`` inside every element); ``neuron-monitor``
streams one JSON report per period whose ``instance_info`` and ``neuron_hardware_info`` are always
present. The chips' figures are in chips.py. I/O only in the ``read_*`` functions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reportgen.devices.neuron.cores import NUM_CORES_ENV, VISIBLE_CORES_ENV

NEURON_LS_TIMEOUT_S = 60
NEURON_MONITOR_TIMEOUT_S = 15
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
INSPECT_ENV = "NEURON_RT_INSPECT_ENABLE"
CORE_ENVS = (VISIBLE_CORES_ENV, NUM_CORES_ENV)
"""Which NeuronCores this process may take: recorded because one process owns the cores it initialises."""
MONITOR_CONFIG = {"period": "1s", "system_metrics": [{"type": "memory_info"}]}
"""The smallest documented neuron-monitor configuration; instance_info and neuron_hardware_info come regardless."""
_FALSE = ("", "0", "false", "no", "off")

Which = Callable[[str], "str | None"]


@dataclass(frozen=True)
class NeuronLs:
    """The instance and its Neuron devices as the tools reported them (None: not reported), and what was missing."""

    instance_type: str | None
    lnc: int | None  # logical_neuroncore_config
    device_count: int | None
    cores_per_device: int | None  # nc_count: the NeuronCores a device exposes (logical ones under LNC)
    cores_total: int | None
    hbm_bytes_per_device: int | None  # memory_size
    raw: bytes | None  # neuron-ls's output as printed
    note: str
    missing: tuple[str, ...] = ()
    device_type: str | None = None  # neuron-monitor's neuron_device_type; neuron-ls has none
    lnc_source: str = "neuron-ls"


def _nothing(raw: bytes | None, note: str) -> NeuronLs:
    return NeuronLs(None, None, None, None, None, None, raw, note,
                    ("instance_type", "logical_neuroncore_config", "nc_count", "memory_size"))


def parse_neuron_ls(raw: bytes, command: str = "neuron-ls -j") -> NeuronLs:
    """The typed record of what ``neuron-ls -j`` (a JSON array of devices) or ``--output-format json`` printed."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return _nothing(raw, f"{command} printed no JSON")
    top: dict[str, Any] = {}
    if isinstance(data, list):
        devices = data
    elif isinstance(data, dict):
        # Neuron 2.34's `neuron-ls --output-format json` is documented to carry the instance fields at the top
        # level beside a device list. No real sample of it was found: the device list is whichever top-level
        # value is a list of objects, and the instance fields are read at the top level and in each device.
        top = data
        devices = next((v for v in data.values() if isinstance(v, list) and v and isinstance(v[0], dict)), [])
    else:
        return _nothing(raw, f"{command} printed a JSON {type(data).__name__}, not a list of Neuron devices")
    devices = [d for d in devices if isinstance(d, dict)]
    instance = _same([top.get("instance_type"), *(d.get("instance_type") for d in devices)], str)
    lnc = _same([top.get("logical_neuroncore_config"), *(d.get("logical_neuroncore_config") for d in devices)], int)
    cores = [_int(d.get("nc_count")) for d in devices]
    per_device = _same(list(cores), int)
    total = sum(c for c in cores if c is not None) if devices and None not in cores else None
    memory = _same([d.get("memory_size") for d in devices], int)
    found = {"instance_type": instance, "logical_neuroncore_config": lnc, "nc_count": per_device,
             "memory_size": memory}
    missing = tuple(k for k, v in found.items() if v is None)
    note = f"read from {command}: {len(devices)} Neuron device(s)" + (f"; not given: {', '.join(missing)}"
                                                                      if missing else "")
    return NeuronLs(instance, lnc, len(devices), per_device, total, memory, raw, note, missing)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _same(values: list[Any], kind: type) -> Any:
    """The one value all the non-empty ``values`` agree on (as ``kind``), else None (absent or differing)."""
    cleaned = {(_int(v) if kind is int else (v.strip() if isinstance(v, str) else None)) for v in values
               if v is not None and v != ""}
    cleaned.discard(None)
    return cleaned.pop() if len(cleaned) == 1 else None


def read_neuron_ls(which: Which | None = None) -> NeuronLs:
    """Run ``neuron-ls -j``, and ``neuron-ls --output-format json`` (Neuron 2.34's replacement) where -j fails."""
    exe = (which or shutil.which)("neuron-ls")
    if exe is None:
        return _nothing(None, "neuron-ls is not installed (it comes with the Neuron tools)")
    problems = []
    for flags in (["-j"], ["--output-format", "json"]):
        command = " ".join(["neuron-ls", *flags])
        try:
            proc = subprocess.run([exe, *flags], capture_output=True, timeout=NEURON_LS_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return _nothing(None, f"{command} could not run ({type(exc).__name__})")
        if proc.returncode == 0:
            return parse_neuron_ls(proc.stdout, command)
        err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:200]
        problems.append(f"{command} failed (exit {proc.returncode}: {err})")
    return _nothing(None, "; ".join(problems))


@dataclass(frozen=True)
class MonitorInfo:
    """``instance_info`` and ``neuron_hardware_info`` of one neuron-monitor report, and what it lacked."""

    instance_type: str | None
    device_type: str | None
    lnc: int | None
    device_count: int | None
    cores_per_device: int | None
    hbm_bytes_per_device: int | None
    note: str
    missing: tuple[str, ...] = ()


MONITOR_FIELDS = (("instance_info", "instance_type"), ("neuron_hardware_info", "neuron_device_type"),
                  ("neuron_hardware_info", "logical_neuroncore_config"),
                  ("neuron_hardware_info", "neuron_device_count"),
                  ("neuron_hardware_info", "neuroncore_per_device_count"),
                  ("neuron_hardware_info", "neuron_device_memory_size"))


def parse_neuron_monitor(raw: bytes) -> MonitorInfo:
    """One neuron-monitor report (one JSON object; of a stream of them, the first line)."""
    data = _first_object(raw)
    if data is None:
        return MonitorInfo(None, None, None, None, None, None, "neuron-monitor printed no JSON report",
                           tuple(f"{group}.{key}" for group, key in MONITOR_FIELDS))
    sections = {g: s if isinstance(s := data.get(g), dict) else {} for g in ("instance_info", "neuron_hardware_info")}
    hw = sections["neuron_hardware_info"]
    info = MonitorInfo(_str(sections["instance_info"].get("instance_type")), _str(hw.get("neuron_device_type")),
                       _int(hw.get("logical_neuroncore_config")), _int(hw.get("neuron_device_count")),
                       _int(hw.get("neuroncore_per_device_count")), _int(hw.get("neuron_device_memory_size")), "")
    values = (info.instance_type, info.device_type, info.lnc, info.device_count, info.cores_per_device,
              info.hbm_bytes_per_device)
    missing = tuple(f"{g}.{k}" for (g, k), v in zip(MONITOR_FIELDS, values, strict=True) if v is None)
    errors = [f"{g}.error: {' '.join(str(s['error']).split())[:200]}" for g, s in sections.items()
              if isinstance(s.get("error"), str) and s["error"].strip()]
    note = ("read from neuron-monitor" + (f"; not given: {', '.join(missing)}" if missing else "")
            + "".join(f"; {e}" for e in errors))
    return replace(info, note=note, missing=missing)


def _str(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _first_object(raw: bytes) -> dict[str, Any] | None:
    candidates = [raw, *[line for line in raw.splitlines() if line.strip()][:1]]
    for text in candidates:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            return data
    return None


def read_neuron_monitor(which: Which | None = None, timeout_s: float = NEURON_MONITOR_TIMEOUT_S) -> MonitorInfo:
    """Start neuron-monitor with a 1 s period, read its first report, and stop it (it streams until stopped)."""
    exe = (which or shutil.which)("neuron-monitor")
    if exe is None:
        return MonitorInfo(None, None, None, None, None, None, "neuron-monitor is not installed")
    with tempfile.TemporaryDirectory(prefix="reportgen-monitor-") as tmp:
        config = Path(tmp) / "monitor.json"
        config.write_text(json.dumps(MONITOR_CONFIG), encoding="utf-8")
        try:
            proc = subprocess.Popen([exe, "-c", str(config)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as exc:
            return MonitorInfo(None, None, None, None, None, None, f"neuron-monitor could not run ({type(exc).__name__})")
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else b""),
                                  daemon=True)
        reader.start()
        reader.join(timeout_s)
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if not line or not line[0].strip():
        return MonitorInfo(None, None, None, None, None, None,
                           f"neuron-monitor printed no report within {timeout_s:g} s")
    return parse_neuron_monitor(line[0])


def with_monitor(ls: NeuronLs, monitor: MonitorInfo) -> NeuronLs:
    """``ls`` with what neuron-ls did not give taken from neuron-monitor, and the note saying which came from where."""
    taken = [name for attr, name in (("instance_type", "instance_type"), ("lnc", "logical_neuroncore_config"),
                                     ("device_count", "neuron_device_count"),
                                     ("cores_per_device", "neuroncore_per_device_count"),
                                     ("hbm_bytes_per_device", "neuron_device_memory_size"))
             if getattr(monitor, attr) is not None and getattr(ls, attr) is None]
    merged = replace(ls, instance_type=ls.instance_type or monitor.instance_type,
                     lnc=ls.lnc if ls.lnc is not None else monitor.lnc,
                     device_count=ls.device_count or monitor.device_count,
                     cores_per_device=ls.cores_per_device or monitor.cores_per_device,
                     hbm_bytes_per_device=ls.hbm_bytes_per_device or monitor.hbm_bytes_per_device,
                     device_type=monitor.device_type)
    if merged.cores_total is None and merged.device_count is not None and merged.cores_per_device is not None:
        merged = replace(merged, cores_total=merged.device_count * merged.cores_per_device)
    missing = tuple(k for k, v in (("instance_type", merged.instance_type),
                                   ("logical_neuroncore_config", merged.lnc), ("nc_count", merged.cores_per_device),
                                   ("memory_size", merged.hbm_bytes_per_device)) if v is None)
    names = ", ".join(taken) or "nothing"
    return replace(merged, missing=missing,
                   lnc_source="neuron-monitor" if "logical_neuroncore_config" in taken else ls.lnc_source,
                   note=f"{ls.note}; {monitor.note}; taken from neuron-monitor: {names}")


def detect(which: Which | None = None) -> NeuronLs:
    """neuron-ls, and neuron-monitor where neuron-ls gives no instance type (older tools, trn1, inf2)."""
    ls = read_neuron_ls(which)
    if ls.instance_type is not None:
        return ls
    return with_monitor(ls, read_neuron_monitor(which))


def inspect_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """$NEURON_RT_INSPECT_ENABLE set to a truthy value (its documented values are 0, the default, and 1)."""
    return environ.get(INSPECT_ENV, "").strip().lower() not in _FALSE


def environment_facts(ls: NeuronLs, environ: Mapping[str, str] = os.environ,
                      tool_versions: Mapping[str, str] | None = None) -> dict[str, str]:
    """The neuron entries of Environment.device_extras (instance, devices, LNC, core settings, the runtime's and the
    explorer's versions as versions.py read them, warnings)."""
    facts = {"neuron_ls": ls.note, **(tool_versions or {})}
    if ls.instance_type:
        facts["instance_type"] = ls.instance_type
    if ls.lnc is not None:
        facts["logical_neuroncore_config"] = str(ls.lnc)
    if ls.device_count:
        memory = f", {ls.hbm_bytes_per_device / 2**30:g} GiB HBM each" if ls.hbm_bytes_per_device else ""
        cores = (f" × {ls.cores_per_device} NeuronCores ({ls.cores_total} in all)"
                 if ls.cores_per_device is not None else "")
        facts["neuron_devices"] = f"{ls.device_count} device(s){cores}{memory}"
    for name in (LNC_ENV, *CORE_ENVS):
        if name in environ:
            facts[name] = environ[name]
    if inspect_enabled(environ):
        facts["warning"] = (f"${INSPECT_ENV}={environ[INSPECT_ENV]} is set: the Neuron SDK says it must not be set "
                            "together with torch.profiler; unset it and profile again")
    return facts
