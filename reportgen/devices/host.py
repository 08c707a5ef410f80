"""The environment fingerprint and git state recorded in every profiled run."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from reportgen.devices.allocator import allocator_env
from reportgen.model.run import Environment, GitInfo


def cpu_model() -> str | None:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def dist_version(distribution: str) -> str | None:
    """The installed version of a Python distribution (``torch-neuronx``), None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def fingerprint(torch: Any, device_name: str, extras: dict[str, str | None]) -> Environment:
    """Software and hardware facts of this process, for the report header; ``extras`` from the device's backend."""
    return Environment(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python_version=platform.python_version(),
        cpu_model=cpu_model() or "unknown",
        cpu_count=os.cpu_count() or 0,
        torch_version=str(torch.__version__),
        torch_threads=int(torch.get_num_threads()),
        device_name=device_name,
        load_average_1m=_load_average(),
        allocator_env=allocator_env(),
        device_extras={name: value for name, value in extras.items() if value is not None},
    )


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def git_info(cwd: Path | None = None) -> GitInfo:
    """HEAD's sha and whether the working tree has changes; (None, None) outside a git checkout."""
    sha = _git(["rev-parse", "HEAD"], cwd)
    if sha is None:
        return GitInfo(None, None)
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return GitInfo(sha, bool(status))


def _git(args: list[str], cwd: Path | None) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None
