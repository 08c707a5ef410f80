"""Profiling: measuring each variant on a device (samples, profiled steps, sweeps) and the profile command."""
