"""The fork server: one process per pair that imports torch once and forks every session's workers, both sides.

``python -m reportgen.ab.forkserver FD``: ``FD`` is a Unix socket to the coordinator. It imports torch and the
worker's modules (touching no tensor: no OpenMP, CUDA or allocator state exists before a fork), then answers one
line per request:

- ``fork`` with two file descriptors attached (``SCM_RIGHTS``): the worker's channel (a socket it reads commands from
  and writes replies to) and its stderr file -> the new worker's pid. The child enters ``reportgen.ab.worker.serve``
  exactly as ``python -m reportgen.ab.worker`` would, after the same checkout set-up;
- ``wait PID`` -> that worker's exit status (waits for it to exit: ask after it closed its channel);
- ``quit`` (or the coordinator gone): kills and reaps what is left, then exits.

Why one server for both sides: a worker forked from it starts where the server stopped, in the memory layout the
server had; were base and head forked from servers of their own, a difference between those two layouts would be
the same in every session and never cancel. Both sides' workers start from one server, forked in the session's
random order, and load their own checkout's scenario and package after the fork.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

MAX_REQUEST_BYTES = 256


def _child(chan: int, err: int) -> None:
    """In the forked worker: the channel becomes stdin and the protocol's stdout, the file its stderr."""
    from reportgen.ab import worker

    os.dup2(err, 2)
    os.dup2(chan, 0)
    proto = os.fdopen(os.dup(chan), "w", encoding="utf-8")
    os.close(chan)
    os.close(err)
    os.dup2(2, 1)
    sys.stdin = os.fdopen(0, "r", encoding="utf-8", closefd=False)
    sys.stdout = sys.stderr
    worker.exit_now(worker.serve(sys.stdin, proto))


def _status(pid: int) -> int:
    """The exit code of ``pid`` as ``subprocess`` reports it (negative: the signal that killed it)."""
    _pid, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def serve(ctl: socket.socket) -> None:
    """Answer the coordinator until ``quit`` or end of input."""
    children: set[int] = set()
    while True:
        data, fds, _flags, _addr = socket.recv_fds(ctl, MAX_REQUEST_BYTES, 2)
        words = data.decode("ascii", "replace").split()
        if not words or words[0] == "quit":
            break
        if words[0] == "fork" and len(fds) == 2:
            pid = os.fork()
            if pid == 0:
                ctl.close()
                _child(*fds)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            ctl.sendall(f"{pid}\n".encode())
        elif words[0] == "wait" and len(words) == 2 and words[1].isdigit() and int(words[1]) in children:
            children.discard(int(words[1]))
            ctl.sendall(f"{_status(int(words[1]))}\n".encode())
        else:
            for fd in fds:
                os.close(fd)
            ctl.sendall(b"error\n")
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def main(argv: list[str]) -> int:
    ctl = socket.socket(fileno=int(argv[0]))
    import torch  # noqa: F401  (the cost every worker would otherwise pay)

    from reportgen.ab import worker  # noqa: F401  (and the worker's own modules)

    serve(ctl)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
