"""A guarded open for reading: only a regular file, so a FIFO or device never blocks a reader."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """The path is a FIFO, socket or device: reading it could block for ever."""


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
            raise NotRegularFile(f"{path}: not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")
