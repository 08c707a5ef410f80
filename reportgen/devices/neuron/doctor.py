"""``reportgen doctor --device neuron``: one command a Trainium owner runs to get something to attach to an issue.

It writes, into a new folder: ``diagnostics.json`` (versions, ``neuron-ls -j``, the NEURON_* /
TORCH_NEURONX_* settings, the tools found, the profile's exit code and output, every file of the
bundle it produced, and, with ``--profile-output``, what an existing capture folder holds and what
neuron-explorer says of each session), the run bundle itself under ``store/``, the raw outputs, and
then a ``.tar.gz`` of it all. It never fails because the profile failed: that is what it reports.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen import __version__
from reportgen.devices.host import dist_version
from reportgen.devices.neuron import explorer, hardware
from reportgen.errors import ConflictError, ExitCode, UsageError

DISTRIBUTIONS = ("torch", "torch-neuronx", "neuronx-cc")
ENV_PREFIXES = ("NEURON_", "TORCH_NEURONX_", "REPORTGEN_")
TAIL_CHARS = 4000
MAX_TIMEOUT_S = 7 * 24 * 3600
"""The longest limit ``--timeout-s`` takes: a week."""


@dataclass(frozen=True)
class DoctorRequest:
    """``reportgen doctor --device neuron``: the new folder to fill, the scenario to profile, an optional existing
    capture folder to inventory, and the limit for the profile run."""

    out: Path
    scenario: str = "rmsnorm"
    profile_output: Path | None = None
    timeout_s: float = 3600.0

    @property
    def archive(self) -> Path:
        """The ``.tar.gz`` written beside ``out``."""
        return self.out.with_name(self.out.name + ".tar.gz")

    def check(self) -> None:
        """Refuse an ``out`` that holds something or is a link, an archive path already taken (a link included), a
        ``profile_output`` that is not a folder, or a timeout that is not a finite number of seconds up to
        MAX_TIMEOUT_S."""
        if not (math.isfinite(self.timeout_s) and 0 < self.timeout_s <= MAX_TIMEOUT_S):
            raise UsageError(f"timeout_s {self.timeout_s:g}: expected seconds above 0 and at most {MAX_TIMEOUT_S}",
                             field="timeout_s")
        out = self.out
        if out.is_symlink():
            raise UsageError(f"out {out}: is a symbolic link; pick a new folder", field="out")
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UsageError(f"out {out}: exists and is not an empty folder; pick a new folder", field="out")
        if os.path.lexists(self.archive):
            raise ConflictError(f"out {out}: {self.archive} already exists; move it away or pick a new folder "
                                "(nothing was changed)", field="out")
        if self.profile_output is not None and not self.profile_output.is_dir():
            raise UsageError(f"profile_output {self.profile_output}: not a folder; pass a TorchNeuron profile_output/ "
                             "folder", field="profile_output")


def run_doctor(request: DoctorRequest) -> int:
    """Profile on neuron in a child process and write the diagnostics folder and its archive."""
    request.check()
    out = request.out
    out.mkdir(parents=True, exist_ok=True)
    diagnostics = _diagnostics(request)
    (out / "diagnostics.json").write_text(json.dumps(diagnostics, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    archive = request.archive
    _write_archive(out, archive)
    code = diagnostics["profile"]["exit_code"]
    print(f"profile exit code {code}: {diagnostics['profile']['stderr_last_line'] or 'no error output'}")
    print(f"diagnostics: {out / 'diagnostics.json'}")
    print(f"attach to the issue: {archive}")
    return int(ExitCode.OK)


def _write_archive(out: Path, archive: Path) -> None:
    """``archive``, a new file: never one that appeared since the check, never through a symbolic link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(archive, flags, 0o644)
    except FileExistsError:
        raise ConflictError(f"out {out}: {archive} appeared while the doctor ran; it was left as it is "
                            f"(the diagnostics are in {out})", field="out") from None
    with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz") as tar:
        tar.add(out, arcname=out.name)


