"""File-system operations of the site, shared by ``build`` and ``publish``: the lock, the swap, links.

A site ``<parent>/<name>`` has its lock beside it, ``<parent>/.<name>.lock``: a build holds it
exclusively for its whole run, a publish holds it shared while it reads the site. A build writes
into ``.site-tmp-*`` next to the site and swaps it into place; where the system cannot exchange two
folders in one step, the old site is moved aside to ``.site-old-*`` first, under a name that carries
a hash of the site's exact name, so the next build of that site (and only of that site) puts it back.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from reportgen.errors import ConflictError, SiteError
from reportgen.store.outputs import enclosing_site
from reportgen.store.writer import make_temp_dir, remove_stale_temp_dirs, temp_owner_tag

TMP_PREFIX = ".site-tmp-"
OLD_PREFIX = ".site-old-"
BUILD_PREFIXES = (TMP_PREFIX, OLD_PREFIX)
"""Folders a build keeps next to the site while it runs; publish refuses a site with one beside it."""


def lock_path(site: Path) -> Path:
    """The lock file of a site: ``.<name>.lock`` beside it."""
    return site.parent / f".{site.name}.lock"


@contextlib.contextmanager
def exclusive_lock(out: Path) -> Iterator[None]:
    """Hold an exclusive, non-blocking lock beside the site for the whole build."""
    with open(lock_path(out), "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConflictError(f"another reportgen build or publish is using {out}; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def shared_lock(site: Path) -> Iterator[None]:
    """Hold a shared lock on the build's lock file; SiteError while a build holds it exclusively."""
    path = lock_path(site.resolve())
    if not path.exists():
        yield
        return
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as fh:  # a FIFO never blocks
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SiteError(f"{site}: a site build is in progress ({path} is locked); wait for it, "
                            "then publish") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def name_tag(out: Path) -> str:
    """A tag for ``out``'s temporary folders that only its exact name gives (``site`` and ``a-site`` differ)."""
    return hashlib.sha256(os.fsencode(out.name)).hexdigest()[:16]


def swap(tmp: Path, out: Path) -> None:
    """Put the new site in place: one atomic exchange of the folders where the system has it, else two renames.

    After an exchange ``tmp`` holds the old site (the caller deletes it). Without one, the old site is moved
    aside first; a kill between the two renames leaves it there, and the next build puts it back.
    """
    if not out.exists():
        os.rename(tmp, out)
        return
    if exchange(tmp, out):
        return
    aside = make_temp_dir(out.parent, name_tag(out), OLD_PREFIX)
    os.rmdir(aside)
    os.rename(out, aside)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(aside, out)
        raise
    shutil.rmtree(aside, ignore_errors=True)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step with Linux's renameat2(RENAME_EXCHANGE); False where it is not available."""
    try:
        func = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def commit(tmp: Path, out: Path, runs_dir: str) -> None:
    """Put the new site ``tmp`` in place, carrying the old site's run folders over by renaming, not copying.

    Run folders are never changed once published, so a build writes only its new (and redrawn) run
    folders into ``tmp/<runs_dir>``. They are renamed into the live site first (a redrawn one exchanged
    with its old version in one step); the live site's whole ``<runs_dir>`` is then renamed into ``tmp``,
    and ``tmp`` swapped with the site. The cost is that of the new pages, whatever the number of old ones.
    Between the last two steps the live site has no ``<runs_dir>``: a build killed there leaves it in its
    ``tmp`` folder, from where the next build's :func:`clear_leftovers` puts it back.
    """
    live_runs = out / runs_dir
    if not live_runs.is_dir() or live_runs.is_symlink():
        swap(tmp, out)
        return
    replaced = make_temp_dir(out.parent, name_tag(out), TMP_PREFIX)  # the old versions of redrawn run pages
    try:
        _carry_runs(tmp, out, runs_dir, replaced)
    finally:
        shutil.rmtree(replaced, ignore_errors=True)


