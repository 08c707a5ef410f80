"""The Neuron runtime's and Neuron Explorer's versions, as the machine's tools report them, for the run's environment.

Each is recorded as what a command printed, with the command, or "not found" with what was tried:

- Neuron runtime: the ``aws-neuronx-runtime-lib`` package (the SDK's name for the runtime library; apt on Ubuntu
  DLAMIs, dnf on Amazon Linux), asked through ``dpkg-query -W -f=${Version}`` and then ``rpm -q --queryformat``:
  both print the installed version and exit non-zero for a package that is not installed (dpkg and rpm's own
  documented behaviour). The version's exact spelling is not documented by the SDK (its install pages pin
  ``=2.34.10.0*``): recorded as printed.
- Neuron Explorer: ``neuron-explorer --version`` (the SDK's get-started page runs it to verify the install; what it
  prints is not documented: its first line is recorded verbatim, assumed to name the version), then the
  ``aws-neuronx-tools`` package it comes with.

I/O only in ``read_versions``; a tool that is missing, fails or hangs is "not found", never an error.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

VERSION_TIMEOUT_S = 30
MAX_SHOWN = 200
RUNTIME_PACKAGE = "aws-neuronx-runtime-lib"
TOOLS_PACKAGE = "aws-neuronx-tools"
RUNTIME_KEY = "neuron_runtime_version"
EXPLORER_KEY = "neuron_explorer_version"

Which = Callable[[str], "str | None"]


def _package(name: str) -> tuple[tuple[str, ...], ...]:
    return (("dpkg-query", "-W", "-f=${Version}", name), ("rpm", "-q", "--queryformat", "%{VERSION}-%{RELEASE}", name))


RUNTIME_COMMANDS = _package(RUNTIME_PACKAGE)
EXPLORER_COMMANDS = (("neuron-explorer", "--version"), *_package(TOOLS_PACKAGE))


def _first_line(raw: bytes) -> str:
    lines = [" ".join(line.split()) for line in raw.decode("utf-8", "replace").splitlines()]
    return next((line for line in lines if line), "")[:MAX_SHOWN]


def first_printed(commands: tuple[tuple[str, ...], ...], which: Which | None = None,
                  timeout_s: float = VERSION_TIMEOUT_S) -> str:
    """``<first line printed> (<command>)`` of the first command that succeeds and prints something, else
    ``not found (<each command>: <why>)``."""
    tried = []
    for argv in commands:
        shown = " ".join(argv)
        exe = (which or shutil.which)(argv[0])
        if exe is None:
            tried.append(f"{argv[0]}: not installed")
            continue
        try:
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, timeout=timeout_s, check=False,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{shown}: could not run ({type(exc).__name__})")
            continue
        line = (_first_line(proc.stdout) or _first_line(proc.stderr)) if proc.returncode == 0 else ""
        if line:
            return f"{line} ({shown})"
        why = f"exit {proc.returncode}" if proc.returncode else "printed nothing"
        tried.append(f"{shown}: {why}")
    return f"not found ({'; '.join(tried)})"


def read_versions(which: Which | None = None) -> dict[str, str]:
    """The runtime's and the explorer's versions as the environment records them."""
    return {RUNTIME_KEY: first_printed(RUNTIME_COMMANDS, which), EXPLORER_KEY: first_printed(EXPLORER_COMMANDS, which)}
