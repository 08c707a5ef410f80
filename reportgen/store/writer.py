"""Writing bundles: each into a hidden temporary folder, made durable, then renamed into place, never overwritten.

A store is a folder of run folders: ``<store>/<run_id>/run.json`` plus traces and
artifacts. A bundle is written into a hidden temporary folder and renamed into place,
so a crash never leaves a partial run; once written it is never modified.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path

from reportgen.errors import BundleError, ConflictError
from reportgen.model.run import Run
from reportgen.store.atomic import make_folders
from reportgen.store.layout import RUN_FILE, is_safe_relpath, is_valid_run_id, slug
from reportgen.store.runjson import parse_run_json, run_to_json

TMP_PREFIX = ".tmp-"
STAGING_DIR = ".tmp"
"""The hidden folder of a store where bundles are written before each is renamed into the store. A writer looks for
what killed writers left there, not in the store: listing the store made a write into a 100,000-run store take
62.7 ms, against 8.2 ms now (``benchmarks/results/store_one_run_staging_d2e1143.txt``). Earlier versions wrote
beside the runs, as hidden ``.tmp-*`` folders, which no reader lists."""
STAGING_ATTEMPTS = 10
"""Tries at making a temporary folder in the staging folder while finishing writers remove it (each try follows one
such removal)."""


class StoreWriteError(BundleError):
    """A folder or file cannot be written (disk full, read-only, not a folder): ``path`` and ``reason`` say which."""

    def __init__(self, path: Path | str, reason: str, fix: str = "choose another folder") -> None:
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: cannot write ({reason}); {fix}")


def cannot_write(exc: OSError, where: Path | str) -> StoreWriteError:
    """The one-line error for an OSError met while writing under ``where`` (the file it names, if any)."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return StoreWriteError(exc.filename if exc.filename else where, exc.strerror or type(exc).__name__,
                           "free some space or choose another folder" if full else "choose another folder")


def check_store(store: Path) -> None:
    """Refuse a store path that exists but is not a folder (before any work is done)."""
    if store.exists() and not store.is_dir():
        raise BundleError(f"{store}: is not a folder; pass --store a results folder")


def write_bundle(store: Path, run: Run, files: Mapping[str, Path | bytes]) -> Path:
    """Write ``run`` and its files as a new bundle atomically; refuse to overwrite an existing run.

    ``files`` maps bundle-relative paths to source files (copied) or bytes.
    """
    if not is_valid_run_id(run.run_id):
        raise BundleError(f"run id {run.run_id!r} is not a safe folder name")
    text = checked_run_json(run, store / run.run_id / RUN_FILE)
    check_store(store)
    try:
        return _write_bundle_files(store, run, files, text)
    except OSError as exc:
        raise cannot_write(exc, store) from None


def checked_run_json(run: Run, source: Path | str) -> str:
    """``run.json`` text for ``run``, refused unless the loader accepts it: whatever is stored must load."""
    try:
        text = run_to_json(run)
    except ValueError as exc:
        raise BundleError(f"{source}: {exc}; the run was not stored") from None
    try:
        parse_run_json(text, source)
    except BundleError as exc:
        raise BundleError(f"{exc.message}; the run was not stored") from None
    return text


def _write_bundle_files(store: Path, run: Run, files: Mapping[str, Path | bytes], text: str) -> Path:
    make_folders(store)
    final = store / run.run_id
    if final.exists():
        raise ConflictError(f"{final}: a run with this id already exists; stored runs are never overwritten")
    tmp = staging_temp_dir(store, run.run_id[:40])
    try:
        for rel, content in sorted(files.items()):
            _write_member(tmp, rel, content)
        _write_member(tmp, RUN_FILE, text.encode("utf-8"))
        os.chmod(tmp, 0o755)
        _fsync_dir(tmp)
        try:
            os.rename(tmp, final)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise ConflictError(f"{final}: a run with this id already exists; stored runs are never overwritten") from None
        _fsync_dir(store)
        with contextlib.suppress(FileNotFoundError):  # the staging folder's entry is gone too (unless another
            _fsync_dir(tmp.parent)  # writer, finding it empty, removed the folder: nothing of it to keep then)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        release_staging(store)
    return final


def staging_temp_dir(store: Path, tag: str) -> Path:
    """A new temporary folder in ``store``'s staging folder (made with the store if missing), after removing what
    writers killed on this host left there. Made again when a writer that finished meanwhile removed the staging
    folder (it was empty): the folder is removed only when empty, and this writer's own folder keeps it from then on."""
    staging = store / STAGING_DIR
    for attempt in range(1, STAGING_ATTEMPTS + 1):
        make_folders(staging)
        try:
            tmp = make_temp_dir(staging, tag)
            break
        except FileNotFoundError:
            if attempt == STAGING_ATTEMPTS:
                raise
        except BaseException:
            release_staging(store)  # a store that cannot be written is left as it was
            raise
    remove_stale_temp_dirs(staging)  # lists the staging folder, not the store: a write costs the same at any size
    return tmp


def release_staging(store: Path) -> None:
    """Remove ``store``'s staging folder if it is empty (another writer's folder, or a killed one's, keeps it): a
    store holds only its runs and catalog between writes."""
    try:
        (store / STAGING_DIR).rmdir()
    except OSError:
        pass


def temp_owner_tag() -> str:
    """``<host>-p<pid>``: put in a temporary folder's name so a later run can tell when its maker is gone."""
    return f"{slug(socket.gethostname(), 30)}-p{os.getpid()}"


def make_temp_dir(folder: Path, tag: str, prefix: str = TMP_PREFIX) -> Path:
    """A hidden temporary folder in ``folder`` named ``<prefix><host>-p<pid>-<tag>-XXXX`` (see remove_stale_temp_dirs)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{temp_owner_tag()}-{slug(tag, 40) or 'x'}-", dir=folder))


def remove_stale_temp_dirs(folder: Path, prefix: str = TMP_PREFIX, dry_run: bool = False) -> list[Path]:
    """Delete the temporary folders in ``folder`` left by a killed reportgen on this host (its pid is gone).

    Only names made by make_temp_dir with ``prefix`` are considered; a folder of a live process, of another
    host (a shared store), or of unknown shape is left alone. Returns the stale folders (only listed if dry_run).
    """
    own = f"{prefix}{temp_owner_tag().rsplit('-p', 1)[0]}-p"
    removed = []
    # names, not a Path per entry: a mirror of an object store (sync_store) may hold 100,000 runs
    for name in sorted(n for n in os.listdir(folder) if n.startswith(own)) if folder.is_dir() else []:
        pid, p = name[len(own):].split("-", 1)[0], folder / name
        if not pid.isdigit() or p.is_symlink() or not p.is_dir():
            continue
        if not _pid_alive(int(pid)):
            if not dry_run:
                shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _pid_alive(pid: int) -> bool:
    """True when a process with this id exists on this host (a reused pid errs on the side of keeping)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _write_member(root: Path, rel: str, content: Path | bytes) -> None:
    if not is_safe_relpath(rel):
        raise BundleError(f"bundle member path {rel!r} is not a safe relative path")
    dest = root / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        with open(dest, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
    else:
        shutil.copyfile(content, dest)
        with open(dest, "rb") as fh:  # durable before the rename publishes the bundle, like the bytes above
            os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
