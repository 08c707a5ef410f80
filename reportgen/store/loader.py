"""Reading the store: the one loader of a run bundle, its member files, the listing of runs, run references."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reportgen.errors import BundleError
from reportgen.model.run import Run, RunSource
from reportgen.store.files import NotRegularFile, open_regular
from reportgen.store.layout import RUN_FILE, is_safe_relpath, is_valid_run_id
from reportgen.store.runjson import MAX_RUN_JSON_BYTES, parse_run_json
from reportgen.store.withdrawn import read_withdrawn

MAX_LATEST_DIGITS = 9
"""``latest~N`` with a longer N is refused before it is converted (a 5,000-digit N would not convert at all)."""


def load_run(bundle_dir: Path) -> Run:
    """Load and validate ``<bundle_dir>/run.json``: the only way the program reads a bundle."""
    path = bundle_dir / RUN_FILE
    if bundle_dir.is_symlink() or path.is_symlink():
        raise BundleError(f"{path}: is a symbolic link; run bundles must be real folders inside the store")
    try:
        with open_regular(path) as fh:
            raw = fh.read(MAX_RUN_JSON_BYTES + 1)
    except NotRegularFile:
        raise BundleError(f"{path}: is not a regular file; the bundle is corrupt") from None
    except FileNotFoundError:
        raise BundleError(f"{path}: missing; {bundle_dir} is not a run bundle") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read ({exc.strerror})") from None
    run = parse_run_json(raw, path)
    if run.run_id != bundle_dir.name:
        raise BundleError(
            f"{path}: field 'run_id' is {run.run_id!r} but the folder is {bundle_dir.name!r}; "
            "rename the folder to the run id"
        )
    return run


def member_file(bundle_dir: Path, rel: str) -> Path:
    """The regular file ``rel`` inside a bundle; refuses links and paths that leave the bundle."""
    if not is_safe_relpath(rel):
        raise BundleError(f"{bundle_dir / RUN_FILE}: names {rel[:60]!r}, which points outside the bundle")
    path = bundle_dir
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            raise BundleError(f"{path}: is a symbolic link; files of a run bundle must be real files inside it")
    if not path.is_file():
        if path.exists():  # a FIFO or device would block the reader
            raise BundleError(f"{path}: is not a regular file; the bundle is corrupt")
        raise BundleError(f"{path}: missing, but run.json names it; the bundle is incomplete")
    return path


@dataclass(frozen=True)
class StoreListing:
    """The run folders of a store as one read of its directory gave them: names, not a ``Path`` per run (a build
    lists a 10,000-run store twice, and a ``Path`` per run cost each listing about 25 ms)."""

    store: Path
    names: tuple[str, ...]
    """The run folders' names, sorted (hidden and temporary folders excluded)."""
    links: frozenset[str]
    """Those of ``names`` that are symbolic links (the directory entry says so: no ``lstat``)."""

    def path(self, name: str) -> Path:
        return self.store / name

    def paths(self) -> list[Path]:
        return [self.store / name for name in self.names]


def list_store(store: Path) -> StoreListing:
    """The run folders of ``store`` (hidden and temporary folders excluded), sorted by name.

    A store that does not exist has no runs; a link to nothing, or one that loops, is an error, not an empty store
    (so is a path the system refuses: the OSError names it)."""
    try:
        store.stat()
    except FileNotFoundError:
        if store.is_symlink():
            raise BundleError(f"{store}: is a symbolic link to nothing; fix the link or pass --store a folder") from None
        return StoreListing(store, (), frozenset())
    if not store.is_dir():
        raise BundleError(f"{store}: is not a folder; pass --store a results folder")
    names: list[str] = []
    links: list[str] = []
    with os.scandir(store) as entries:  # the directory's own entry types: no stat per run on most file systems
        for e in entries:
            if _is_run_folder(e):
                names.append(e.name)
                if e.is_symlink():
                    links.append(e.name)
    return StoreListing(store, tuple(sorted(names)), frozenset(links))


def _is_run_folder(entry: os.DirEntry[str]) -> bool:
    """Whether a store's directory entry is listed as a run: a folder or a link, not hidden (nor temporary)."""
    return not entry.name.startswith(".") and (entry.is_symlink() or entry.is_dir(follow_symlinks=False))


def list_run_dirs(store: Path) -> list[Path]:
    """The run folders of ``store`` as paths (:func:`list_store`'s)."""
    return list_store(store).paths()


def load_store(store: Path) -> list[Run]:
    """Every run in ``store``, oldest first; any invalid bundle is an error naming it."""
    runs = [load_run(d) for d in list_run_dirs(store)]
    return sorted(runs, key=lambda r: (r.created_utc, r.run_id))


