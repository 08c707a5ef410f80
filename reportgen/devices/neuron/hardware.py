"""Trainium chips, instance families and the roofline ceiling for a run on ONE NeuronCore.

Every figure is from the Neuron SDK's ``about-neuron/arch/neuron-hardware/`` pages, as listed in
shared/design/trainium-profiling-facts.md; none is measured here. Pure functions, no I/O, except
``read_neuron_ls`` at the edge.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

NEURON_LS_TIMEOUT_S = 60
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
INSPECT_ENV = "NEURON_RT_INSPECT_ENABLE"


@dataclass(frozen=True)
class Chip:
    """One Trainium generation: the vendor's chip-level figures."""

    name: str
    physical_cores: int
    hbm_bandwidth_bytes_per_s: float  # the whole chip
    hbm_stacks: int | None  # None: the documents give no stack count
    bandwidth_text: str  # the figure as the SDK writes it
    targeted_by_torchneuron: bool
    dense_tflops: dict[str, float] | None = None  # per dtype, the whole chip (SDK neuron-hardware pages)


CHIPS: dict[str, Chip] = {
    "trn1": Chip("Trainium", 2, 820 * 1024**3, None, "820 GiB/s", False, {"bfloat16": 190.0, "float32": 47.5}),
    "trn2": Chip("Trainium2", 8, 2.9e12, 4, "2.9 TB/s", True, {"bfloat16": 667.0, "float32": 181.0}),
    "trn3": Chip("Trainium3", 8, 4.9e12, None, "4.9 TB/s", True, {"bfloat16": 671.0, "float32": 183.0}),
}
_FAMILY = re.compile(r"^(trn\d+)[a-z]*$")


def chip_for_instance(instance_type: str) -> tuple[str, Chip] | None:
    """(family, chip) of an instance type: ``trn1n.32xlarge`` -> trn1n/Trainium, ``trn2u...`` -> Trainium2."""
    family = instance_type.strip().lower().split(".")[0]
    match = _FAMILY.match(family)
    if match is None or match.group(1) not in CHIPS:
        return None
    return family, CHIPS[match.group(1)]


@dataclass(frozen=True)
class Ceiling:
    """The bandwidth a single profiled NeuronCore is compared against, and the words saying which it is."""

    bandwidth_bytes_per_s: float | None
    denominator: str


def core_ceiling(instance_type: str | None, lnc: str | None) -> Ceiling:
    """The roofline denominator for a run on NeuronCore 0 of this instance (see the facts doc)."""
    found = chip_for_instance(instance_type or "")
    if found is None:
        return Ceiling(None, f"denominator: none; instance type {instance_type or '(not found by neuron-ls -j)'} "
                             "is not a Trainium family with a documented figure (trn1, trn1n, trn2, trn2u, trn3); "
                             "set $REPORTGEN_PEAK_BANDWIDTH_GBPS")
    family, chip = found
    lnc_text = f"LNC={lnc}" if lnc else "LNC not reported"
    if chip.hbm_stacks:
        per_stack = chip.hbm_bandwidth_bytes_per_s / chip.hbm_stacks
        return Ceiling(per_stack, f"denominator: one HBM stack of {chip.name} ({instance_type}, {lnc_text}): "
                                  f"{chip.bandwidth_text} per chip / {chip.hbm_stacks} stacks = "
                                  f"{per_stack / 1e12:.3g} TB/s, derived (no published per-core figure); each "
                                  "stack is shared by two physical NeuronCores, so an LNC=2 logical core has about "
                                  "a quarter of the chip; neuron-explorer's mbu_estimated_percent also uses one "
                                  "HBM stack")
    return Ceiling(chip.hbm_bandwidth_bytes_per_s,
                   f"denominator: the whole {chip.name} chip ({family}, {instance_type}, {lnc_text}): "
                   f"{chip.bandwidth_text}, vendor figure; the documents give no per-core or per-stack figure, so "
                   "one NeuronCore's share is lower and the fraction of peak is an underestimate"
                   + ("" if chip.targeted_by_torchneuron else "; TorchNeuron targets Trn2/Trn3, not this chip"))


