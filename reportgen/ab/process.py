"""The workers as child processes: ``ProcessWorker`` runs ``python -m reportgen.ab.worker``; one pair per session."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
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


class ProcessWorker:
    """``python -m reportgen.ab.worker`` as a child process; replies read by a thread so a hang times out."""

    def __init__(self, side: str, timeout_s: float = REPLY_TIMEOUT_S, env: Mapping[str, str] | None = None) -> None:
        self.side, self.timeout_s = side, timeout_s
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "reportgen.ab.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True, encoding="utf-8",
                                     env=None if env is None else dict(env))
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self._lines.put(line)
        self._lines.put("")

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
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

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self._stderr.seek(0)
        tail = " ".join(self._stderr.read().decode("utf-8", "replace").split())[-STDERR_TAIL_CHARS:]
        return f"the worker exited (code {code}){': ' + tail if tail else ''}"

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
        except WorkerFailed:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


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
    """Starts each session's workers: a fresh process per side, in the order's ``spawn_sides``, with the environment
    of that side and session."""

    def __init__(self, settings: AbSettings, environ: Mapping[str, str]) -> None:
        self.settings, self.environ = settings, dict(environ)

    def __call__(self, order: SessionOrder) -> dict[str, Worker]:
        started = {side: ProcessWorker(side, env=worker_environment(self.settings, self.environ, side, order.session))
                   for side in order.spawn_sides}
        return {side: started[side] for side in SIDES}
