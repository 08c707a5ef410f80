"""A stand-in for TorchNeuron's ``torch_neuronx``, for tests on machines without Trainium.

It is NOT TorchNeuron: it runs nothing on a device. It records every call reportgen makes
(in ``CALLS``) so tests can check them against the documented API, provides
``torch.neuron.synchronize``, and registers a ``neuron`` torch.compile backend that runs
the graph eagerly. Tensor placement on a ``neuron`` device is the one thing it cannot fake.
"""

from __future__ import annotations

import types
from typing import Any

import torch

__version__ = "0.0.0+stand-in"
CALLS: list[tuple[str, Any]] = []


def _synchronize() -> None:
    CALLS.append(("torch.neuron.synchronize", None))


def _neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    CALLS.append(("compile_backend", len(example_inputs)))
    return gm.forward


torch.neuron = types.SimpleNamespace(synchronize=_synchronize)  # type: ignore[attr-defined]

from torch._dynamo import list_backends, register_backend  # noqa: E402

if "neuron" not in list_backends(exclude_tags=()):
    register_backend(name="neuron")(_neuron_backend)
