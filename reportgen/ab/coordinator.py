"""The A/B coordinator: drive base and head workers through interleaved rounds, in several sessions, to a verdict.

A *session* is one fresh pair of worker processes: load both sides (in parallel) -> warm and
compile base, then head -> one unrecorded priming round -> ``rounds_per_session`` rounds in ABBA
order (base first in even rounds, head first in odd ones), each round one block of samples per
measured variant per side -> both workers closed. Why sessions: two processes running the same
code differ by a fixed amount for their whole life (measured on a 2-core VM: up to ±20 % at a
cache-resident shape, ±2.5 % at the default shape), which rounds inside one pair of processes
cannot see. So the process pair is the unit of the interval: after ``min_sessions`` sessions, and
after every later one, the paired statistics over sessions (``pairstats.pair_stats``); while any
variant is *inconclusive*, more sessions until the time budget (``max_seconds``, the whole
measurement: loading, compiling and rounds) or ``max_sessions`` is spent.

The first session decides the shape, the dtype, which variants are measured (new, removed,
broken) and how many calls make one sample; later sessions reuse those.

Workers are anything with ``send``/``receive``/``close``, made by a ``spawn`` callable per session
(``ProcessWorker`` for real; tests pass deterministic fakes and a fake clock). A side that fails to
load or warm in the first session is named in the result, never an exception; a failure in a later
session (the same code worked before) raises ``SideFailed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from reportgen.ab.settings import AbSettings, method_text
from reportgen.analysis.paired import (
    AbVerdict,
    PairStats,
    SessionRounds,
    overall_verdict,
    pair_stats,
)
from reportgen.errors import ExitCode, ReportgenError, UsageError

SIDES = ("base", "head")
PRIMING_ROUNDS = 1


class Worker(Protocol):
    """One side's worker: JSON-able commands in, one reply per command out."""

    def send(self, msg: dict[str, Any]) -> None: ...

    def receive(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class SideFailed(ReportgenError):
    """A worker died or failed after both sides were warm (mid-rounds): the pair has no verdict."""


class WorkerFailed(Exception):
    """A worker answered with an error or died; ``stage`` is the command it failed in."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage, self.message = stage, message


class VariantKind(str, Enum):
    """What happened to one variant in the pair."""

    MEASURED = "measured"
    NEW = "new"  # only in head
    REMOVED = "removed"  # only in base
    BROKEN_IN_HEAD = "broken in head"  # OK in base, failed or incorrect in head: counts as a regression
    FAILED_IN_BASE = "failed in base"  # not OK in base, so not compared
    FAILED_BOTH = "failed on both sides"


@dataclass(frozen=True)
class SideReport:
    """One side as loaded and warmed; ``error``/``error_stage`` set when it failed."""

    side: str
    scenario_name: str | None = None
    scenario_description: str = ""
    device: str | None = None
    time_basis: str | None = None
    environment: dict[str, Any] | None = None
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)  # warm replies per variant
    declared: tuple[str, ...] = ()
    default_shape: tuple[int, ...] = ()
    default_dtype: str = "float32"
    dtypes: tuple[str, ...] = ()
    descriptions: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)  # the scenario parameters the side measured with, shown
    error: str | None = None
    error_stage: str | None = None


@dataclass(frozen=True)
class VariantPair:
    """One variant's outcome; ``stats`` only for MEASURED."""

    name: str
    kind: VariantKind
    stats: PairStats | None = None
    base_error: str | None = None
    head_error: str | None = None
    calls_per_sample: int | None = None

    @property
    def verdict(self) -> AbVerdict | None:
        if self.kind is VariantKind.BROKEN_IN_HEAD:
            return AbVerdict.REGRESSION
        return self.stats.verdict if self.stats else None


@dataclass(frozen=True)
class RoundRecord:
    """One counted round: its session (pair of worker processes), which side went first and every block of
    samples (µs) per side and variant. ``index`` counts the rounds inside the session."""

    index: int
    first_side: str
    samples_us: dict[str, dict[str, tuple[float, ...]]]  # side -> variant -> samples
    session: int = 0


@dataclass(frozen=True)
class PairResult:
    """Everything a pair measured and concluded."""

    settings: AbSettings
    base: SideReport
    head: SideReport
    shape: tuple[int, ...] | None
    dtype: str | None
    variants: tuple[VariantPair, ...]
    rounds: tuple[RoundRecord, ...]
    stop_reason: str  # "decided", "time budget", "max sessions", "not measured"
    rounds_s: float
    warm_s: float
    notes: tuple[str, ...] = ()

    @property
    def method(self) -> str:
        """The method in words, with this pair's own block settings."""
        s = self.settings
        return method_text(s.samples_per_block, s.discard_per_block, s.clock, s.huge_pages)

    @property
    def sessions(self) -> int:
        """How many sessions (pairs of worker processes) measured rounds."""
        return session_count(self.rounds)

    @property
    def failed_sides(self) -> tuple[SideReport, ...]:
        return tuple(s for s in (self.base, self.head) if s.error is not None)

    @property
    def verdict(self) -> AbVerdict:
        return overall_verdict([v.verdict for v in self.variants if v.verdict is not None])

    @property
    def exit_code(self) -> ExitCode:
        """3 a side failed to load or warm; 1 regression; 7 still inconclusive after the budget; else 0."""
        if self.failed_sides:
            return ExitCode.BAD_INPUT
        verdict = self.verdict
        if verdict is AbVerdict.REGRESSION:
            return ExitCode.REGRESSION
        if verdict is AbVerdict.INCONCLUSIVE:
            return ExitCode.INCONCLUSIVE
        return ExitCode.OK


def session_count(rounds: Sequence[RoundRecord]) -> int:
    """How many sessions the rounds came from."""
    return len({r.session for r in rounds})


def round_order(index: int) -> tuple[str, str]:
    """ABBA: base first in even rounds, head first in odd ones."""
    return SIDES if index % 2 == 0 else (SIDES[1], SIDES[0])


Spawn = Callable[[], dict[str, Worker]]
"""Makes one session's workers: side -> a fresh worker."""


def coordinate(spawn: Spawn, roots: dict[str, str], scenario: str, settings: AbSettings,
               clock: Callable[[], float] = time.monotonic, progress: Callable[[str], None] | None = None
               ) -> PairResult:
    """Measure a pair to a verdict (see the module docstring). ``roots`` maps side -> checkout folder."""
    settings.check()
    say = progress or (lambda _message: None)
    t0 = clock()
    with _Session(spawn) as workers:
        say("session 1: loading both sides")
        loaded = _load_both(workers, roots, scenario, settings)
        if any(s.error for s in loaded.values()):
            return _unmeasured(settings, loaded, None, None, (), clock() - t0)
        shape, dtype, notes = _shape_and_dtype(loaded, settings)
        selected = _selected(loaded, settings.variants)
        sides = dict(loaded)
        for side in SIDES:  # sequentially: one side's compile does not disturb the other's calibration
            say(f"session 1: warming up and compiling {side}")
            wanted = [n for n in selected if n in loaded[side].declared]
            sides[side] = _warm(workers[side], loaded[side], shape, dtype, wanted, settings)
        if any(s.error for s in sides.values()):
            return _unmeasured(settings, sides, shape, dtype, notes, clock() - t0)
        pairs = _classify(sides["base"], sides["head"], selected)
        calls = {p.name: p.calls_per_sample or 1 for p in pairs if p.kind is VariantKind.MEASURED}
        if not calls:
            return PairResult(settings, sides["base"], sides["head"], shape, dtype, pairs, (), "not measured", 0.0,
                              clock() - t0, notes)
        warm_s = clock() - t0
        say(f"session 1: rounds of {settings.samples_per_block} samples per variant: {', '.join(calls)}")
        rounds_s, rounds = _timed(clock, lambda: _session_rounds(workers, calls, settings, 0))
    run = _Runner(spawn, roots, scenario, settings, clock, say, (shape, dtype), calls, list(rounds), warm_s, rounds_s)
    variants, stop = run.until_decided(pairs, t0)
    say(f"{run.sessions} sessions, {len(run.rounds)} rounds in {clock() - t0:.1f} s; stopped: {stop}")
    return PairResult(settings, sides["base"], sides["head"], shape, dtype, variants, tuple(run.rounds), stop,
                      run.rounds_s, run.warm_s, notes)


class _Session:
    """One session's workers, closed on the way out whatever happened."""

    def __init__(self, spawn: Spawn) -> None:
        self.workers = spawn()

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


def _timed(clock: Callable[[], float], fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = clock()
    out = fn()
    return clock() - t0, out


@dataclass
class _Runner:
    """Sessions after the first, until every variant is decided or the budget is spent."""

    spawn: Spawn
    roots: dict[str, str]
    scenario: str
    settings: AbSettings
    clock: Callable[[], float]
    say: Callable[[str], None]
    inputs: tuple[tuple[int, ...], str]
    calls: dict[str, int]
    rounds: list[RoundRecord]
    warm_s: float
    rounds_s: float

    @property
    def sessions(self) -> int:
        return session_count(self.rounds)

    def until_decided(self, pairs: tuple[VariantPair, ...], t0: float) -> tuple[tuple[VariantPair, ...], str]:
        s = self.settings
        last_session_s = self.clock() - t0
        stop = "max sessions"
        stats: dict[str, PairStats] = {}
        while self.sessions < s.max_sessions:
            if self.sessions >= s.min_sessions:
                stats = _stats(self.rounds, self.calls, s.threshold_pct)
                if all(v.verdict is not AbVerdict.INCONCLUSIVE for v in stats.values()):
                    stop = "decided"
                    break
                if self.clock() - t0 + last_session_s > s.max_seconds:
                    stop = "time budget"
                    break
            started = self.clock()
            self._one_session(self.sessions)
            last_session_s = self.clock() - started
        if not stats or next(iter(stats.values())).rounds != len(self.rounds):
            stats = _stats(self.rounds, self.calls, s.threshold_pct)
        return (tuple(VariantPair(p.name, p.kind, stats.get(p.name), p.base_error, p.head_error, p.calls_per_sample)
                      for p in pairs), stop)

    def _one_session(self, session: int) -> None:
        """Fresh workers: load, warm the measured variants (the first session's calibration kept), rounds."""
        shape, dtype = self.inputs
        t0 = self.clock()
        with _Session(self.spawn) as workers:
            self.say(f"session {session + 1}: loading and warming both sides")
            loaded = _load_both(workers, self.roots, self.scenario, self.settings)
            for side in SIDES:
                report = loaded[side]
                if report.error is None:
                    report = _warm(workers[side], report, shape, dtype, list(self.calls), self.settings, brief=True)
                bad = report.error or next((f"{name}: {w.get('error') or w.get('status')}"
                                            for name, w in report.variants.items() if w.get("status") != "ok"), None)
                if bad:
                    raise SideFailed(f"the {side} side failed in session {session + 1} "
                                     f"({report.error_stage or 'warm'}), after working in session 1: {bad}")
            self.warm_s += self.clock() - t0
            seconds, rounds = _timed(self.clock, lambda: _session_rounds(workers, self.calls, self.settings, session))
        self.rounds_s += seconds
        self.rounds.extend(rounds)


def _request(worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
    worker.send(msg)
    return _reply(worker, msg["cmd"])


def _reply(worker: Worker, stage: str) -> dict[str, Any]:
    reply = worker.receive()
    if reply.get("event") == "error":
        raise WorkerFailed(str(reply.get("stage") or stage), str(reply.get("message", "unknown error")))
    return reply


def _load_both(workers: dict[str, Worker], roots: dict[str, str], scenario: str,
               settings: AbSettings) -> dict[str, SideReport]:
    """Send ``load`` to both, then read both: imports and set-up overlap."""
    sent: dict[str, WorkerFailed | None] = {}
    for side in SIDES:
        try:
            workers[side].send({"cmd": "load", "root": roots[side], "scenario": scenario, "device": settings.device,
                                 "threads": settings.threads, "clock": settings.clock})
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
    devices = {s.device for s in out.values() if s.error is None}
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
    return out


def _side_report(side: str, reply: dict[str, Any]) -> SideReport:
    sc = reply["scenario"]
    return SideReport(
        side, scenario_name=sc["name"], scenario_description=sc["description"], device=reply["device"],
        time_basis=reply.get("time_basis"), environment=reply.get("environment"),
        declared=tuple(v["name"] for v in sc["variants"]),
        default_shape=tuple(int(d) for d in sc["default_shape"]), default_dtype=sc["default_dtype"],
        dtypes=tuple(sc.get("dtypes", ())),
        descriptions={v["name"]: v["description"] for v in sc["variants"]},
    )


def _shape_and_dtype(loaded: dict[str, SideReport], settings: AbSettings
                     ) -> tuple[tuple[int, ...], str, tuple[str, ...]]:
    """--shape/--dtype, else the base scenario's defaults (both sides must measure the same inputs)."""
    base, head = loaded["base"], loaded["head"]
    notes: list[str] = []
    if settings.shape is None and base.default_shape != head.default_shape:
        notes.append(f"the scenario's default shape differs (base {_dims(base.default_shape)}, "
                     f"head {_dims(head.default_shape)}); both sides used base's")
    if settings.dtype is None and base.default_dtype != head.default_dtype:
        notes.append(f"the scenario's default dtype differs (base {base.default_dtype}, head {head.default_dtype}); "
                     "both sides used base's")
    return (settings.shape or base.default_shape, settings.dtype or base.default_dtype, tuple(notes))


def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(str(d) for d in shape)


def _selected(loaded: dict[str, SideReport], wanted: tuple[str, ...] | None) -> tuple[str, ...]:
    """The variants to consider: --variants, or every variant of either side (base's order, then head's new)."""
    union = list(loaded["base"].declared) + [n for n in loaded["head"].declared if n not in loaded["base"].declared]
    if wanted is None:
        return tuple(union)
    unknown = [n for n in wanted if n not in union]
    if unknown:
        raise UsageError(f"variants: {', '.join(unknown)} not declared on either side; "
                         f"the scenario has {', '.join(union)}", field="variants")
    return wanted


def _warm(worker: Worker, report: SideReport, shape: tuple[int, ...], dtype: str, wanted: list[str],
          settings: AbSettings, brief: bool = False) -> SideReport:
    """Make the inputs, compile, check and warm ``wanted``; ``brief`` (later sessions): the fixed warm-up calls only,
    no calibration (the first session's calls per sample are kept; the priming round follows anyway)."""
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


def _classify(base: SideReport, head: SideReport, selected: Sequence[str]) -> tuple[VariantPair, ...]:
    out = []
    for name in selected:
        b, h = base.variants.get(name), head.variants.get(name)
        if b is None and h is None:
            continue
        if b is None:
            out.append(VariantPair(name, VariantKind.NEW, head_error=_error(h)))
            continue
        if h is None:
            out.append(VariantPair(name, VariantKind.REMOVED, base_error=_error(b)))
            continue
        b_ok, h_ok = b["status"] == "ok", h["status"] == "ok"
        kind = (VariantKind.MEASURED if b_ok and h_ok else VariantKind.BROKEN_IN_HEAD if b_ok
                else VariantKind.FAILED_IN_BASE if h_ok else VariantKind.FAILED_BOTH)
        calls = max(int(b.get("calls_per_sample") or 1), int(h.get("calls_per_sample") or 1)) if b_ok and h_ok else None
        out.append(VariantPair(name, kind, base_error=_error(b), head_error=_error(h), calls_per_sample=calls))
    return tuple(out)


def _error(reply: dict[str, Any] | None) -> str | None:
    if reply is None or reply.get("status") == "ok":
        return None
    return str(reply.get("error") or reply.get("status"))


def _session_rounds(workers: dict[str, Worker], calls: dict[str, int], settings: AbSettings,
                    session: int) -> tuple[RoundRecord, ...]:
    """One priming round (after the other side's warm-up, caches and clocks settle: not recorded), then the
    session's rounds in ABBA order."""
    block = {"cmd": "block", "samples": settings.samples_per_block, "discard": settings.discard_per_block,
             "calls": calls}
    for _ in range(PRIMING_ROUNDS):
        _one_round(workers, block, session, 0)
    return tuple(_one_round(workers, block, session, i) for i in range(settings.rounds_per_session))


def _one_round(workers: dict[str, Worker], block: dict[str, Any], session: int, index: int) -> RoundRecord:
    samples: dict[str, dict[str, tuple[float, ...]]] = {}
    order = round_order(index)
    for side in order:
        try:
            reply = _request(workers[side], block)
        except WorkerFailed as exc:
            raise SideFailed(f"the {side} worker failed in session {session + 1}, round {index + 1}: "
                             f"{exc.message}") from None
        samples[side] = {name: tuple(float(x) for x in values) for name, values in reply["samples_us"].items()}
    return RoundRecord(index, order[0], samples, session)


def _stats(rounds: Sequence[RoundRecord], calls: dict[str, int], threshold_pct: float) -> dict[str, PairStats]:
    by_session: dict[int, list[RoundRecord]] = {}
    for r in rounds:
        by_session.setdefault(r.session, []).append(r)
    return {name: pair_stats([SessionRounds(tuple(r.samples_us["base"][name] for r in rs),
                                            tuple(r.samples_us["head"][name] for r in rs))
                              for _, rs in sorted(by_session.items())], threshold_pct)
            for name in calls}


def _unmeasured(settings: AbSettings, sides: dict[str, SideReport], shape: tuple[int, ...] | None,
                dtype: str | None, notes: tuple[str, ...], warm_s: float) -> PairResult:
    return PairResult(settings, sides["base"], sides["head"], shape, dtype, (), (), "not measured", 0.0, warm_s, notes)
