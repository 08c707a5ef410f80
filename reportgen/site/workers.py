"""Background processes of a build: a forked child beside the build, worker pools, and their lifetimes.

Every child and worker dies with the build process (``PR_SET_PDEATHSIG``), so a killed build never
leaves one holding the site lock or writing into a folder the next build deletes.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from reportgen.errors import ReportgenError, SiteError, UsageError

T = TypeVar("T")
MAX_CHILD_ERROR_BYTES = 16384
"""A child's error larger than this once pickled is sent as its type and the start of its text."""
MIN_PAGES_PER_WORKER = 4
"""Fewer pages than this per worker are rendered in the build process itself."""
_PR_SET_PDEATHSIG = 1


def default_jobs() -> int:
    """Worker processes for run pages: $REPORTGEN_JOBS when set, else the CPUs this process may use."""
    value = os.environ.get("REPORTGEN_JOBS")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise UsageError(f"REPORTGEN_JOBS={value[:30]!r}: expected a whole number of processes, 1 or more")
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def render_workers(pages: int, jobs: int) -> int:
    """Worker processes for ``pages`` run pages: 1 (this process) for few pages or off Linux."""
    return max(1, min(jobs, pages // MIN_PAGES_PER_WORKER)) if sys.platform == "linux" else 1


@contextlib.contextmanager
def in_background(target: Callable[[list[T]], Any], items: list[T]) -> Iterator[Callable[[], Any]]:
    """Run ``target(items)`` in a forked child while this process goes on; yields ``wait``, which joins the
    child, re-raises its error, and returns what ``target`` returned when that was not None (else None).

    Used to write a few new run pages while this process writes the index (a thread would wait for the
    interpreter lock after every call). The child dies with this process and is finished or killed before the caller
    goes on, so a failed build never deletes its folder under a running child. Off Linux, or
    with nothing to do, ``target`` runs here, at once.
    """
    if not items or sys.platform != "linux":
        result = target(items)
        yield lambda: result
        return
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_main, args=(target, items, send, os.getpid()), daemon=True)
    child.start()
    send.close()

    def wait() -> Any:
        # Read before joining: a child blocked writing into a full pipe would never exit.
        try:
            message = receive.recv()
        except (EOFError, OSError):  # exited without a word: success with nothing to say, or killed
            message = None
        child.join()
        if isinstance(message, BaseException):
            raise message
        if child.exitcode != 0:
            raise SiteError(f"{items[0]}: a build process died (exit {child.exitcode}); the site was not changed")
        return message

    try:
        yield wait
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()


def _child_main(target: Callable[[list[T]], Any], items: list[T], send: Any, parent_pid: int) -> None:
    """A background child: run ``target``, send a non-None result, exit 0; on an error, send it (bounded), exit 1."""
    worker_init(parent_pid)
    try:
        result = target(items)
        if result is not None:
            send.send(result)
    except Exception as exc:
        try:
            send.send(bounded_error(exc))
        finally:
            os._exit(1)
    os._exit(0)


def bounded_error(exc: Exception) -> Exception:
    """``exc`` itself when it pickles small and whole; else a SiteError with its type and the start of its text.

    Some errors carry whole documents (a UnicodeEncodeError holds the page it failed to encode).
    """
    try:
        data = pickle.dumps(exc)
        if len(data) <= MAX_CHILD_ERROR_BYTES and type(pickle.loads(data)) is type(exc):
            return exc
    except Exception:  # noqa: BLE001  unpicklable: fall through to the text
        pass
    text = str(exc)
    if isinstance(exc, ReportgenError):
        return type(exc)(text[:2000])
    return SiteError(f"{type(exc).__name__}: {text[:300]}")


def worker_init(parent_pid: int) -> None:
    """Make a worker die with the build process: a killed build leaves no worker holding the site lock.

    Ctrl-C reaches every process of the terminal's group: a worker ignores it (no traceback of its own) and the
    build process, which gets it too, stops and reaps its workers, then says so in one line (exit 130)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the build died before prctl took effect
        os._exit(1)
