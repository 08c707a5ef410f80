"""What the reusable GitHub Action (``action.yml``) runs: ``action.sh`` and the PR-comment poster."""

from __future__ import annotations

from pathlib import Path

ACTION_SCRIPT = Path(__file__).resolve().parent / "action.sh"
