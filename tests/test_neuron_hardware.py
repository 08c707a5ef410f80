"""What the Neuron tools say about the machine, and the Trainium ceilings: on REAL tool outputs (tests/data/neuron/).

neuron-ls and neuron-monitor are fed the captures others recorded on trn1, trn2 and inf2; the fake
executables print those captures byte for byte. The ceilings and roofs are checked against the
figures of the SDK pages they name. Nothing here ran on Trainium.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import NEURON_CAPTURES_DIR
from stand_ins import fake_tools

from reportgen.devices.neuron import chips, hardware

TRN2_DEFAULT = chips.resolve_lnc(chips.CHIPS["trn2"], None, "neuron-ls -j", None)


@pytest.mark.parametrize(("capture", "expected"), [
    ("neuron-ls-j.trn2.3xlarge.json", ("trn2.3xlarge", 2, 1, 4, 4, 103079215104, ())),
    ("neuron-ls-j.trn1.2xlarge.json",
     (None, None, 1, 2, 2, 34359738368, ("instance_type", "logical_neuroncore_config"))),
    ("neuron-ls-j.inf2.xlarge.json",
     (None, None, 1, 2, 2, 34359738368, ("instance_type", "logical_neuroncore_config"))),
    ("neuron-ls-j.two-devices-older-format.json",
     (None, None, 2, 2, 4, 34359738368, ("instance_type", "logical_neuroncore_config"))),
])
def test_neuron_ls_real_captures(capture: str, expected: tuple[object, ...]) -> None:
    raw = (NEURON_CAPTURES_DIR / capture).read_bytes()
    ls = hardware.parse_neuron_ls(raw)
    assert (ls.instance_type, ls.lnc, ls.device_count, ls.cores_per_device, ls.cores_total,
            ls.hbm_bytes_per_device, ls.missing) == expected
    assert ls.raw == raw and ls.note.startswith(f"read from neuron-ls -j: {expected[2]} Neuron device(s)")
    if expected[-1]:
        assert ls.note.endswith("; not given: instance_type, logical_neuroncore_config")


def test_neuron_ls_2_34_output_format_json_and_bad_outputs() -> None:
    # Neuron 2.34's --output-format json: documented to carry the instance fields at the top level; NO real
    # sample was found, so this payload is made up from the documented field names.
    made_up = {"instance_type": "trn2.48xlarge", "instance_id": "i-0", "logical_neuroncore_config": 2,
               "neuron_devices": [{"neuron_device": i, "nc_count": 4, "memory_size": 103079215104} for i in range(16)]}
    ls = hardware.parse_neuron_ls(json.dumps(made_up).encode(), "neuron-ls --output-format json")
    assert (ls.instance_type, ls.lnc, ls.device_count, ls.cores_per_device, ls.cores_total) == (
        "trn2.48xlarge", 2, 16, 4, 64)
    assert ls.note == "read from neuron-ls --output-format json: 16 Neuron device(s)"
    assert hardware.parse_neuron_ls(b"oops").note == "neuron-ls -j printed no JSON"
    assert hardware.parse_neuron_ls(b"7").note == "neuron-ls -j printed a JSON int, not a list of Neuron devices"
    # the hyphenated names belong to the text table only: an object of them is not read as instance fields
    assert hardware.parse_neuron_ls(b'{"instance-type": "trn2.48xlarge"}').instance_type is None
    mixed = hardware.parse_neuron_ls(b'[{"nc_count": 2, "memory_size": 1}, {"nc_count": 4, "memory_size": 1}]')
    assert (mixed.cores_per_device, mixed.cores_total, mixed.hbm_bytes_per_device) == (None, 6, 1)


def test_fake_neuron_ls_prints_the_capture_and_the_2_34_flag_is_tried(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_ls(bin_dir, "neuron-ls-j.trn2.3xlarge.json")
    read = hardware.read_neuron_ls(which=lambda n: str(bin_dir / n))
    assert (read.instance_type, read.lnc, read.raw) == (
        "trn2.3xlarge", 2, (NEURON_CAPTURES_DIR / "neuron-ls-j.trn2.3xlarge.json").read_bytes())
    newer = tmp_path / "newer"
    fake_tools.install_neuron_ls(newer, "neuron-ls-j.inf2.xlarge.json", accepts=(("--output-format", "json"),))
    read = hardware.read_neuron_ls(which=lambda n: str(newer / n))
    assert read.device_count == 1 and read.note.startswith("read from neuron-ls --output-format json")
    assert hardware.read_neuron_ls(which=lambda n: None).note.startswith("neuron-ls is not installed")


@pytest.mark.parametrize(("capture", "expected"), [
    ("neuron-monitor.trn1.2xlarge.no-runtime.json", ("trn1.2xlarge", "trainium", 1, 1, 2, 34359738368, ())),
    ("neuron-monitor.inf2.xlarge.trimmed.json", ("inf2.xlarge", "inferentia2", 1, 1, 2, 34359738368, ())),
    ("neuron-monitor.trn1.2xlarge.jsonl", ("trn1.2xlarge", None, None, 1, 2, None, (
        "neuron_hardware_info.neuron_device_type", "neuron_hardware_info.logical_neuroncore_config",
        "neuron_hardware_info.neuron_device_memory_size"))),
])
def test_neuron_monitor_real_captures(capture: str, expected: tuple[object, ...]) -> None:
    raw = (NEURON_CAPTURES_DIR / capture).read_bytes()
    reports = raw.splitlines() if capture.endswith(".jsonl") else [raw]
    for report in reports:
        info = hardware.parse_neuron_monitor(report)
        assert (info.instance_type, info.device_type, info.lnc, info.device_count, info.cores_per_device,
                info.hbm_bytes_per_device, info.missing) == expected
    if expected[-1]:
        assert info.note == ("read from neuron-monitor; not given: neuron_hardware_info.neuron_device_type, "
                             "neuron_hardware_info.logical_neuroncore_config, "
                             "neuron_hardware_info.neuron_device_memory_size")
    assert hardware.parse_neuron_monitor(b"nothing").missing[0] == "instance_info.instance_type"
    broken = hardware.parse_neuron_monitor(b'{"instance_info": {"instance_type": "", "error": "no IMDS"}}')
    assert broken.instance_type is None and broken.note.endswith("; instance_info.error: no IMDS")


def test_neuron_monitor_is_read_once_and_stopped_and_fills_what_neuron_ls_lacks(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_ls(bin_dir, "neuron-ls-j.trn1.2xlarge.json")
    fake_tools.install_neuron_monitor(bin_dir, "neuron-monitor.trn1.2xlarge.no-runtime.json")
    started = time.monotonic()
    found = hardware.detect(which=lambda n: str(bin_dir / n))
    assert time.monotonic() - started < 30  # the fake streams for 60 s unless it is stopped
    assert (found.instance_type, found.lnc, found.device_type, found.lnc_source, found.missing) == (
        "trn1.2xlarge", 1, "trainium", "neuron-monitor", ())
    assert found.note.endswith("; read from neuron-monitor; taken from neuron-monitor: instance_type, "
                               "logical_neuroncore_config")
    trn2 = tmp_path / "trn2"
    fake_tools.install_neuron_ls(trn2, "neuron-ls-j.trn2.3xlarge.json")  # instance type given: no neuron-monitor
    assert hardware.detect(which=lambda n: str(trn2 / n) if n == "neuron-ls" else None).note == (
        "read from neuron-ls -j: 1 Neuron device(s)")
    alone = hardware.detect(which=lambda n: str(bin_dir / n) if n == "neuron-ls" else None)
    assert alone.instance_type is None and alone.note.endswith("; neuron-monitor is not installed; taken from "
                                                               "neuron-monitor: nothing")


def test_environment_facts_record_core_settings_and_warn_only_when_inspect_is_on() -> None:
    ls = hardware.parse_neuron_ls((NEURON_CAPTURES_DIR / "neuron-ls-j.trn2.3xlarge.json").read_bytes())
    facts = hardware.environment_facts(ls, {"NEURON_RT_INSPECT_ENABLE": "0", "NEURON_RT_VISIBLE_CORES": "0-1",
                                            "NEURON_RT_NUM_CORES": "2", "NEURON_LOGICAL_NC_CONFIG": "2"})
    assert facts == {"neuron_ls": "read from neuron-ls -j: 1 Neuron device(s)", "instance_type": "trn2.3xlarge",
                     "logical_neuroncore_config": "2",
                     "neuron_devices": "1 device(s) × 4 NeuronCores (4 in all), 96 GiB HBM each",
                     "NEURON_LOGICAL_NC_CONFIG": "2", "NEURON_RT_VISIBLE_CORES": "0-1", "NEURON_RT_NUM_CORES": "2"}
    for off in ("", "0", "false"):
        assert "warning" not in hardware.environment_facts(ls, {"NEURON_RT_INSPECT_ENABLE": off})
    warned = hardware.environment_facts(ls, {"NEURON_RT_INSPECT_ENABLE": "1"})
    assert warned["warning"].startswith("$NEURON_RT_INSPECT_ENABLE=1 is set: the Neuron SDK says it must not be set "
                                        "together with torch.profiler")


@pytest.mark.parametrize(("instance", "family", "chip"), [
    ("trn1.32xlarge", "trn1", "Trainium"), ("trn1n.32xlarge", "trn1n", "Trainium"),
    ("trn2.48xlarge", "trn2", "Trainium2"), ("trn2u.48xlarge", "trn2u", "Trainium2"),
    ("trn3.48xlarge", "trn3", "Trainium3"), ("TRN2.3XLARGE", "trn2", "Trainium2"),
])
def test_instance_families(instance: str, family: str, chip: str) -> None:
    found = chips.chip_for_instance(instance)
    assert found is not None and found[0] == family and found[1].name == chip


@pytest.mark.parametrize("instance", ["c7i.large", "inf2.xlarge", "trn", "trnx.large", "", "trn9.large"])
def test_other_instances_have_no_chip(instance: str) -> None:
    assert chips.chip_for_instance(instance) is None
    assert chips.core_ceiling(instance, chips.Lnc(1, "LNC=1")).bandwidth_bytes_per_s is None


def test_device_type_names_the_chip_when_no_instance_type() -> None:
    assert chips.chip_for(None, "trainium2") == ("trn2", chips.CHIPS["trn2"])
    assert chips.chip_for(None, "inferentia2") is None


def test_lnc_precedence_and_the_trn2_default() -> None:
    assert TRN2_DEFAULT.value == 2 and TRN2_DEFAULT.text.startswith("LNC=2, default, not reported (documented Trn2")
    assert chips.resolve_lnc(chips.CHIPS["trn2"], 1, "neuron-ls -j", None) == chips.Lnc(1, "LNC=1 (reported by "
                                                                                           "neuron-ls -j)")
    assert chips.resolve_lnc(chips.CHIPS["trn2"], 2, "neuron-ls -j", "1").text == "LNC=1 (from $NEURON_LOGICAL_NC_CONFIG)"
    assert chips.resolve_lnc(chips.CHIPS["trn1"], None, "", None).value == 1
    assert chips.resolve_lnc(chips.CHIPS["trn3"], None, "", None).text.startswith("LNC=2, default, not reported "
                                                                                  "(assumed")


def test_ceiling_for_one_neuroncore_states_its_denominator() -> None:
    trn2 = chips.core_ceiling("trn2.3xlarge", TRN2_DEFAULT)
    assert trn2.bandwidth_bytes_per_s == 0.725e12
    assert trn2.source.startswith("denominator: one HBM stack of Trainium2 (trn2.3xlarge, LNC=2, default, not "
                                       "reported (documented Trn2 default")
    assert "2.9 TB/s (about-neuron/arch/neuron-hardware/trainium2.rst" in trn2.source
    assert "per chip / 4 stacks = 0.725 TB/s, derived" in trn2.source
    trn3 = chips.core_ceiling("trn3.48xlarge", chips.Lnc(2, "LNC=2 (reported by neuron-ls -j)"))
    assert trn3.bandwidth_bytes_per_s == 4.7e12 / 4
    assert ("4.7 TB/s (nki/guides/architecture/trainium3_arch.rst, the page that gives the 4 HBM stacks; the chip "
            "page about-neuron/arch/neuron-hardware/trainium3.rst says 4.9 TB/s) per chip / 4 stacks = 1.175 TB/s"
            in trn3.source)
    trn1 = chips.core_ceiling("trn1n.32xlarge", chips.resolve_lnc(chips.CHIPS["trn1"], None, "", None))
    assert trn1.bandwidth_bytes_per_s == 820 * 1024**3 and "820 GiB/s" in trn1.source
    assert "TorchNeuron targets Trn2/Trn3, not this chip" in trn1.source
    assert chips.core_ceiling(None, chips.Lnc(None, "LNC not reported")).source.startswith(
        "denominator: none; instance type (not found by neuron-ls or neuron-monitor)")


def test_compute_roofs_per_engine_and_dtype_with_sources() -> None:
    lnc1 = chips.Lnc(1, "LNC=1 (reported by neuron-ls -j)")
    bf16 = {r.engine: r for r in chips.engine_roofs("trn2.48xlarge", lnc1, "bfloat16")}
    assert {k: r.flops_per_s for k, r in bf16.items()} == {"Tensor Engine": 79e12, "Vector Engine": 1e12,
                                                           "Scalar Engine": 1.2e12}
    assert "documented: 158 cFP8 and 79 BF16/FP16/TF32 TFLOPS per NeuronCore-v3" in bf16["Tensor Engine"].source
    assert "for bfloat16, assumed: the page gives an FP32 figure only" in bf16["Vector Engine"].source
    fp32 = {r.engine: r for r in chips.engine_roofs("trn2.48xlarge", lnc1, "float32")}
    assert fp32["Tensor Engine"].flops_per_s == 181e12 / 8 and "derived: 181 float32 TFLOPS per Trainium2 chip" \
        in fp32["Tensor Engine"].source
    assert "assumed" not in fp32["Vector Engine"].source
    lnc2 = {r.engine: r.flops_per_s for r in chips.engine_roofs("trn2.48xlarge", TRN2_DEFAULT, "float16")}
    assert lnc2 == {"Tensor Engine": 158e12, "Vector Engine": 2e12, "Scalar Engine": 2.4e12}
    # float16 shares the chip page's "667 BF16/FP16/TF32"; FP8 is 1,299 per chip
    fp16_share = chips.chip_share("trn2.48xlarge", TRN2_DEFAULT, "float16")
    assert fp16_share is not None and fp16_share.flops_per_s == 667e12 / 8 * 2
    fp8_share = chips.chip_share("trn2.48xlarge", lnc1, "float8")
    assert fp8_share is not None and fp8_share.flops_per_s == 1299e12 / 8
    roof, text = chips.core_compute_roof("trn2.48xlarge", TRN2_DEFAULT, "bfloat16")
    assert roof == 2e12  # the Vector Engine's: RMSNorm is not compared with the Tensor Engine's roof alone
    assert text.startswith("compute roof of one logical NeuronCore, bfloat16, LNC=2, default, not reported")
    assert "drawn: Vector Engine 2 TFLOPS" in text and "not drawn: Tensor Engine 158 TFLOPS" in text
    assert "Scalar Engine 2.4 TFLOPS" in text and "chip share 166.75 TFLOPS" in text
    assert chips.core_compute_roof("c7i.large", lnc1, "bfloat16") == (None, "compute roof: none (instance type "
                                                                             "unknown)")
    trn3 = {r.engine: r.flops_per_s for r in chips.engine_roofs("trn3.48xlarge", lnc1, "float32")}
    assert trn3 == {"Tensor Engine": 20e12, "Vector Engine": 1.2e12, "Scalar Engine": 1.2e12}


def test_the_real_inf2_summary_uses_one_hbm_stack_and_ratios() -> None:
    """The real summary's MBU is bytes / total_time / 410 GB/s (Inferentia2's 820 GB/s over its 2 stacks), and its
    MFU is model_flops / total_time / 91.75 TFLOPS (a NeuronCore-v2): both are ratios, neither a percentage."""
    c = fake_tools.real_counters()
    seconds = float(c["total_time"])
    moved = float(c["hbm_read_bytes"]) + float(c["hbm_write_bytes"])
    assert moved / seconds / float(c["mbu_estimated_percent"]) == pytest.approx(410e9, rel=1e-9)
    assert float(c["model_flops"]) / seconds / float(c["mfu_estimated_percent"]) == pytest.approx(91.7504e12,
                                                                                                  rel=1e-9)
    assert float(c["tensor_engine_active_time"]) / seconds == pytest.approx(
        float(c["tensor_engine_active_time_percent"]), rel=1e-12)
