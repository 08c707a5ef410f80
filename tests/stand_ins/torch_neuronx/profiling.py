"""Stand-in for ``torch_neuronx.profiling``: NeuronConfig, ProfileMode, NeuronProfiler as documented.

``NeuronProfiler.export_trace`` writes the documented layout
``<profile_output_dir>/<instance-id>_pid_<pid>/<timestamp>/`` with trace.json (the Kineto
trace of the capture) and placeholder .neff/.ntff/.pb files whose content says they are fake.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Any

from torch._C._profiler import _ExperimentalConfig

from torch_neuronx import CALLS

_ALLOWED = {"modes", "profile_output_dir", "capture_enabled_for_nc", "max_events_per_nc", "neff_cache_dir",
            "precache_node_info"}
"""The six parameters CAP:120-230 documents (no Python signature is published, so keywords only)."""
PLACEHOLDER = b"stand-in torch_neuronx: not a real Neuron artifact\n"


class ProfileMode(Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"
    HOST_MEMORY = "host_memory"


class NeuronConfig(_ExperimentalConfig):
    """Records its keyword arguments; refuses any the SDK does not document; checks the documented types."""

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - _ALLOWED
        if unknown:
            raise TypeError(f"NeuronConfig got unexpected keyword arguments {sorted(unknown)}")
        nc = kwargs.get("capture_enabled_for_nc")
        if nc is not None and not isinstance(nc, str):
            raise TypeError("capture_enabled_for_nc is a string, a comma list with ranges such as '0,1,2-5'")
        if "precache_node_info" in kwargs and not isinstance(kwargs["precache_node_info"], bool):
            raise TypeError("precache_node_info is a bool (default True)")
        super().__init__()
        self.kwargs = kwargs
        CALLS.append(("NeuronConfig", kwargs))


class NeuronProfiler:
    """Holds the config; ``export_trace`` is the ``on_trace_ready`` callback."""

    def __init__(self, config: NeuronConfig) -> None:
        if not isinstance(config, NeuronConfig):
            raise TypeError("NeuronProfiler expects a NeuronConfig")
        self.config = config
        CALLS.append(("NeuronProfiler", config))

    def export_trace(self, prof: Any) -> None:
        out = Path(self.config.kwargs["profile_output_dir"]) / f"i-0standin_pid_{os.getpid()}" / "20261130_000000"
        out.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(out / "trace.json"))
        for name in ("neff_0123abcd_vnc_0.neff", "profile_nc_0_session_0.ntff", "ntrace.pb", "trace_info.pb"):
            (out / name).write_bytes(PLACEHOLDER)
        CALLS.append(("export_trace", prof))
