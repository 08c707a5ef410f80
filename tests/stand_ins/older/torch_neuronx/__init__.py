"""Stand-in for an OLDER TorchNeuron (TN, early 2026): a device is there, but no ``NeuronConfig``.

Its ``torch.neuron.is_available()`` is True, so the only thing that stops reportgen is the missing
``torch_neuronx.profiling.NeuronConfig``: it must refuse with exit 5 before any variant runs.
"""

from __future__ import annotations

import types

import torch

__version__ = "0.0.1+older-stand-in"

torch.neuron = types.SimpleNamespace(  # type: ignore[attr-defined]
    synchronize=lambda: None, is_available=lambda: True, device_count=lambda: 2)
