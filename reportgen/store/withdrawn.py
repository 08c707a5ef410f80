"""Withdrawn runs: ``<store>/withdrawn.json`` lists runs taken out of the history, and why.

Bundles are immutable, so ``reportgen rm`` never deletes or edits one: it records the withdrawal
in this one versioned file beside the bundles (a file, so the store's listing of run folders
ignores it). Every change is a read-modify-write under the store's lock, ``<store>/.withdrawn.lock``
(:func:`add_withdrawal`), so two ``rm`` at once both land; readers need no lock (the file is replaced
atomically). Withdrawn runs are skipped by history, ``latest~N`` and ``reportgen runs`` (unless
asked), and their permanent page says that they were withdrawn and why.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reportgen.errors import BundleError
from reportgen.model.codec import from_jsonable, to_jsonable
from reportgen.store.atomic import new_file_mode
from reportgen.store.files import NotRegularFile, file_kind, read_regular
from reportgen.text.documents import Limits, load_json

WITHDRAWN_FILE = "withdrawn.json"
LOCK_FILE = ".withdrawn.lock"
WITHDRAWN_SCHEMA_VERSION = 1
MAX_REASON_CHARS = 500
WITHDRAWN_LIMITS = Limits(max_bytes=256 * 1024 * 1024)


@dataclass(frozen=True)
class Withdrawal:
    """One withdrawn run: when, and the reason given."""

    run_id: str
    withdrawn_utc: str
    reason: str


@dataclass(frozen=True)
class WithdrawnFile:
    """The content of ``withdrawn.json``."""

    schema_version: int
    withdrawals: tuple[Withdrawal, ...] = ()


def read_withdrawn(store: Path) -> dict[str, Withdrawal]:
    """Run id -> its withdrawal; empty when the store has no ``withdrawn.json``."""
    path = store / WITHDRAWN_FILE
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return {}
    except NotRegularFile as exc:
        raise BundleError(f"{exc}; delete it, or restore it from git") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read ({exc.strerror}); restore it from git or delete it") from None
    data = load_json(raw, path, WITHDRAWN_LIMITS, fix="restore it from git or delete it", error=BundleError)
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= WITHDRAWN_SCHEMA_VERSION:
        raise BundleError(f"{path}: field 'schema_version' is {version!r}; this reportgen reads "
                          f"{WITHDRAWN_SCHEMA_VERSION} (upgrade reportgen, or restore the file)")
    doc = from_jsonable(WithdrawnFile, data, path)
    return {w.run_id: w for w in doc.withdrawals}


def add_withdrawal(store: Path, entry: Withdrawal) -> None:
    """Record ``entry`` in ``withdrawn.json``, keeping every other withdrawal: read, add, write under the lock."""
    with _update_lock(store):
        write_withdrawn(store, {**read_withdrawn(store), entry.run_id: entry})


@contextlib.contextmanager
def _update_lock(store: Path) -> Iterator[None]:
    """Hold ``<store>/.withdrawn.lock`` exclusively, waiting for another ``rm`` to finish (it holds it briefly)."""
    path = store / LOCK_FILE
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise BundleError(f"{path}: cannot be opened ({exc.strerror}); delete it if it is not a regular file") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise BundleError(f"{path}: is {file_kind(mode)}, not a regular file; delete it")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_withdrawn(store: Path, withdrawals: dict[str, Withdrawal]) -> None:
    """Replace ``withdrawn.json`` atomically (temporary file, then rename)."""
    doc = WithdrawnFile(WITHDRAWN_SCHEMA_VERSION, tuple(withdrawals[k] for k in sorted(withdrawals)))
    text = json.dumps(to_jsonable(doc), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".withdrawn.", suffix=".tmp", dir=store)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), new_file_mode())  # the mode open() gives, not the temporary file's 0600
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, store / WITHDRAWN_FILE)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
