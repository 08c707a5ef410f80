"""reportgen: profile operator variants and publish the evidence as a versioned static site."""

from __future__ import annotations

__version__ = "0.1.0"