def load_store_tolerant(store: Path) -> tuple[list[Run], list[BundleError]]:
    """Every valid run in ``store`` (oldest first) and the error of each bundle that does not load.

    For commands that can go on without a bad bundle (``runs``, ``build``): one corrupt bundle must not hide
    the others. A store that is not a folder is still an error.
    """
    runs: list[Run] = []
    problems: list[BundleError] = []
    dirs = list_run_dirs(store)
    for d in dirs:
        try:
            runs.append(load_run(d))
        except BundleError as exc:
            problems.append(exc)
    if not runs:
        check_is_store(store, [d.name for d in dirs])
    return sorted(runs, key=lambda r: (r.created_utc, r.run_id)), problems


def check_is_store(store: Path, names: Sequence[str]) -> None:
    """Refuse, in one line, a folder that is a run bundle or holds folders but no bundle at all (``--store docs/``):
    a wrong path, not a store of broken runs to list one error each. ``names``: its run folders' names."""
    if os.path.lexists(store / RUN_FILE):
        raise BundleError(f"{store}: is a run bundle, not a store; pass the folder that holds it ({store.parent})")
    root = os.fspath(store)
    if names and not any(os.path.lexists(os.path.join(root, n, RUN_FILE)) for n in names):
        raise BundleError(f"{store}: not a results store (none of its {len(names)} folder(s) holds a {RUN_FILE}); "
                          "pass the store folder (--store; default ./results)")


def check_store_has_runs(store: Path) -> bool:
    """Whether the folder ``store`` holds a run folder; refuse (as :func:`check_is_store`) a run bundle or a folder
    of folders none of which holds a ``run.json``. Reads the directory only until its first bundle, so checking a
    large store before a build does not list it (the build lists it under its lock)."""
    if os.path.lexists(store / RUN_FILE):
        check_is_store(store, ())
    found = False
    with os.scandir(store) as entries:
        for e in filter(_is_run_folder, entries):
            if os.path.lexists(os.path.join(e.path, RUN_FILE)):
                return True
            found = True
    if found:
        check_is_store(store, list_store(store).names)  # refuses it, naming how many folders it has
    return found


def resolve_run_dir(store: Path, ref: str, scenario: str | None = None, machine: str | None = None) -> Path:
    """A run folder from a run id, a folder path, ``latest``/``latest~N``, a label or a git sha (prefix).

    ``latest~N`` counts back among profiled, not withdrawn runs of one scenario and machine: those
    given, else the newest such run's. A label or sha names the newest matching run (within the filters).
    """
    if ref.startswith("-"):
        raise BundleError(f"{ref[:60]!r}: a run name cannot start with '-' (it reads as an option); write a folder "
                          "as ./NAME")
    m = re.fullmatch(r"latest(?:~(\d+))?", ref)
    if m and len(m.group(1) or "") > MAX_LATEST_DIGITS:
        raise BundleError(f"'{ref[:20]}…': N in latest~N has more than {MAX_LATEST_DIGITS} digits; no store has that "
                          "many runs")
    if m:
        runs = candidate_runs(store, scenario, machine, ref)
        back = int(m.group(1) or 0)
        if back >= len(runs):
            within = f" of scenario {runs[-1].scenario.name!r} on machine {run_machine(runs[-1]) or '(unnamed)'}" \
                if runs else ""
            raise BundleError(f"{store}: has {len(runs)} run(s){within}; '{ref}' does not exist")
        return store / runs[-1 - back].run_id
    as_path = Path(ref)
    if (as_path / RUN_FILE).exists():
        return as_path
    if is_valid_run_id(ref) and (store / ref).is_dir():
        return store / ref
    matches = [r for r in _filtered(load_store(store), scenario, machine) if r.label == ref
               or (re.fullmatch(r"[0-9a-f]{7,40}", ref) and (r.git.sha or "").startswith(ref))] if ref else []
    if matches:
        return store / matches[-1].run_id
    raise BundleError(f"{ref}: no such run in {store} and not a bundle folder, label or git sha; see 'reportgen runs'")


def run_machine(run: Run) -> str | None:
    """The machine name a run was recorded with (None: unnamed)."""
    return getattr(run.environment, "machine", None)


def _filtered(runs: list[Run], scenario: str | None, machine: str | None) -> list[Run]:
    return [r for r in runs if (scenario is None or r.scenario.name == scenario)
            and (machine is None or run_machine(r) == machine)]


def candidate_runs(store: Path, scenario: str | None, machine: str | None, ref: str = "latest") -> list[Run]:
    """What ``latest~N`` counts: profiled, not withdrawn runs, oldest first, of one scenario and machine."""
    withdrawn = read_withdrawn(store) if store.is_dir() else {}
    runs = [r for r in load_store(store) if r.source is RunSource.PROFILE and r.run_id not in withdrawn]
    runs = _filtered(runs, scenario, machine)
    if runs and (scenario is None or machine is None):
        newest = runs[-1]
        runs = _filtered(runs, scenario or newest.scenario.name, machine or run_machine(newest))
        if machine is None and run_machine(newest) is None:
            runs = [r for r in runs if run_machine(r) is None]
    return runs