def _diagnostics(request: DoctorRequest) -> dict[str, Any]:
    """Everything ``diagnostics.json`` says; writes the raw outputs and the profile's bundle into ``request.out``."""
    out = request.out
    ls = hardware.detect()
    if ls.raw is not None:
        (out / "neuron-ls.json").write_bytes(ls.raw)
    diagnostics: dict[str, Any] = {
        "reportgen_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "distributions": {d: dist_version(d) for d in DISTRIBUTIONS},
        "torch_neuronx_module": _module_version("torch_neuronx"),
        "neuron_ls": {"instance_type": ls.instance_type, "logical_neuroncore_config": ls.lnc, "note": ls.note,
                      "raw_file": "neuron-ls.json" if ls.raw is not None else None},
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "tools": {name: shutil.which(name) for name in ("neuron-explorer", "neuron-ls")},
        "profile": _profile(out, request.scenario, request.timeout_s),
        "bundle_files": _inventory(out / "store"),
    }
    if request.profile_output is not None:
        diagnostics["profile_output"] = _explore_folder(request.profile_output, out / "profile_output-explorer")
    return diagnostics


def _profile(out: Path, scenario: str, timeout_s: float) -> dict[str, Any]:
    """``reportgen profile --device neuron`` into ``out/store``, its output kept beside it."""
    argv = [sys.executable, "-m", "reportgen", "profile", "--device", "neuron", "--scenario", scenario,
            "--label", "doctor", "--quiet", "--store", str(out / "store")]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        return {"argv": argv[1:], "exit_code": None, "stderr_last_line": f"timed out after {timeout_s:g} s",
                "stdout_tail": _text(exc.stdout)[-TAIL_CHARS:], "stderr_tail": _text(exc.stderr)[-TAIL_CHARS:]}
    (out / "profile.stdout.txt").write_text(proc.stdout, encoding="utf-8")
    (out / "profile.stderr.txt").write_text(proc.stderr, encoding="utf-8")
    lines = proc.stderr.strip().splitlines()
    return {"argv": argv[1:], "exit_code": proc.returncode, "stderr_last_line": lines[-1] if lines else "",
            "stdout_tail": proc.stdout[-TAIL_CHARS:], "stderr_tail": proc.stderr[-TAIL_CHARS:]}


def _inventory(folder: Path) -> list[dict[str, Any]]:
    """Every file under ``folder``: path relative to it and size (links are listed, not followed)."""
    if not folder.is_dir():
        return []
    return [{"path": p.relative_to(folder).as_posix(), "size_bytes": p.lstat().st_size, "link": p.is_symlink()}
            for p in sorted(folder.rglob("*")) if p.is_file() or p.is_symlink()]


def _explore_folder(profile_output: Path, dest: Path) -> dict[str, Any]:
    """What a capture folder holds and neuron-explorer's raw outputs for each session in it."""
    sessions = sorted({p.parent for p in profile_output.rglob("*.ntff") if not p.is_symlink()})
    explored = []
    for i, session in enumerate(sessions):
        found = explorer.explore(session, 0, dest / f"session-{i}")
        for name, raw in found.raw.items():
            (dest / f"session-{i}" / name).write_bytes(raw)
        explored.append({"session": session.relative_to(profile_output).as_posix(), "tool": found.tool,
                         "notes": list(found.notes), "summary": found.summary, "counters_total": found.counters,
                         "raw_outputs": sorted(f"profile_output-explorer/session-{i}/{n}" for n in found.raw)})
    return {"path": str(profile_output), "files": _inventory(profile_output), "sessions": explored}


def _module_version(name: str) -> str:
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any import failure is a diagnostic, not a crash
        return f"cannot import: {type(exc).__name__}: {exc}"
    return str(getattr(module, "__version__", "imported, no __version__"))


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""