def _carry_runs(tmp: Path, out: Path, runs_dir: str, replaced: Path) -> None:
    """Move the new run folders into the live site, the live run folders into ``tmp``, swap; undone on an error."""
    live_runs, new_runs = out / runs_dir, tmp / runs_dir
    added: list[str] = []
    redrawn: list[str] = []
    try:
        for name in sorted(os.listdir(new_runs)):
            live = live_runs / name
            if not os.path.lexists(live):
                os.rename(new_runs / name, live)
                added.append(name)
                continue
            os.rename(live, replaced / name)  # the old version aside (a kill here: the next build draws it again)
            redrawn.append(name)
            os.rename(new_runs / name, live)
        os.rmdir(new_runs)
        os.rename(live_runs, new_runs)
    except OSError:
        _undo_carry(live_runs, new_runs, replaced, added, redrawn)
        raise
    try:
        swap(tmp, out)
    except OSError:
        os.rename(new_runs, live_runs)
        _undo_carry(live_runs, None, replaced, added, redrawn)
        raise


def _undo_carry(live_runs: Path, new_runs: Path | None, replaced: Path, added: list[str], redrawn: list[str]) -> None:
    """After a failed commit: the live site's run folders as they were (the new ones deleted, old versions back)."""
    if new_runs is not None and not live_runs.exists() and new_runs.is_dir():
        os.rename(new_runs, live_runs)
    for name in added:
        shutil.rmtree(live_runs / name, ignore_errors=True)
    for name in redrawn:
        if (replaced / name).exists():
            shutil.rmtree(live_runs / name, ignore_errors=True)
            os.rename(replaced / name, live_runs / name)


def own_tmp_pattern(out: Path) -> re.Pattern[str]:
    """Names of ``out``'s own temporary build folders on this host (any process id), and of no other site's."""
    host = temp_owner_tag().rsplit("-p", 1)[0]
    return re.compile(rf"{re.escape(TMP_PREFIX + host)}-p\d+-{name_tag(out)}-[A-Za-z0-9_]+")


def own_aside_pattern(out: Path) -> re.Pattern[str]:
    """Names of ``out``'s moved-aside copies on this host (any process id), and of no other site's."""
    host = temp_owner_tag().rsplit("-p", 1)[0]
    return re.compile(rf"{re.escape(OLD_PREFIX + host)}-p\d+-{name_tag(out)}-[A-Za-z0-9_]+")


def clear_leftovers(out: Path, is_site: Path, runs_dir: str | None = None) -> None:
    """Under the lock: put back ``out`` if a killed build had moved it aside, then delete killed builds' folders.

    ``is_site``: the file (relative to a site) that a moved-aside copy must hold to be put back. Only
    ``out``'s own moved-aside copies are considered; a neighbour's stays for its own next build.
    """
    pattern = own_aside_pattern(out)
    stale = [p for p in remove_stale_temp_dirs(out.parent, OLD_PREFIX, dry_run=True) if pattern.fullmatch(p.name)]
    if not out.exists() and len(stale) == 1 and (stale[0] / is_site).is_file():
        os.rename(stale[0], out)
        stale = []
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    if runs_dir is not None:
        _put_back_runs(out, is_site, runs_dir)
    remove_stale_temp_dirs(out.parent, TMP_PREFIX)


def _put_back_runs(out: Path, is_site: Path, runs_dir: str) -> None:
    """A build killed inside :func:`commit` left the site's run folders in its temporary folder: put them back."""
    if not (out / is_site).is_file() or os.path.lexists(out / runs_dir):
        return
    pattern = own_tmp_pattern(out)
    for p in remove_stale_temp_dirs(out.parent, TMP_PREFIX, dry_run=True):
        if pattern.fullmatch(p.name) and (p / runs_dir).is_dir():
            os.rename(p / runs_dir, out / runs_dir)
            return


def check_build_target(out: Path, store: Path, markers: tuple[str, ...]) -> None:
    """Refuse, before anything is written (no lock file, no folder), an ``--out`` a build must not use."""
    resolved = out.resolve()
    if not out.name or resolved == Path(resolved.anchor):
        raise SiteError(f"out {str(out)!r}: pass a folder to build the site in, not the file-system root "
                        "(nothing was changed)", field="out")
    if out.is_symlink():
        raise SiteError(f"{out}: is a symbolic link; pass --out the real site folder (the lock is kept beside it)")
    store_dir = store.resolve()
    if resolved == store_dir or store_dir in resolved.parents:
        raise SiteError(f"out {out}: is inside the results folder {store}; build the site outside it "
                        "(nothing was changed)", field="out")
    site = enclosing_site(resolved, markers)
    if site is not None:
        raise SiteError(f"out {out}: is inside the site {site}; pass the site folder itself or a folder "
                        "outside it (nothing was changed)", field="out")
    if out.exists() and not out.is_dir():
        raise SiteError(f"{out}: is a file, not a site folder; pass --out a folder")
