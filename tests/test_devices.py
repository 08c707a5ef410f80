"""The device registry: every device in one place, and the rest of reportgen asking it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from reportgen import devices
from reportgen.cli import build_parser
from reportgen.compare import diff as compare
from reportgen.devices.lanes import Lane
from reportgen.devices.spec import TraceFacts
from reportgen.errors import DeviceUnavailable
from reportgen.model.run import DeviceKind, Environment
from reportgen.traces.events import lane_of


def _device_choices(command: str) -> list[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[command]
    (action,) = [a for a in parser._actions if "--device" in a.option_strings]
    return list(action.choices or [])


def test_every_device_kind_has_exactly_one_module() -> None:
    assert [d.kind for d in devices.DEVICES] == [DeviceKind.CPU, DeviceKind.CUDA, DeviceKind.ROCM, DeviceKind.NEURON,
                                                 DeviceKind.MTIA]
    assert {k for k in DeviceKind if k is not DeviceKind.UNKNOWN} == {d.kind for d in devices.DEVICES}
    assert devices.get("unknown") is None and devices.get(DeviceKind.NEURON) is devices.DEVICES[3]


def test_cli_device_choices_come_from_the_registry() -> None:
    assert _device_choices("profile") == ["auto", "neuron", "cuda", "cpu"]  # --device auto tries them in this order
    assert _device_choices("import") == ["auto", "cpu", "cuda", "rocm", "neuron", "mtia"]


def test_a_device_without_a_backend_cannot_profile() -> None:
    with pytest.raises(DeviceUnavailable) as info:
        devices.select_backend("rocm")
    assert str(info.value) == "device 'rocm' cannot profile; profiling devices: neuron, cuda, cpu"


def test_one_lane_enum() -> None:
    assert [lane_of(c) for c in ("kernel", "cuda_sync", "hpu_op", "neuron_hw_exec", "NRT", "nrt_load", "neuron_x")] == [
        Lane.DEVICE, Lane.DEVICE, Lane.DEVICE, Lane.DEVICE, Lane.RUNTIME, Lane.RUNTIME, Lane.RUNTIME]
    work = {c: devices.classify_category(c)[1] for c in ("kernel", "gpu_user_annotation", "cuda_sync",
                                                           "neuron_device_exec", "cpu_op")}
    assert work == {"kernel": True, "gpu_user_annotation": False, "cuda_sync": False, "neuron_device_exec": True,
                    "cpu_op": False}


@pytest.mark.parametrize(("facts", "hint"), [
    (TraceFacts(frozenset({"cpu_op"}), "", frozenset(), False), "cpu"),
    (TraceFacts(frozenset({"cpu_op", "kernel"}), "", frozenset({"culaunchkernel"}), True), "cuda"),
    (TraceFacts(frozenset({"kernel"}), "amd radeon graphics", frozenset({"hiplaunchkernel"}), True), "rocm"),
    (TraceFacts(frozenset({"privateuse1_runtime"}), "", frozenset(), False), "neuron"),
    (TraceFacts(frozenset({"kernel"}), "", frozenset({"launch"}), True), "unknown"),
])
def test_device_hint_asks_each_device_in_turn(facts: TraceFacts, hint: str) -> None:
    assert devices.device_hint(facts) == hint


def test_environment_fields_are_labelled_and_compared_per_device() -> None:
    assert [(f.name, f.label) for f in devices.environment_fields()] == [
        ("cuda_version", "CUDA"), ("driver_version", "driver"), ("torch_neuronx_version", "torch-neuronx"),
        ("neuronx_cc_version", "neuronx-cc")]
    assert compare.ENVIRONMENT_FIELDS == ("torch_version", "cuda_version", "torch_neuronx_version",
                                          "neuronx_cc_version", "python_version", "device_name", "cpu_model")
    env = Environment("h", "p", "3.11", "cpu", 1, device_extras={"zz_new": "1", "driver_version": "550",
                                                                 "cuda_version": "12.4"})
    assert devices.labelled_extras(env) == (("CUDA", "12.4"), ("driver", "550"), ("zz_new", "1"))
    assert (env.field_text("cuda_version"), env.field_text("python_version"), env.field_text("nope")) == (
        "12.4", "3.11", None)
    assert env.field_text("device_extras") is None and env.field_text("labelled_extras") is None


def test_neuron_import_layout_is_declared_by_the_neuron_module(tmp_path: Path) -> None:
    ((device, layout),) = devices.import_layouts()
    assert device.kind is DeviceKind.NEURON and layout.name == "neuron-profile-output"
    capture = tmp_path / "i-1_pid_7" / "20260101"
    capture.mkdir(parents=True)
    (capture / "trace.json").write_text("{}")
    for name in ("a.neff", "b.NTFF", "c.pb", "d.txt"):
        (capture / name).write_text("x")
    assert layout.find_traces(tmp_path) == [capture / "trace.json"]
    assert [p.name for p in layout.artifacts(capture)] == ["a.neff", "b.NTFF", "c.pb"]
