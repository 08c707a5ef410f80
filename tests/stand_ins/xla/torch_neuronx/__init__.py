"""Stand-in for the PyTorch/XLA ``torch-neuronx`` (the DLAMI's /opt/aws_neuronx_venv_pytorch_2_9): importable, no profiling.

That package is not TorchNeuron: it has no ``torch_neuronx.profiling`` and registers no ``neuron``
device (shared/design/trainium-profiling-facts.md, Corrections). reportgen must name it as such
and refuse with exit 5 before any variant runs.
"""

from __future__ import annotations

__version__ = "2.9.0+xla-stand-in"
