"""Traces: reading Kineto traces, op tables, step breakdowns, importing traces and Neuron profiles."""
