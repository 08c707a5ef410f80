"""A wheel of this checkout installed into a fresh virtual environment outside it (built once per test session).

Fast and offline: the wheel is built with the project venv's setuptools (``--no-build-isolation``) from a copy
of the sources (the checkout gets no ``build/``), installed with ``--no-deps``, and the fresh environment borrows
the project venv's dependencies (torch, matplotlib, jinja2 ...) through a ``.pth`` line added after the install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT

SOURCES = ("pyproject.toml", "README.md", "reportgen", "templates", "scenarios")


@dataclass(frozen=True)
class InstalledWheel:
    wheel: Path
    venv: Path

    @property
    def reportgen(self) -> Path:
        """The wheel's console script."""
        return self.venv / "bin" / "reportgen"


def build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)  # follows the help page's link
        else:
            shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp / "wheels"), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp / "wheels").glob("reportgen-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    # the project venv's pip installs into the fresh one (no network, no pip bootstrap)
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "zz_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv
