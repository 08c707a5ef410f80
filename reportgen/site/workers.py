"""Background processes of a build: a forked child beside the build, worker pools, and their lifetimes.

Every child and worker dies with the build process (``PR_SET_PDEATHSIG``), so a killed build never
leaves one holding the site lock or writing into a folder the next build deletes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from reportgen.errors import ReportgenError, SiteError, UsageError

T = TypeVar("T")
R = TypeVar("R")
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


def pool_map(fn: Callable[[T], R], items: Sequence[T], jobs: int) -> list[R]:
    """``[fn(x) for x in items]``, across up to ``jobs`` forked worker processes (as :func:`render_workers` counts
    them: here, for a few items or off Linux); ``fn`` and its results must pickle. The order is kept."""
    workers = render_workers(len(items), jobs)
    if workers == 1:
        return [fn(x) for x in items]
    chunk = max(1, min(16, len(items) // (workers * 4)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=worker_init, initargs=(os.getpid(),))
    try:
        return list(pool.map(fn, items, chunksize=chunk))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class BackgroundChild:
    """A forked child that waits for its items (:meth:`submit`) and runs ``target`` on them; :meth:`wait` joins it."""

    def __init__(self, target: Callable[[list[Any]], Any], warm: Callable[[], None] | None) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child_end = ctx.Pipe(duplex=True)
        self._child = ctx.Process(target=_child_main, args=(target, warm, child_end, os.getpid()), daemon=True)
        self._child.start()
        child_end.close()
        self._what: object = None

    def submit(self, items: list[Any]) -> None:
        """Hand the child its items (once): it runs ``target(items)`` as soon as it has warmed up."""
        self._what = items[0] if items else None
        self._conn.send(items)

    def wait(self) -> Any:
        """Join the child, re-raise its error, return what ``target`` returned when that was not None (else None)."""
        # Read before joining: a child blocked writing into a full pipe would never exit.
        try:
            message = self._conn.recv()
        except (EOFError, OSError):  # exited without a word: success with nothing to say, or killed
            message = None
        self._child.join()
        if isinstance(message, BaseException):
            raise message
        if self._child.exitcode != 0:
            raise SiteError(f"{self._what}: a build process died (exit {self._child.exitcode}); "
                            "the site was not changed")
        return message

    def close(self) -> None:
        """Kill the child if it still runs (not needed, or its caller failed) and reap it."""
        if self._child.is_alive():
            self._child.kill()
        self._child.join()
        self._conn.close()


class HereChild:
    """What :func:`background_child` gives off Linux, or when asked for no process: ``target`` runs at submit."""

    def __init__(self, target: Callable[[list[Any]], Any]) -> None:
        self._target, self._result = target, None

    def submit(self, items: list[Any]) -> None:
        self._result = self._target(items)

    def wait(self) -> Any:
        return self._result

    def close(self) -> None:
        pass


@contextlib.contextmanager
def background_child(target: Callable[[list[T]], Any], warm: Callable[[], None] | None = None, *,
                     fork: bool = True) -> Iterator[BackgroundChild | HereChild]:
    """A child forked now, which runs ``warm()`` (imports) at once, then ``target(items)`` when given its items.

    A build forks it before planning, so the child imports matplotlib on another core while this process reads
    the catalog; adding one run then draws its page there while this process writes the index (a thread would
    wait for the interpreter lock after every call). The child dies with this process and is finished or killed
    before the caller goes on, so a failed build never deletes its folder under a running child. Off Linux, or with
    ``fork`` False, ``target`` runs in this process when the items are submitted.
    """
    child: BackgroundChild | HereChild = (BackgroundChild(target, warm) if fork and sys.platform == "linux"
                                          else HereChild(target))
    try:
        yield child
    finally:
        child.close()


def _child_main(target: Callable[[list[T]], Any], warm: Callable[[], None] | None, conn: Any,
                parent_pid: int) -> None:
    """A background child: warm up, take its items, run ``target``, send a non-None result, exit 0; on an error,
    send it (bounded), exit 1. Given None instead of items, or no word at all, it exits 0."""
    worker_init(parent_pid)
    problem: Exception | None = None
    if warm is not None:
        try:
            warm()
        except Exception as exc:  # noqa: BLE001  reported when the child is given work, not before
            problem = exc
    try:
        items = conn.recv()
    except (EOFError, OSError):
        os._exit(0)
    if items is None:
        os._exit(0)
    try:
        if problem is not None:
            raise problem
        result = target(items)
        if result is not None:
            conn.send(result)
    except Exception as exc:
        try:
            conn.send(bounded_error(exc))
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


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off in this process for the block (as it was before, after it).

    A build plans and lists its runs in a few large dictionaries and sets, and makes little cyclic garbage; each
    collection the collector starts while they grow walks them again: in an add to a 10,011-run site its
    collections took 38 ms, and 8 ms with the build paused (``benchmarks/README.md``). Workers forked in the block
    collect again (:func:`worker_init`): drawing pages makes cyclic garbage."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def worker_init(parent_pid: int) -> None:
    """Make a worker die with the build process: a killed build leaves no worker holding the site lock; and
    collect its cyclic garbage (a worker forked while :func:`collector_paused` would not).

    Ctrl-C reaches every process of the terminal's group: a worker ignores it (no traceback of its own) and the
    build process, which gets it too, stops and reaps its workers, then says so in one line (exit 130)."""
    gc.enable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the build died before prctl took effect
        os._exit(1)
