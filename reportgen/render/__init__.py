"""Rendering: the Jinja environment and its filters, and the charts (bars, timelines, history, sweeps)."""
