"""Atomic text-file writes: a temporary file renamed into place, and a command's ``--output`` file on top of it."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from reportgen.errors import UsageError
from reportgen.store.files import file_kind
from reportgen.store.outputs import check_output_path


def write_output(path: Path, text: str, store: Path | None) -> None:
    """Write ``text`` to ``path``: a new file or a regular one, replaced atomically; a symlink is written through.

    A symlink to a regular file (or to a new path) has its target replaced and stays a link; a path that
    is (or links to) a device, FIFO, socket or folder is refused, and so is one inside ``store``, a run bundle
    or a built site (:func:`reportgen.store.outputs.check_output_path`): nothing there is changed.
    """
    target = check_output_path(path, store)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be written ({exc.strerror}); use a writable path") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path}: is {file_kind(st.st_mode)}, not a regular file; give a new path or a regular file")
    try:
        write_text_atomic(target, text, mode=stat.S_IMODE(st.st_mode) if st is not None else None)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be written ({exc.strerror}); use a writable path") from None


def make_folders(folder: Path) -> None:
    """``mkdir -p`` one level at a time, in a loop: pathlib's ``mkdir(parents=True)`` recurses once per missing
    level, so a path 1,000 folders deep (``--output d/d/.../x``) was a RecursionError (exit 70), not a folder."""
    missing: list[Path] = []
    while not folder.is_dir() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for level in reversed(missing):
        level.mkdir(exist_ok=True)


def new_file_mode() -> int:
    """0666 less the process's umask: the mode ``open()`` gives a new file (a temporary file gets 0600, which a web
    server serving the site, or a colleague reading the store, could not read). Read from /proc where it can be
    (changing the umask to read it is not thread-safe)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to a temporary file next to ``path`` and rename it into place, with ``mode`` if given, else
    the mode a new file gets (:func:`new_file_mode`)."""
    make_folders(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, new_file_mode() if mode is None else mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
