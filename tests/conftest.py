"""Shared fixtures: make tests/ importable and keep torch.compile's cache in one place."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "inductor"))
os.environ.setdefault("MPLBACKEND", "Agg")
