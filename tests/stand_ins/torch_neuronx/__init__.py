"""A stand-in for TorchNeuron's ``torch_neuronx``, for tests on machines without Trainium.

It is NOT TorchNeuron: it runs nothing on a device. It records every call reportgen makes
(in ``CALLS``) so tests can check them against the documented API, provides
``torch.neuron.synchronize`` / ``is_available`` / ``device_count`` / ``current_device``, ``get_fallback_ops`` /
``get_executed_ops`` (TN ``__init__.py``), and registers a ``neuron`` torch.compile backend that
runs the graph eagerly. Tensor placement on a ``neuron`` device is the one thing it cannot fake.

``torch.neuron.is_available()`` is False unless $STAND_IN_NEURON_CORES names a positive count:
a stand-in on the path proves no device, as the SDK says of ``torch.device("neuron")``.
"""

from __future__ import annotations

import os
import types
from typing import Any

import torch

__version__ = "0.0.0+stand-in"
CALLS: list[tuple[str, Any]] = []
FALLBACK_OPS: list[str] = []
EXECUTED_OPS: list[str] = []


def _synchronize() -> None:
    CALLS.append(("torch.neuron.synchronize", None))


def _device_count() -> int:
    try:
        return max(0, int(os.environ.get("STAND_IN_NEURON_CORES", "0")))
    except ValueError:
        return 0


def _current_device() -> int:
    """TorchNeuron code in the wild calls ``torch.neuron.current_device()``; under NEURON_RT_VISIBLE_CORES the
    process numbers its cores from 0. $STAND_IN_NEURON_CURRENT sets it for tests."""
    CALLS.append(("torch.neuron.current_device", None))
    return int(os.environ.get("STAND_IN_NEURON_CURRENT", "0"))


def _is_available() -> bool:
    CALLS.append(("torch.neuron.is_available", None))
    return _device_count() > 0


def get_fallback_ops() -> list[str]:
    """Ops that ran on the CPU instead of a NeuronCore (TN ``__init__.py``); tests fill FALLBACK_OPS."""
    CALLS.append(("get_fallback_ops", None))
    return list(FALLBACK_OPS)


def get_executed_ops() -> list[str]:
    CALLS.append(("get_executed_ops", None))
    return list(EXECUTED_OPS)


def _neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    CALLS.append(("compile_backend", len(example_inputs)))
    return gm.forward


torch.neuron = types.SimpleNamespace(  # type: ignore[attr-defined]
    synchronize=_synchronize, is_available=_is_available, device_count=_device_count,
    current_device=_current_device)

from torch._dynamo import list_backends, register_backend  # noqa: E402

if "neuron" not in list_backends(exclude_tags=()):
    register_backend(name="neuron")(_neuron_backend)
