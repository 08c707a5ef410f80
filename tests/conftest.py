"""Shared fixtures: make tests/ importable and keep torch.compile's cache in one place."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL_TRACES_DIR = ROOT / "tests" / "data" / "traces"
"""Real Kineto traces recorded by others (provenance and licence: its README.md)."""
NEURON_CAPTURES_DIR = ROOT / "tests" / "data" / "neuron"
"""Real outputs of Neuron tools recorded by others on trn1, trn2 and inf2 (provenance and licence: its README.md)."""
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "inductor"))
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("REPORTGEN_CACHE_DIR", str(ROOT / ".cache" / "reportgen"))

import subprocess  # noqa: E402

import pytest  # noqa: E402

REAL_PROFILE_ARGS = ["--device", "cpu", "--shape", "4,256", "--samples", "8", "--quiet"]


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m reportgen ARGS`` in a subprocess, as a user runs it."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "reportgen", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="session")
def real_cpu_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two real CPU profiles (labels 'base' then 'head') of all three RMSNorm variants.

    Made once per test session through the CLI; the first compile is cold unless the inductor
    cache under .cache/ is warm.
    """
    store = tmp_path_factory.mktemp("real_store")
    for label in ("base", "head"):
        proc = run_cli("profile", *REAL_PROFILE_ARGS, "--label", label, "--store", str(store))
        assert proc.returncode == 0, proc.stderr[-3000:]
    return store


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """This checkout built as a wheel and installed into a fresh venv outside it (see tests/wheel_kit.py)."""
    from wheel_kit import InstalledWheel, build_wheel, fresh_venv

    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp)
    return InstalledWheel(wheel, fresh_venv(tmp, wheel))
