"""The workers as processes: forked from the pair's ``ForkServer`` (torch imported once), or on Trainium each one
``python -m reportgen.ab.worker`` of its own (``ProcessWorker``); a fresh pair per session either way."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from reportgen.ab.pair import SIDES
from reportgen.ab.session import Worker, WorkerFailed
from reportgen.ab.settings import HUGE_PAGES_ENV, IDLE_THREADS_ENV, AbSettings
from reportgen.devices.neuron.cores import side_environment
from reportgen.model.run import SessionOrder

REPLY_TIMEOUT_S = 1800.0
"""The longest a worker may take to answer one command (a cold torch.compile of several variants)."""
STDERR_TAIL_CHARS = 400


class _LineWorker:
    """A worker's replies, one JSON line each, read by a thread so that a hang times out."""

    side: str
    timeout_s: float

    def _start_reader(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._lines.put(line)
        except (OSError, ValueError):
            pass  # the channel was closed under the reader: the worker is gone
        self._lines.put("")

    def _write(self, text: str) -> None:
        raise NotImplementedError

    def _death(self) -> str:
        raise NotImplementedError

    def send(self, msg: dict[str, Any]) -> None:
        try:
            self._write(json.dumps(msg) + "\n")
        except (BrokenPipeError, OSError):
            raise WorkerFailed(str(msg.get("cmd")), self._death()) from None

    def receive(self) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=self.timeout_s)
        except queue.Empty:
            raise WorkerFailed("reply", f"no answer within {self.timeout_s:.0f} s") from None
        if not line:
            raise WorkerFailed("reply", self._death())
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _exited(self, timeout_s: float) -> bool:
        """Whether the worker closed its side (exited) within ``timeout_s``; replies not read are dropped."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                if not self._lines.get(timeout=left):
                    self._lines.put("")  # later readers see the end too
                    return True
            except queue.Empty:
                return False
        return False


def _stderr_tail(stderr: IO[bytes]) -> str:
    stderr.seek(0)
    return " ".join(stderr.read().decode("utf-8", "replace").split())[-STDERR_TAIL_CHARS:]


def _death_text(code: int | None, tail: str) -> str:
    return f"the worker exited (code {code}){': ' + tail if tail else ''}"


class ProcessWorker(_LineWorker):
    """``python -m reportgen.ab.worker`` as a child process of its own (on Trainium: each worker is started with the
    NeuronCore of its side, and the Neuron runtime is not fork-safe)."""

    def __init__(self, side: str, timeout_s: float = REPLY_TIMEOUT_S, env: Mapping[str, str] | None = None) -> None:
        self.side, self.timeout_s = side, timeout_s
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "reportgen.ab.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True, encoding="utf-8",
                                     env=None if env is None else dict(env))
        assert self.proc.stdout is not None
        self._start_reader(self.proc.stdout)

    def _write(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        return _death_text(code, _stderr_tail(self._stderr))

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
        except WorkerFailed:
            pass
        _stop(self.proc, 10.0)
        self._stderr.close()


def _stop(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """Wait for ``proc`` to exit (it was told to), killing it after ``timeout_s``."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ForkServer:
    """``python -m reportgen.ab.forkserver``: imports torch once per pair, then forks each session's workers."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._stderr = tempfile.TemporaryFile()
        self._ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen([sys.executable, "-m", "reportgen.ab.forkserver", str(theirs.fileno())],
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=self._stderr,
                                     stderr=self._stderr, env=None if env is None else dict(env))
        theirs.close()
        self._replies = self._ctl.makefile("r", encoding="ascii")

    def _ask(self, request: bytes, fds: list[int] | None = None) -> str:
        """One request, one line back ('' when the server is gone)."""
        try:
            socket.send_fds(self._ctl, [request], fds or [])
            return self._replies.readline().strip()
        except OSError:
            return ""

    def fork(self, side: str, timeout_s: float = REPLY_TIMEOUT_S) -> ForkedWorker | DeadWorker:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        stderr = tempfile.TemporaryFile()
        try:
            reply = self._ask(b"fork\n", [theirs.fileno(), stderr.fileno()])
        finally:
            theirs.close()
        if not reply.isdigit():
            ours.close()
            stderr.close()
            return DeadWorker(side, self.death())
        return ForkedWorker(side, self, int(reply), ours, stderr, timeout_s)

    def exit_code(self, pid: int) -> int | None:
        reply = self._ask(f"wait {pid}\n".encode())
        return int(reply) if reply.lstrip("-").isdigit() else None

    def death(self) -> str:
        """Why the server cannot fork: it exited (its code and the end of its output)."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        return f"the fork server exited (code {code}){': ' + t if (t := _stderr_tail(self._stderr)) else ''}"

    def close(self) -> None:
        self._ask(b"quit\n")
        _stop(self.proc, 30.0)
        self._replies.close()
        self._ctl.close()
        self._stderr.close()


