"""The fork server: both sides' workers of a session forked from one process that imported torch once, each loading
its own checkout after the fork; a worker that dies is reported with its exit code and output, never a hang; a
server that died fails the load with its own message."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from test_ab_cli import TINY, checkout

from reportgen.ab.process import DeadWorker, ForkedWorker, ForkServer
from reportgen.ab.session import WorkerFailed


def load(worker: ForkedWorker | DeadWorker, root: Path, threads: int | None = None,
         cpu: int | None = None) -> dict[str, object]:
    worker.send({"cmd": "load", "root": str(root), "scenario": "tiny", "device": "cpu", "threads": threads,
                 "clock": "wall", "cpu": cpu})
    return worker.receive()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="the OS cannot pin a process to a CPU")
def test_a_one_thread_cpu_worker_runs_on_the_cpu_it_is_given_and_a_multi_thread_one_where_it_likes(
        tmp_path: Path) -> None:
    checkout(tmp_path / "base", "base")
    cpus = os.sched_getaffinity(0)
    last = max(cpus)
    server = ForkServer()
    try:
        one, many = server.fork("base"), server.fork("head")
        pinned, free = load(one, tmp_path / "base", cpu=last), load(many, tmp_path / "base", threads=2, cpu=last)
        assert pinned["cpu"] == last and os.sched_getaffinity(int(pinned["pid"])) == {last}  # type: ignore[call-overload]
        assert free["cpu"] is None and os.sched_getaffinity(int(free["pid"])) == cpus  # type: ignore[call-overload]
        for w in (one, many):
            w.close()
    finally:
        server.close()


def test_both_sides_are_forked_from_one_server_and_load_their_own_checkout(tmp_path: Path) -> None:
    checkout(tmp_path / "base", "base")
    checkout(tmp_path / "head", "head")
    server = ForkServer()
    try:
        seen = []
        for _session in range(2):
            workers = {side: server.fork(side) for side in ("head", "base")}
            replies = {side: load(w, tmp_path / side) for side, w in workers.items()}
            for side, reply in replies.items():
                assert reply["event"] == "loaded" and reply["parent_pid"] == server.proc.pid
                assert reply["scenario"]["description"] == f"tiny rmsnorm from the {side} tree"  # type: ignore[index]
                assert reply["environment"]["torch_threads"] == 1  # type: ignore[index]  # the CPU default
            seen += [r["pid"] for r in replies.values()]
            for w in workers.values():
                w.close()
            assert all(isinstance(w, ForkedWorker) and w._code == 0 for w in workers.values())
        assert len(set(seen)) == 4  # a fresh pair of processes each session
    finally:
        server.close()
    assert server.proc.returncode == 0


def test_a_worker_that_dies_is_named_with_its_code_and_output(tmp_path: Path) -> None:
    dying = TINY.replace("def make_inputs(shape, dtype, seed, device):\n",
                         "def make_inputs(shape, dtype, seed, device):\n    import os, sys\n"
                         "    print('about to leave', file=sys.stderr, flush=True)\n    os._exit(3)\n")
    checkout(tmp_path / "c", "base", scenario=dying)
    server = ForkServer()
    try:
        worker = server.fork("base")
        assert load(worker, tmp_path / "c")["event"] == "loaded"
        worker.send({"cmd": "warm", "shape": [4, 8], "dtype": "float32", "seed": 0, "variants": ["naive"]})
        with pytest.raises(WorkerFailed) as info:
            worker.receive()
        assert info.value.message.startswith("the worker exited (code 3)") and "about to leave" in info.value.message
        worker.close()
    finally:
        server.close()


def test_a_server_that_died_fails_the_load_with_its_message(tmp_path: Path) -> None:
    server = ForkServer()
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    worker = server.fork("base")
    assert isinstance(worker, DeadWorker)
    with pytest.raises(WorkerFailed) as info:
        load(worker, tmp_path)
    assert info.value.stage == "load" and info.value.message.startswith("the fork server exited (code -9)")
    server.close()


def test_later_sessions_run_the_checked_code_without_its_reference(tmp_path: Path) -> None:
    """The first session checks each variant against the float64 reference; a later (brief) session runs the same
    code on the same inputs and skips the reference and the check (on a 16 MiB elementwise op they were 80 % of a
    brief warm-up). A reference that records its calls shows which warm-ups computed it."""
    calls = tmp_path / "reference_calls"
    counting = TINY.replace("def reference(x, w):\n",
                            f"def reference(x, w):\n    open({str(calls)!r}, 'a').write('called\\n')\n")
    checkout(tmp_path / "c", "base", scenario=counting)
    server = ForkServer()
    try:
        for brief, expected in ((False, 1), (True, 1), (False, 2)):
            worker = server.fork("base")
            assert load(worker, tmp_path / "c")["event"] == "loaded"
            worker.send({"cmd": "warm", "shape": [4, 8], "dtype": "float32", "seed": 0, "variants": ["naive"],
                         "warmup": 1, "brief": brief})
            reply = worker.receive()
            worker.close()
            naive = reply["variants"]["naive"]  # type: ignore[index]
            assert naive["status"] == "ok"
            assert (naive["correctness"] is None) == brief and (brief or naive["correctness"]["passed"])
            assert calls.read_text().count("called") == expected
    finally:
        server.close()