def core_compute_roof(instance_type: str | None, lnc: str | None, dtype: str) -> tuple[float | None, str]:
    """The vendor's dense FLOP/s for ``dtype``, shared out to the profiled (logical) NeuronCore, and how.

    The SDK gives chip figures only: one logical core gets ``chip / physical cores × LNC`` (derived). No
    figure for a dtype the documents do not list (float16), or for an unknown instance.
    """
    found = chip_for_instance(instance_type or "")
    if found is None or not found[1].dense_tflops or dtype not in found[1].dense_tflops:
        why = "instance type unknown" if found is None else f"no documented {dtype} figure for {found[1].name}"
        return None, f"compute roof: none ({why})"
    chip = found[1]
    share = int(lnc) if lnc and lnc.isdigit() and int(lnc) > 0 else 1
    tflops = chip.dense_tflops[dtype]  # type: ignore[index]
    per_core = tflops * 1e12 / chip.physical_cores * share
    return per_core, (f"vendor: {tflops:g} TFLOPS dense {dtype} per {chip.name} chip / {chip.physical_cores} "
                      f"physical cores × {share} (LNC={lnc or 'not reported, 1 assumed'}), derived")


@dataclass(frozen=True)
class NeuronLs:
    """What ``neuron-ls -j`` said, or why nothing."""

    instance_type: str | None
    lnc: str | None
    raw: bytes | None
    note: str


def parse_neuron_ls(raw: bytes) -> NeuronLs:
    """``instance-type`` and ``logical-neuroncore-config`` from the top-level object ``neuron-ls -j`` prints."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return NeuronLs(None, None, raw, "neuron-ls -j printed no JSON")
    if not isinstance(data, dict):
        return NeuronLs(None, None, raw, f"neuron-ls -j printed a JSON {type(data).__name__}, not an object with "
                                         "instance-type / logical-neuroncore-config")
    instance = data.get("instance-type")
    lnc = data.get("logical-neuroncore-config")
    instance_s = instance if isinstance(instance, str) and instance else None
    lnc_s = str(lnc) if isinstance(lnc, (int, str)) and not isinstance(lnc, bool) and str(lnc) else None
    missing = [k for k, v in (("instance-type", instance_s), ("logical-neuroncore-config", lnc_s)) if v is None]
    note = "read from neuron-ls -j" + (f", which printed no {', '.join(missing)}" if missing else "")
    return NeuronLs(instance_s, lnc_s, raw, note)


def read_neuron_ls(which: Callable[[str], str | None] | None = None) -> NeuronLs:
    """Run ``neuron-ls -j`` (the documented way to find the instance type and LNC)."""
    exe = (which or shutil.which)("neuron-ls")
    if exe is None:
        return NeuronLs(None, None, None, "neuron-ls is not installed (it comes with the Neuron tools)")
    try:
        proc = subprocess.run([exe, "-j"], capture_output=True, timeout=NEURON_LS_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return NeuronLs(None, None, None, f"neuron-ls -j could not run ({type(exc).__name__})")
    if proc.returncode != 0:
        err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:200]
        return NeuronLs(None, None, proc.stdout, f"neuron-ls -j failed (exit {proc.returncode}: {err})")
    return parse_neuron_ls(proc.stdout)


def environment_facts(ls: NeuronLs, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The neuron entries of Environment.device_extras (instance, LNC, settings, warnings)."""
    facts = {"neuron_ls": ls.note}
    if ls.instance_type:
        facts["instance_type"] = ls.instance_type
    if ls.lnc:
        facts["logical_neuroncore_config"] = ls.lnc
    if LNC_ENV in environ:
        facts[LNC_ENV] = environ[LNC_ENV]
    if environ.get(INSPECT_ENV):
        facts["warning"] = (f"${INSPECT_ENV}={environ[INSPECT_ENV]} is set: the Neuron SDK says it must not be set "
                            "together with torch.profiler; unset it and profile again")
    return facts
