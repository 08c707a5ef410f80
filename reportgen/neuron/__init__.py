"""Trainium (TorchNeuron) specifics, as the Neuron SDK documents them (shared/design/trainium-profiling-facts.md).

- ``hardware``: instance families, chip figures and the bandwidth ceiling for ONE NeuronCore;
  ``neuron-ls -j`` parsing.
- ``explorer``: ``neuron-explorer view -d <session>`` and the device summary / system-trace counters.
- ``doctor``: the diagnostics bundle a Trainium owner attaches to an issue.

None of it has run on Trainium hardware: it is tested against stand-ins that follow the documents.
"""
