"""Trainium chips' documented figures, and the bandwidth and compute roofs of one profiled (logical) NeuronCore.

Every figure says what it rests on: *documented* (the Neuron SDK page it is on, in the
aws-neuron/aws-neuron-sdk repository, ``about-neuron/arch/neuron-hardware/`` unless named),
*derived* (arithmetic on documented figures, shown), or *assumed* (the documents are silent and a
choice is stated). None is measured here. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reportgen.model.run import DevicePeak

HW = "about-neuron/arch/neuron-hardware/"
NKI = "nki/guides/architecture/"
LNC_PAGE = "about-neuron/arch/neuron-features/logical-neuroncore-config.rst"
DRAWN_ENGINE = "Vector Engine"
"""The engine whose roof the report draws: the core pages name Layer Normalization as Vector Engine work."""


@dataclass(frozen=True)
class Engine:
    """One compute engine of a NeuronCore: its documented dense TFLOPS per PHYSICAL core, per dtype."""

    name: str
    tflops: tuple[tuple[str, float], ...]  # (dtype, TFLOPS) as its page gives them
    page: str
    written: str  # the figure as the page writes it

    def documented(self, dtype: str) -> float | None:
        return dict(self.tflops).get(dtype)


@dataclass(frozen=True)
class Chip:
    """One Trainium generation: the vendor's chip-level figures and its cores' engines."""

    name: str
    core: str
    physical_cores: int
    hbm_bytes_per_s: float  # the whole chip, the figure the ceiling is derived from
    bandwidth_text: str  # that figure as written, and where
    hbm_stacks: int | None  # None: the ceiling uses the whole chip
    dense_tflops: tuple[tuple[str, float], ...]  # the whole chip, per dtype (dense)
    dense_text: str  # as the chip page writes it
    chip_page: str
    engines: tuple[Engine, ...]
    default_lnc: int | None  # physical cores per logical core when nothing says otherwise
    default_lnc_text: str
    targeted_by_torchneuron: bool

    def dense(self, dtype: str) -> float | None:
        return dict(self.dense_tflops).get(dtype)


def _engines(core: str, page: str, tensor: tuple[tuple[str, float], ...], tensor_text: str,
             vector: float, scalar: float) -> tuple[Engine, ...]:
    return (Engine("Tensor Engine", tensor, page, tensor_text),
            Engine("Vector Engine", (("float32", vector),), page, f"{vector:g} TFLOPS of FP32"),
            Engine("Scalar Engine", (("float32", scalar),), page, f"{scalar:g} TFLOPS of FP32"))


CHIPS: dict[str, Chip] = {
    "trn1": Chip(
        "Trainium", "NeuronCore-v2", 2, 820 * 1024**3, f"820 GiB/s ({HW}trainium.rst)", None,
        (("bfloat16", 190.0), ("float16", 190.0), ("float32", 47.5)), "190 FP16/BF16/cFP8/TF32, 47.5 FP32 TFLOPS",
        f"{HW}trainium.rst",
        _engines("NeuronCore-v2", f"{HW}neuron-core-v2.rst", (("bfloat16", 90.0), ("float16", 90.0)),
                 "over 90 TFLOPS of FP16/BF16 (a lower bound)", 2.3, 2.9),
        1, "no LNC on Trn1 (one physical core per NeuronCore)", False),
    "trn2": Chip(
        "Trainium2", "NeuronCore-v3", 8, 2.9e12,
        f"2.9 TB/s ({HW}trainium2.rst; {NKI}trainium2_arch.rst says 3 TB/s)", 4,
        (("float8", 1299.0), ("bfloat16", 667.0), ("float16", 667.0), ("float32", 181.0)),
        "1,299 FP8, 667 BF16/FP16/TF32, 181 FP32 TFLOPS", f"{HW}trainium2.rst",
        _engines("NeuronCore-v3", f"{HW}neuron-core-v3.rst", (("float8", 158.0), ("bfloat16", 79.0), ("float16", 79.0)),
                 "158 cFP8 and 79 BF16/FP16/TF32 TFLOPS", 1.0, 1.2),
        2, f"documented Trn2 default, {LNC_PAGE}", True),
    "trn3": Chip(
        "Trainium3", "NeuronCore-v4", 8, 4.7e12,
        f"4.7 TB/s ({NKI}trainium3_arch.rst, the page that gives the 4 HBM stacks; the chip page "
        f"{HW}trainium3.rst says 4.9 TB/s)", 4,
        (("float8", 2517.0), ("bfloat16", 671.0), ("float16", 671.0), ("float32", 183.0)),
        "2,517 MXFP8/MXFP4, 671 BF16/FP16/TF32, 183 FP32 TFLOPS", f"{HW}trainium3.rst",
        _engines("NeuronCore-v4", f"{HW}neuron-core-v4.rst",
                 (("float8", 315.0), ("bfloat16", 79.0), ("float16", 79.0), ("float32", 20.0)),
                 "315 MXFP8/MXFP4, 79 BF16/FP16/TF32 and 20 FP32 TFLOPS", 1.2, 1.2),
        2, "assumed: the LNC page gives Trn2's default only; libraries/nxd-inference/developer_guides/"
           "moe-arch-deep-dive.rst says Trn2 and Trn3 give two physical cores per logical NeuronCore", True),
}
_FAMILY = re.compile(r"^(trn\d+)[a-z]*$")
DEVICE_TYPES = {"trainium": "trn1", "trainium2": "trn2"}
"""neuron-monitor's ``neuron_device_type``: ``trainium`` in a real trn1 report, ``trainium2`` in the SDK's example."""


def chip_for_instance(instance_type: str) -> tuple[str, Chip] | None:
    """(family, chip) of an instance type: ``trn1n.32xlarge`` -> trn1n/Trainium, ``trn2u...`` -> Trainium2."""
    family = instance_type.strip().lower().split(".")[0]
    match = _FAMILY.match(family)
    if match is None or match.group(1) not in CHIPS:
        return None
    return family, CHIPS[match.group(1)]


def chip_for(instance_type: str | None, device_type: str | None = None) -> tuple[str, Chip] | None:
    """The chip from the instance type, else from neuron-monitor's device type (``trainium2`` -> Trainium2)."""
    found = chip_for_instance(instance_type or "")
    if found is None and device_type and device_type.strip().lower() in DEVICE_TYPES:
        family = DEVICE_TYPES[device_type.strip().lower()]
        return family, CHIPS[family]
    return found


