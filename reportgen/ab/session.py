"""One session's conversation with its pair of workers: load both sides, warm each, then the rounds in ABBA order.

A session is one fresh pair of worker processes (see ``coordinator``). Workers are anything with
``send``/``receive``/``close`` (``process.ProcessWorker`` for real; tests pass deterministic fakes).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from reportgen.ab.pair import SIDES, RoundRecord, SideReport, sides_from
from reportgen.ab.settings import AbSettings, session_cpu
from reportgen.errors import ReportgenError, UsageError
from reportgen.model.run import SessionOrder

PRIMING_ROUNDS = 1


class Worker(Protocol):
    """One side's worker: JSON-able commands in, one reply per command out."""

    def send(self, msg: dict[str, Any]) -> None: ...

    def receive(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def session_orders(seed: int) -> Iterator[SessionOrder]:
    """Each session's order, random but balanced: in every two sessions each side is spawned first once and opens
    once (two independent shuffles per pair of sessions), from ``random.Random(seed)``, so a stored seed replays the
    plan. Cancels by design what the order of starting and opening may do to one side (docs/ab-testing.md)."""
    rng = random.Random(seed)
    session = 0
    while True:
        spawned, opens = rng.sample(SIDES, 2), rng.sample(SIDES, 2)
        for k in range(2):
            yield SessionOrder(session, spawned[k], opens[k])
            session += 1


Spawn = Callable[[SessionOrder], dict[str, Worker]]
"""Makes one session's workers, in the order's ``spawn_sides``: side -> a fresh worker."""


class SideFailed(ReportgenError):
    """A worker died or failed after both sides were warm (mid-rounds): the pair has no verdict."""


class WorkerFailed(Exception):
    """A worker answered with an error or died; ``stage`` is the command it failed in."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage, self.message = stage, message


class Session:
    """One session's workers, closed on the way out whatever happened."""

    def __init__(self, spawn: Spawn, order: SessionOrder) -> None:
        self.workers = spawn(order)

    def __enter__(self) -> dict[str, Worker]:
        return self.workers

    def __exit__(self, *_exc: object) -> None:
        for w in self.workers.values():  # both told first: the processes exit (tear torch down) side by side
            try:
                w.send({"cmd": "quit"})
            except WorkerFailed:
                pass
        for w in self.workers.values():
            w.close()


def side_order(index: int, opens: str) -> tuple[str, str]:
    """ABBA over pairs of rounds: ``opens`` first in even rounds, the other side in odd ones (docs/ab-testing.md).

    Not ``profile.timing.round_order``: that one rotates any number of variants through every position
    (AB BA BA AB for two); a pair alternates every round, the schedule its benchmarks were measured with.
    """
    first = sides_from(opens)
    return first if index % 2 == 0 else (first[1], first[0])


def _request(worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
    worker.send(msg)
    return _reply(worker, msg["cmd"])


def _reply(worker: Worker, stage: str) -> dict[str, Any]:
    reply = worker.receive()
    if reply.get("event") == "error":
        raise WorkerFailed(str(reply.get("stage") or stage), str(reply.get("message", "unknown error")))
    return reply


def usable_cpus() -> frozenset[int]:
    """The CPUs this process may run on (its affinity: taskset, cgroups); empty where the OS does not say (macOS)."""
    getter = getattr(os, "sched_getaffinity", None)
    return frozenset(getter(0)) if getter is not None else frozenset()


def load_both(workers: dict[str, Worker], roots: dict[str, str], scenario: str,
              settings: AbSettings, order: SessionOrder) -> dict[str, SideReport]:
    """Send ``load`` to both (the side spawned first first), then read both: imports and set-up overlap."""
    sent: dict[str, WorkerFailed | None] = {}
    cpus = usable_cpus()
    cpu = session_cpu(cpus, order.session) if settings.same_cpu and cpus else None
    for side in order.spawn_sides:
        try:
            workers[side].send({"cmd": "load", "root": roots[side], "scenario": scenario, "device": settings.device,
                                 "threads": settings.threads, "clock": settings.clock, "cpu": cpu})
            sent[side] = None
        except WorkerFailed as exc:
            sent[side] = exc
    out: dict[str, SideReport] = {}
    for side in SIDES:
        try:
            failure = sent[side]
            if failure is not None:
                raise failure
            out[side] = _side_report(side, _reply(workers[side], "load"))
        except WorkerFailed as exc:
            out[side] = SideReport(side, error=exc.message, error_stage=exc.stage)
    _check_devices(out, settings)
    return out


def _check_devices(loaded: dict[str, SideReport], settings: AbSettings) -> None:
    """Both sides on one device, and the CPU-only settings only where that device is the CPU."""
    devices = {s.device for s in loaded.values() if s.error is None}
    if len(devices) > 1:
        raise UsageError(f"device: the two sides chose different devices "
                         f"({', '.join(sorted(str(d) for d in devices))}); choose one", field="device")
    off_cpu = sorted(str(d) for d in devices - {"cpu"})
    if settings.clock == "cpu" and off_cpu:
        raise UsageError(f"clock cpu: times work on the CPU, but this pair runs on {off_cpu[0]}; use --clock wall "
                         "(or --device cpu)", field="clock")
    if settings.huge_pages and off_cpu:
        raise UsageError(f"huge_pages: changes torch's CPU allocations, but this pair runs on {off_cpu[0]}; drop it "
                         "(or --device cpu)", field="huge_pages")


def _side_report(side: str, reply: dict[str, Any]) -> SideReport:
    sc = reply["scenario"]
    return SideReport(
        side, scenario_name=sc["name"], scenario_description=sc["description"], device=reply["device"],
        time_basis=reply.get("time_basis"), cache_flush_bytes=int(reply.get("cache_flush_bytes") or 0),
        environment=reply.get("environment"),
        declared=tuple(v["name"] for v in sc["variants"]),
        default_shape=tuple(int(d) for d in sc["default_shape"]), default_dtype=sc["default_dtype"],
        dtypes=tuple(sc.get("dtypes", ())),
        descriptions={v["name"]: v["description"] for v in sc["variants"]},
        cpu=reply.get("cpu"),
    )


def warm(worker: Worker, report: SideReport, shape: tuple[int, ...], dtype: str, wanted: list[str],
         settings: AbSettings, brief: bool = False) -> SideReport:
    """Make the inputs, compile, check and warm ``wanted``; ``brief`` (later sessions): the first call and the fixed
    warm-up calls only: no reference, no correctness check (the first session checked the same code on the same
    inputs), no calibration (its calls per sample are kept; the priming round follows anyway)."""
    if dtype not in report.dtypes:
        return _replace(report, error_stage="warm", error=f"scenario {report.scenario_name!r} declares no tolerance "
                        f"for dtype {dtype}; it has {', '.join(report.dtypes) or 'none'}")
    try:
        reply = _request(worker, {"cmd": "warm", "shape": list(shape), "dtype": dtype, "seed": settings.seed,
                                  "variants": wanted, "warmup": settings.warmup, "brief": brief,
                                  "params": dict(settings.params), "param_defaults": dict(settings.param_defaults)})
    except WorkerFailed as exc:
        return _replace(report, error=exc.message, error_stage=exc.stage)
    return _replace(report, variants=dict(reply["variants"]), params=dict(reply.get("params") or {}))


def _replace(report: SideReport, **changes: Any) -> SideReport:
    return replace(report, **changes)


def session_rounds(workers: dict[str, Worker], calls: dict[str, int], settings: AbSettings,
                   order: SessionOrder) -> tuple[RoundRecord, ...]:
    """One priming round (after the other side's warm-up, caches and clocks settle: not recorded), then the
    session's rounds in ABBA order, ``order.opens`` first.

    The priming round runs in an odd round's order, so it ends with the side that opens round 0: every recorded
    round's first side then runs right after its own previous block, as in every later round, and each ABBA pair
    (``analysis.paired.session_ratio``) holds one round with each side in that position."""
    block = {"cmd": "block", "samples": settings.samples_per_block, "discard": settings.discard_per_block,
             "calls": calls}
    for _ in range(PRIMING_ROUNDS):
        _one_round(workers, block, order, 1, "the priming round")
    return tuple(_one_round(workers, block, order, i) for i in range(settings.rounds_per_session))


def _one_round(workers: dict[str, Worker], block: dict[str, Any], plan: SessionOrder, index: int,
               label: str | None = None) -> RoundRecord:
    """Round ``index``'s blocks, in its ABBA order; ``label`` names it in a failure (default: "round N")."""
    samples: dict[str, dict[str, tuple[float, ...]]] = {}
    session = plan.session
    order = side_order(index, plan.opens)
    for side in order:
        try:
            reply = _request(workers[side], block)
        except WorkerFailed as exc:
            raise SideFailed(f"the {side} worker failed in session {session + 1}, {label or f'round {index + 1}'}: "
                             f"{exc.message}") from None
        samples[side] = {name: tuple(float(x) for x in values) for name, values in reply["samples_us"].items()}
    return RoundRecord(index, order[0], samples, session)
