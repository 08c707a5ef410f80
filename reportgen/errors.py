"""One exception tree: every user-facing failure is a ReportgenError with a one-line message."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from enum import IntEnum


class ExitCode(IntEnum):
    """Documented process exit codes (docs/exit-codes.md)."""

    OK = 0
    REGRESSION = 1  # compare --fail-on-regression found a significant slowdown
    USAGE = 2  # bad command-line arguments
    BAD_INPUT = 3  # a file (bundle, trace, site) is missing, corrupt or of an unknown version
    VARIANT_FAILED = 4  # profile finished but at least one variant failed or was incorrect
    DEVICE_UNAVAILABLE = 5  # the requested device or its software stack is not present
    CONFLICT = 6  # another reportgen holds the store/site lock, or the run id already exists
    INCONCLUSIVE = 7  # ab: the verdict was still inconclusive when the time budget ran out
    INTERNAL = 70  # a bug: an unexpected exception


class ReportgenError(Exception):
    """Base of every error the CLI turns into a one-line message and an exit code."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.field = field  # the request field the message starts with, when a command-line flag sets it

    def as_flag_message(self) -> str:
        """The message as the command line shows it: a leading field name becomes its flag (``base_url`` ->
        ``--base-url``); the library itself never names flags."""
        text = self.message
        if self.field and (text == self.field or text.startswith((self.field + " ", self.field + ":"))):
            return "--" + self.field.replace("_", "-") + text[len(self.field):]
        return text

    @property
    def message(self) -> str:
        return str(self)


class UsageError(ReportgenError):
    """A command-line argument is wrong."""

    exit_code = ExitCode.USAGE


class BundleError(ReportgenError):
    """A run bundle is missing, corrupt, or of an unsupported schema version."""


class TraceError(ReportgenError):
    """A profiler trace cannot be read."""


class SiteError(ReportgenError):
    """The site cannot be built or published."""


class DeviceUnavailable(ReportgenError):
    """The requested device, or the software it needs, is not present."""

    exit_code = ExitCode.DEVICE_UNAVAILABLE


class ScenarioError(ReportgenError):
    """A scenario file cannot be found or does not declare what it must."""

    exit_code = ExitCode.USAGE


class ConflictError(ReportgenError):
    """Another process holds the lock, or the target already exists."""

    exit_code = ExitCode.CONFLICT


class CompareError(ReportgenError):
    """Two runs cannot be compared."""


class ConfigError(ReportgenError):
    """A value in the project configuration (file, environment variable or flag) is wrong."""


class ApiError(ReportgenError):
    """The GitHub API cannot be reached safely, refused the request, or answered something unexpected."""


class FileSystemError(ReportgenError):
    """The operating system refused a path: too long, a loop of links, no space, read-only, no permission."""


_OS_REASONS: dict[int, str] = {  # what to do, after the system's own words
    errno.ENAMETOOLONG: "use a shorter path",
    errno.ELOOP: "fix the link or choose another path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
    errno.EISDIR: "choose a file, not a folder",
    errno.ENOSPC: "cannot write: free some space or choose another folder",
    errno.EDQUOT: "cannot write: free some space or choose another folder",
    errno.EROFS: "cannot write: choose another folder",
    errno.EACCES: "check its permissions or choose another path",
    errno.EPERM: "check its permissions or choose another path",
    errno.EMFILE: "raise the limit of open files (ulimit -n) and run it again",
    errno.EXDEV: "keep the store, the site and their temporary folders on one file system",
    errno.EPIPE: "the program reading reportgen's output (e.g. `| head`) stopped reading; the output is incomplete",
}
SHOWN_PATH_CHARS = 200
"""A path echoed in a message is cut to this many characters (a 4,000-character name is not printed whole)."""


def from_os_error(exc: OSError) -> FileSystemError | None:
    """The one-line error for an OSError the user can act on, naming its path; None for any other (a bug)."""
    reason = _OS_REASONS.get(exc.errno or 0)
    if reason is None:
        return None
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    shown = " -> ".join(_shown_path(n) for n in names) or (
        "standard output" if exc.errno == errno.EPIPE else "(a file reportgen uses)")
    return FileSystemError(f"{shown}: {exc.strerror or os.strerror(exc.errno or 0)}; {reason}")


def _shown_path(name: object) -> str:
    text = os.fsdecode(name) if isinstance(name, (bytes, str)) else str(name)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # a name that is not UTF-8, shown escaped
    return text if len(text) <= SHOWN_PATH_CHARS else text[: SHOWN_PATH_CHARS - 1] + "\u2026"


@contextlib.contextmanager
def writing_into(path: str | os.PathLike[str]) -> Iterator[None]:
    """Give an OSError that names no path (a write to an open file when the disk fills) ``path``: the folder the
    command writes into, so the CLI's line says where."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = os.fspath(path)
        raise
