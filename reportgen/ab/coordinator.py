"""The A/B coordinator: drive base and head workers through interleaved rounds, in several sessions, to a verdict.

A *session* is one fresh pair of worker processes: start both and load them (in parallel) -> warm and
compile one side, then the other -> one unrecorded priming round -> ``rounds_per_session`` rounds in ABBA
order (the opening side first in even rounds, the other in odd ones), each round one block of samples per
measured variant per side -> both workers closed. Which side is started (and warmed) first and which opens is
random per session, balanced over each two sessions and replayable from a seed recorded with the pair
(``session.session_orders``): neither side always goes first. Why sessions: two processes running the same
code differ by a fixed amount for their whole life (measured on a 2-core VM: up to ±20 % at a
cache-resident shape, ±2.5 % at the default shape), which rounds inside one pair of processes
cannot see. So the process pair is the unit of the interval: after ``min_sessions`` sessions, and
after every later one, the paired statistics over sessions (``analysis.paired.pair_stats``); while any
variant is *inconclusive*, or a *no change* whose interval is wider than ``precision_pct`` (``analysis.paired.settled``),
more sessions until the time budget (``max_seconds``, the whole measurement: loading, compiling and rounds) or
``max_sessions`` is spent.

The first session decides the shape, the dtype, which variants are measured (new, removed,
broken) and how many calls make one sample; later sessions reuse those.

Workers are anything with ``send``/``receive``/``close``, made by a ``spawn`` callable per session
(``process.ProcessWorker`` for real; tests pass deterministic fakes and a fake clock). A side that fails to
load or warm in the first session is named in the result, never an exception; a failure in a later
session (the same code worked before) raises ``SideFailed``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from reportgen.ab.pair import (
    PairResult,
    RoundRecord,
    SideReport,
    VariantKind,
    VariantPair,
    memory_changes,
    session_count,
)
from reportgen.ab.session import Session, SideFailed, Spawn, load_both, session_orders, session_rounds, warm
from reportgen.ab.settings import ORDER_SEEDS, AbSettings, samples_text
from reportgen.analysis.paired import PairStats, SessionRounds, pair_stats, settled
from reportgen.errors import UsageError
from reportgen.model.run import SessionOrder


def coordinate(spawn: Spawn, roots: dict[str, str], scenario: str, settings: AbSettings,
               clock: Callable[[], float] = time.monotonic, progress: Callable[[str], None] | None = None
               ) -> PairResult:
    """Measure a pair to a verdict (see the module docstring). ``roots`` maps side -> checkout folder."""
    settings.check()
    say = progress or (lambda _message: None)
    t0 = clock()
    seed = settings.order_seed if settings.order_seed is not None else secrets.randbelow(ORDER_SEEDS)
    orders = session_orders(seed)
    first = next(orders)
    with Session(spawn, first) as workers:
        say("session 1: loading both sides")
        loaded = load_both(workers, roots, scenario, settings, first)
        if any(s.error for s in loaded.values()):
            return _unmeasured(settings, loaded, None, None, (), clock() - t0)
        shape, dtype, notes = _shape_and_dtype(loaded, settings)
        selected = _selected(loaded, settings.variants)
        sides = dict(loaded)
        for side in first.spawn_sides:  # sequentially: one side's compile does not disturb the other's calibration
            say(f"session 1: warming up and compiling {side}")
            wanted = [n for n in selected if n in loaded[side].declared]
            sides[side] = warm(workers[side], loaded[side], shape, dtype, wanted, settings)
        if any(s.error for s in sides.values()):
            return _unmeasured(settings, sides, shape, dtype, notes, clock() - t0)
        pairs = _classify(sides["base"], sides["head"], selected)
        calls = {p.name: p.calls_per_sample or 1 for p in pairs if p.kind is VariantKind.MEASURED}
        if not calls:
            return PairResult(settings, sides["base"], sides["head"], shape, dtype, pairs, (), "not measured", 0.0,
                              clock() - t0, notes)
        warm_s = clock() - t0
        say(f"session 1: rounds of {samples_text(settings.samples_per_block)} per variant: {', '.join(calls)}")
        rounds_s, rounds = _timed(clock, lambda: session_rounds(workers, calls, settings, first))
    run = _Runner(spawn, roots, scenario, settings, clock, say, (shape, dtype), calls, list(rounds), warm_s, rounds_s,
                  orders, [first], [clock() - t0])
    variants, stop = run.until_decided(pairs, t0)
    say(f"{run.sessions} sessions, {len(run.rounds)} rounds in {clock() - t0:.1f} s; stopped: {stop}")
    memory = memory_changes(sides["base"], sides["head"], variants, settings.memory_threshold_pct)
    return PairResult(settings, sides["base"], sides["head"], shape, dtype, variants, tuple(run.rounds), stop,
                      run.rounds_s, run.warm_s, notes, memory, seed, tuple(run.started), tuple(run.session_s))


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
    orders: Iterator[SessionOrder]
    started: list[SessionOrder]
    session_s: list[float]
    """Each session's wall time: starting, loading, warming, rounds and closing its workers."""

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
                if all(settled(v, s.precision_pct) for v in stats.values()):
                    stop = "decided"
                    break
                if self.clock() - t0 + last_session_s > s.max_seconds:
                    stop = "time budget"
                    break
            started = self.clock()
            self._one_session(self.sessions)
            last_session_s = self.clock() - started
            self.session_s.append(last_session_s)
        if not stats or next(iter(stats.values())).rounds != len(self.rounds):
            stats = _stats(self.rounds, self.calls, s.threshold_pct)
        return (tuple(VariantPair(p.name, p.kind, stats.get(p.name), p.base_error, p.head_error, p.calls_per_sample)
                      for p in pairs), stop)

    def _one_session(self, session: int) -> None:
        """Fresh workers: load, warm the measured variants (the first session's calibration kept), rounds."""
        shape, dtype = self.inputs
        t0 = self.clock()
        order = next(self.orders)
        assert order.session == session
        self.started.append(order)
        with Session(self.spawn, order) as workers:
            self.say(f"session {session + 1}: loading and warming both sides")
            loaded = load_both(workers, self.roots, self.scenario, self.settings, order)
            for side in order.spawn_sides:
                report = loaded[side]
                if report.error is None:
                    report = warm(workers[side], report, shape, dtype, list(self.calls), self.settings, brief=True)
                bad = report.error or next((f"{name}: {w.get('error') or w.get('status')}"
                                            for name, w in report.variants.items() if w.get("status") != "ok"), None)
                if bad:
                    raise SideFailed(f"the {side} side failed in session {session + 1} "
                                     f"({report.error_stage or 'warm'}), after working in session 1: {bad}")
            self.warm_s += self.clock() - t0
            seconds, rounds = _timed(self.clock, lambda: session_rounds(workers, self.calls, self.settings, order))
        self.rounds_s += seconds
        self.rounds.extend(rounds)


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