class ForkedWorker(_LineWorker):
    """A worker forked from the pair's ``ForkServer``: the same protocol over a socket."""

    def __init__(self, side: str, server: ForkServer, pid: int, chan: socket.socket, stderr: IO[bytes],
                 timeout_s: float) -> None:
        self.side, self.timeout_s, self.pid = side, timeout_s, pid
        self._server, self._chan, self._stderr = server, chan, stderr
        self._code: int | None = None
        self._out = chan.makefile("w", encoding="utf-8")
        self._start_reader(chan.makefile("r", encoding="utf-8"))

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

    def _reap(self, timeout_s: float) -> int | None:
        """The worker's exit code once it is gone (killed if it has not closed its side within ``timeout_s``)."""
        if self._code is None:
            if not self._exited(timeout_s):
                os.kill(self.pid, signal.SIGKILL)
            self._code = self._server.exit_code(self.pid)
        return self._code

    def _death(self) -> str:
        return _death_text(self._reap(10.0), _stderr_tail(self._stderr))

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
        except WorkerFailed:
            pass
        self._reap(10.0)
        for f in (self._out, self._chan, self._stderr):
            with contextlib.suppress(OSError):
                f.close()


class DeadWorker:
    """What a fork that failed gives: every command fails in ``load`` with the server's message."""

    def __init__(self, side: str, message: str) -> None:
        self.side, self.message = side, message

    def send(self, msg: dict[str, Any]) -> None:
        raise WorkerFailed(str(msg.get("cmd")), self.message)

    def receive(self) -> dict[str, Any]:
        raise WorkerFailed("reply", self.message)

    def close(self) -> None:
        pass


def worker_environment(settings: AbSettings, environ: Mapping[str, str], side: str = "base",
                       session: int = 0) -> dict[str, str]:
    """A worker's environment: ``environ`` with ``IDLE_THREADS_ENV`` (unless ``environ`` chooses its own OpenMP wait
    policy), ``HUGE_PAGES_ENV`` where huge pages are wanted (by default where the kernel gives them), and on Trainium
    only its own NeuronCore (base takes the first of ``settings.neuron_cores`` in even sessions, the second in odd
    ones, so a difference between the two cores cancels like the ABBA order)."""
    env = {**IDLE_THREADS_ENV, **environ, **(HUGE_PAGES_ENV if settings.wants_huge_pages else {})}
    if settings.neuron_cores is not None:
        first, second = settings.neuron_cores
        core = first if (side == SIDES[0]) == (session % 2 == 0) else second
        env = side_environment(env, core)
    return env


class PairSpawner:
    """Starts each session's workers in the order's ``spawn_sides``: forked from one ``ForkServer`` for the pair, or
    on Trainium (a NeuronCore per side) a fresh process per side with that side's and session's environment. A
    context manager: the server stops with it."""

    def __init__(self, settings: AbSettings, environ: Mapping[str, str]) -> None:
        self.settings, self.environ = settings, dict(environ)
        self.server: ForkServer | None = None

    def __enter__(self) -> PairSpawner:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def __call__(self, order: SessionOrder) -> dict[str, Worker]:
        started: dict[str, Worker] = {}
        for side in order.spawn_sides:
            env = worker_environment(self.settings, self.environ, side, order.session)
            if self.settings.neuron_cores is not None:
                started[side] = ProcessWorker(side, env=env)
                continue
            if self.server is None:
                self.server = ForkServer(env)  # the same environment for both sides off Trainium
            started[side] = self.server.fork(side)
        return {side: started[side] for side in SIDES}