@dataclass(frozen=True)
class Lnc:
    """Physical NeuronCores per profiled logical core, and what that rests on."""

    value: int | None
    text: str


def resolve_lnc(chip: Chip | None, reported: int | None, reported_by: str, env_value: str | None) -> Lnc:
    """The LNC a roof uses: this process's $NEURON_LOGICAL_NC_CONFIG (the runtime reads it), else what a tool
    reported, else the chip's default (Trn2: 2, documented, "default, not reported"; never a silent 1)."""
    if env_value is not None and env_value.strip() in ("1", "2"):
        return Lnc(int(env_value), f"LNC={env_value.strip()} (from $NEURON_LOGICAL_NC_CONFIG)")
    if reported is not None and reported > 0:
        return Lnc(reported, f"LNC={reported} (reported by {reported_by})")
    if chip is None:
        return Lnc(None, "LNC not reported")
    if chip.default_lnc is None:
        return Lnc(None, "LNC not reported and no default known")
    if not chip.targeted_by_torchneuron:  # Trn1: LNC does not apply
        return Lnc(chip.default_lnc, chip.default_lnc_text)
    return Lnc(chip.default_lnc, f"LNC={chip.default_lnc}, default, not reported ({chip.default_lnc_text})")


def core_ceiling(instance_type: str | None, lnc: Lnc, device_type: str | None = None) -> DevicePeak:
    """The bandwidth a run on one NeuronCore of this instance is compared against, and the words saying which it is
    (``source``); no compute roof here (``engine_roofs``)."""
    found = chip_for(instance_type, device_type)
    if found is None:
        named = instance_type or "(not found by neuron-ls or neuron-monitor)"
        return DevicePeak(None, None, f"denominator: none; instance type {named} "
                             "is not a Trainium family with a documented figure (trn1, trn1n, trn2, trn2u, trn3); "
                             "set $REPORTGEN_PEAK_BANDWIDTH_GBPS")
    family, chip = found
    where = f"{instance_type or chip.name}, {lnc.text}"
    if chip.hbm_stacks:
        per_stack = chip.hbm_bytes_per_s / chip.hbm_stacks
        return DevicePeak(per_stack, None, f"denominator: one HBM stack of {chip.name} ({where}): {chip.bandwidth_text} per "
                                  f"chip / {chip.hbm_stacks} stacks = {per_stack / 1e12:.4g} TB/s, derived (no "
                                  "published per-core figure); each stack is shared by two physical NeuronCores "
                                  f"({LNC_PAGE}), so an LNC=2 logical core has about a quarter of the chip; "
                                  "neuron-explorer's mbu_estimated_percent also uses one HBM stack")
    return DevicePeak(chip.hbm_bytes_per_s, None,
                   f"denominator: the whole {chip.name} chip ({family}, {where}): {chip.bandwidth_text}, documented; "
                   "reportgen uses no per-stack figure for this chip, so one NeuronCore's share is lower and the "
                   "fraction of peak is an underestimate"
                   + ("" if chip.targeted_by_torchneuron else "; TorchNeuron targets Trn2/Trn3, not this chip"))


