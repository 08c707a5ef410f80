"""Device backends and their selection: neuron > cuda > cpu unless --device says otherwise."""

from __future__ import annotations

import importlib
from typing import Any

from reportgen.backends.base import Backend
from reportgen.backends.cpu import CpuBackend
from reportgen.backends.cuda import CudaBackend
from reportgen.backends.neuron import NeuronBackend
from reportgen.errors import DeviceUnavailable

BACKENDS: dict[str, type[Backend]] = {"neuron": NeuronBackend, "cuda": CudaBackend, "cpu": CpuBackend}
AUTO_ORDER = ("neuron", "cuda", "cpu")


def import_torch() -> Any:
    """``import torch`` or a one-line DeviceUnavailable saying how to install it."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise DeviceUnavailable("torch is not installed; profiling needs it: pip install torch==2.13.0 "
                                "then pip install -e '.[profile]' (building reports does not)") from None


def select_backend(name: str) -> Backend:
    """The backend called ``name``, checked to be usable; ``auto`` picks the best one present."""
    if name != "auto":
        backend = BACKENDS[name]()
        backend.check_available()
        return backend
    import_torch()
    for candidate in AUTO_ORDER:
        backend = BACKENDS[candidate]()
        try:
            backend.check_available()
        except DeviceUnavailable:
            continue
        return backend
    raise DeviceUnavailable("no usable device found")  # unreachable: the CPU is always there
