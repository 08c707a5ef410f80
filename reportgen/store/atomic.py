"""Atomic text-file writes: a temporary file renamed into place, and a command's ``--output`` file on top of it."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from reportgen.errors import UsageError


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path``: a new file or a regular one, replaced atomically; a symlink is written through.

    A symlink to a regular file (or to a new path) has its target replaced and stays a link; a path that
    is (or links to) a device, FIFO, socket or folder is refused: nothing there is changed.
    """
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be written ({exc.strerror}); use a writable path") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path}: is {_file_kind(st.st_mode)}, not a regular file; give a new path or a regular file")
    try:
        write_text_atomic(target, text, mode=stat.S_IMODE(st.st_mode) if st is not None else None)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be written ({exc.strerror}); use a writable path") from None


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to a temporary file next to ``path`` and rename it into place (keeping ``mode`` if given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
