"""The typed request of ``reportgen compare``: which runs to compare, how, and where to write the result."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class OutputFormat(str, Enum):
    """What ``compare`` writes: the PR comment, or the same content as versioned JSON."""

    MARKDOWN = "markdown"
    JSON = "json"


@dataclass(frozen=True)
class CompareRequest:
    """One comparison to make: which runs (id, folder, ``latest``, ``latest~N``, label, git sha), how, and where to write it."""

    base: str
    head: str
    store: Path
    threshold_pct: float = 5.0
    memory_threshold_pct: float = 0.0
    """Growth of an exact memory figure that counts as a regression (0: any); inexact figures need 10 % or more."""
    fail_on_regression: bool = False
    output_format: OutputFormat = OutputFormat.MARKDOWN
    site_url: str | None = None
    output: Path | None = None
    """A file to write (a symlink is written through to its target); None: standard output."""
    scenario: str | None = None
    """``latest~N``, labels and git shas resolve among this scenario's runs (None: the newest run's)."""
    machine: str | None = None
    """... and among this machine's runs (None: the newest run's)."""

