"""The older profiler API (TN ``torch_neuronx/profiling.py``): ``NeuronProfiler(...)`` with start/stop, no NeuronConfig."""

from __future__ import annotations

from typing import Any


class NeuronProfiler:
    """Started and stopped explicitly; not a torch.profiler experimental_config."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def start(self) -> None:
        raise AssertionError("reportgen must not start the older profiler")

    def stop(self) -> None:
        raise AssertionError("reportgen must not stop the older profiler")
