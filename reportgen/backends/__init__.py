"""Compatibility names: the backends now live with their devices in ``reportgen.devices``."""

from __future__ import annotations

from reportgen.devices import import_torch, select_backend
from reportgen.devices.backend import Backend

__all__ = ["Backend", "import_torch", "select_backend"]
