"""A guarded open for reading: only a regular file, so a FIFO or device never blocks a reader.

Every read of a file in the store or a site (run.json, withdrawn.json, manifest.json, a trace) goes through
:func:`open_regular` or :func:`read_regular`."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """The path is a FIFO, socket or device: reading it could block for ever."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words: ``a FIFO``, ``a folder``, ``a character device``..."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def open_regular(path: Path) -> io.BufferedReader:
    """Open ``path`` for reading only if it is a regular file: a FIFO or device would block or never end.

    The open itself does not block (O_NONBLOCK); the type is checked on the opened file, so it cannot change
    between the check and the read. Raises IsADirectoryError for a folder, NotRegularFile for anything else.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path}: is {file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, read through :func:`open_regular` (at most ``limit`` + 1 bytes,
    so a caller can tell a file over its limit); the errors are open_regular's."""
    with open_regular(path) as fh:
        return fh.read() if limit is None else fh.read(limit + 1)

