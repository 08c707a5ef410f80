"""Rendering: the Jinja environment and its filters, and the plots."""
