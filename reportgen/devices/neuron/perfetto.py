"""Perfetto traces of a capture session, and the commands that open a variant's profile again.

Documented (SDK ``tools/neuron-explorer/view-perfetto.rst``): ``neuron-explorer view -d DIR --output-format
perfetto`` writes ``system_profile.pftrace`` for the system profile and one ``device_profile_model_<model_id>.pftrace``
per compiled model executed, to be opened at https://ui.perfetto.dev/ (loaded locally, not uploaded); browsers may
run out of memory on files of more than a few hundred MB. The folder it writes into is not documented (the page's
example names no ``--output-file``): reportgen runs the documented command in an empty folder of its own and keeps
the ``.pftrace`` files it finds there (assumed). A file above MAX_PFTRACE_BYTES is not kept, with a note; a failed
call is a note, never a failed run.

Neuron Explorer's own UI (SDK ``tools/tutorials/performance-profiling-vllm.rst``, "Ingest and launch the UI"):
``neuron-explorer view -d DIR --data-path WORKSPACE --display-name NAME`` prints
``View profile at http://localhost:3001/profile/NAME``; on a remote instance both ports 3001 (UI) and 3002 (API)
must be forwarded (``tools/neuron-explorer/get-started.rst``). That ``-d`` accepts the flat folder a run keeps its
session files in (``artifacts/<variant>/``: .neff, .ntff, .pb) is assumed.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from reportgen.devices.neuron.explorer import EXPLORER, Runner, call
from reportgen.model.run import Run

PFTRACE_KIND = "pftrace"
"""The artifact kind of a kept .pftrace file (published with the suffix .pftrace)."""
PERFETTO_DIR = "neuron-explorer-perfetto"
"""reportgen's empty folder the perfetto export runs in."""
MAX_PFTRACE_BYTES = 100 * 2**20
"""Above this a .pftrace is not kept: every kept file is copied into the store and onto the published site, and
the SDK warns that browsers may run out of memory above a few hundred MB."""
PERFETTO_UI = "https://ui.perfetto.dev/"
UI_URL = "http://localhost:3001/profile/"
WORKSPACE = "neuron-explorer-workspace"
"""The ``--data-path`` the shown command names: a folder Neuron Explorer keeps its processed profiles in."""
SESSION_KINDS = frozenset({"neff", "ntff", "pb"})


@dataclass(frozen=True)
class PerfettoExport:
    """The .pftrace files kept from one session, and notes on what was not (a failure, a file too large)."""

    files: tuple[Path, ...]
    notes: tuple[str, ...]


def export(exe: str, session: Path, scratch: Path, run: Runner, max_bytes: int | None = None) -> PerfettoExport:
    """``neuron-explorer view -d SESSION --output-format perfetto`` in ``scratch/PERFETTO_DIR``: the files to keep."""
    limit = MAX_PFTRACE_BYTES if max_bytes is None else max_bytes
    folder = scratch / PERFETTO_DIR
    if folder.is_dir():
        shutil.rmtree(folder)  # reportgen's own scratch folder: no file of an earlier call may be kept
    folder.mkdir(parents=True)
    argv = (exe, "view", "-d", str(session), "--output-format", "perfetto")
    problem = call(argv, run, folder)[1]
    if problem:
        return PerfettoExport((), (f"Perfetto export: {problem}; the run is kept without .pftrace files",))
    found = sorted(p for p in folder.rglob("*.pftrace") if p.is_file() and not p.is_symlink())
    if not found:
        return PerfettoExport((), ("Perfetto export: neuron-explorer wrote no .pftrace file",))
    kept = tuple(p for p in found if p.stat().st_size <= limit)
    notes = [f"Perfetto export: {p.name} not kept ({p.stat().st_size:,} bytes, above reportgen's limit of "
             f"{limit:,} bytes); write it again with: neuron-explorer view -d <session> --output-format perfetto"
             for p in found if p not in kept]
    if kept:
        notes.append(f"Perfetto export: {', '.join(p.name for p in kept)} kept (open at {PERFETTO_UI})")
    return PerfettoExport(kept, tuple(notes))


@dataclass(frozen=True)
class Opening:
    """How a variant's stored profile is opened again: Neuron Explorer's UI command, and the .pftrace files."""

    ui_command: str | None  # None: the run keeps no .ntff for this variant
    ui_url: str
    pftrace: tuple[str, ...]  # bundle-relative paths of the kept .pftrace files


def opening(run_id: str, variant: str, artifacts: Iterable[tuple[str, str]]) -> Opening | None:
    """The commands for one variant from its artifacts (bundle-relative path, kind); None when it kept nothing
    Neuron Explorer or Perfetto opens. Every path and name is shell-quoted."""
    arts = list(artifacts)
    pftrace = tuple(path for path, kind in arts if kind == PFTRACE_KIND)
    sessions = sorted({str(PurePosixPath(path).parent) for path, kind in arts if kind == "ntff"})
    if not pftrace and not sessions:
        return None
    name = f"{run_id}-{variant}"
    command = None
    if sessions:
        command = " ".join((EXPLORER, "view", "-d", shlex.quote(sessions[0]), "--data-path", shlex.quote(WORKSPACE),
                            "--display-name", shlex.quote(name)))
    return Opening(command, UI_URL + quote(name, safe=""), pftrace)


def openings(run: Run) -> dict[str, Opening]:
    """Variant name -> Opening for a stored run's variants (the templates' ``neuron_openings`` filter)."""
    found: dict[str, Opening] = {}
    for v in run.variants:
        one = opening(run.run_id, v.name, [(a.path, a.kind) for a in v.artifacts])
        if one is not None:
            found[v.name] = one
    return found
