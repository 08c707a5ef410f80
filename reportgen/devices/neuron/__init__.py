"""Trainium (TorchNeuron): the neuron device, its hardware facts, Neuron Explorer and the doctor bundle."""