@dataclass(frozen=True)
class EngineRoof:
    """One engine's dense FLOP/s for the profiled logical core, and its source."""

    engine: str
    flops_per_s: float
    source: str


def engine_roofs(instance_type: str | None, lnc: Lnc, dtype: str, device_type: str | None = None
                 ) -> tuple[EngineRoof, ...]:
    """Per-engine roofs of the profiled logical core: per-physical-core figure × physical cores (LNC).

    Tensor Engine: the core page's figure for ``dtype``, else the chip's dense figure / physical cores
    (derived). Vector and Scalar: the pages give an FP32 figure only, used for every dtype (assumed).
    """
    found = chip_for(instance_type, device_type)
    if found is None or lnc.value is None:
        return ()
    chip = found[1]
    share = lnc.value
    roofs = []
    for engine in chip.engines:
        found_figure = _per_core(chip, engine, dtype)
        if found_figure is None:
            continue
        per_core, how = found_figure
        roofs.append(EngineRoof(engine.name, per_core * 1e12 * share,
                                f"{engine.name} {per_core * share:g} TFLOPS ({per_core:g} per physical core × "
                                f"{share}; {how})"))
    return tuple(roofs)


def _per_core(chip: Chip, engine: Engine, dtype: str) -> tuple[float, str] | None:
    """One engine's TFLOPS per physical core for ``dtype``, and whether documented, derived or assumed."""
    documented = engine.documented(dtype)
    if documented is not None:
        return documented, f"documented: {engine.written} per {chip.core}, {engine.page}"
    dense = chip.dense(dtype)
    if engine.name == "Tensor Engine":
        if dense is None:
            return None
        return dense / chip.physical_cores, (f"derived: {dense:g} {dtype} TFLOPS per {chip.name} chip, "
                                             f"{chip.chip_page}, / {chip.physical_cores} physical cores; the core "
                                             f"page gives no {dtype} figure")
    fp32 = engine.documented("float32")
    if fp32 is None:
        return None
    return fp32, (f"documented: {engine.written} per {chip.core}, {engine.page}; for {dtype}, assumed: the page "
                  "gives an FP32 figure only")


def chip_share(instance_type: str | None, lnc: Lnc, dtype: str, device_type: str | None = None
               ) -> EngineRoof | None:
    """The chip's dense ``dtype`` figure shared out to the profiled logical core (chip / physical cores × LNC)."""
    found = chip_for(instance_type, device_type)
    if found is None or lnc.value is None or found[1].dense(dtype) is None:
        return None
    chip = found[1]
    tflops = chip.dense(dtype) or 0.0
    per_logical = tflops / chip.physical_cores * lnc.value
    return EngineRoof("chip share", per_logical * 1e12,
                      f"chip share {per_logical:g} TFLOPS ({tflops:g} {dtype} TFLOPS per chip / "
                      f"{chip.physical_cores} physical cores × {lnc.value}, derived; documented: {chip.dense_text}, "
                      f"{chip.chip_page}; the chip's headline figure, matmul and convolution work)")


def core_compute_roof(instance_type: str | None, lnc: Lnc, dtype: str, device_type: str | None = None
                      ) -> tuple[float | None, str]:
    """The compute roof the report draws, and every engine's roof beside it (never the Tensor Engine's alone).

    Drawn: the Vector Engine's, where elementwise and normalisation work (RMSNorm) runs; the Tensor
    Engine's applies to matmuls and convolutions only, and is listed, not drawn.
    """
    roofs = engine_roofs(instance_type, lnc, dtype, device_type)
    if not roofs:
        found = chip_for(instance_type, device_type)
        why = "instance type unknown" if found is None else f"LNC unknown for {found[1].name}"
        return None, f"compute roof: none ({why})"
    drawn = next(r for r in roofs if r.engine == DRAWN_ENGINE)
    others = [r.source for r in roofs if r is not drawn]
    share = chip_share(instance_type, lnc, dtype, device_type)
    if share is not None:
        others.append(share.source)
    return drawn.flops_per_s, (f"compute roof of one logical NeuronCore, {dtype}, {lnc.text}: drawn: "
                               f"{drawn.source}, the engine elementwise and normalisation ops (RMSNorm) run on; "
                               f"not drawn: {'; '.join(others)}")
