"""The A/B coordinator with deterministic fake workers and a fake clock: sessions, order, verdicts, budget, sides,
bundles, and the comment (escaping, what it states). No processes, no timing luck."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from reportgen.ab.bundles import store_pair
from reportgen.ab.coordinator import coordinate
from reportgen.ab.pair import PairResult, VariantKind, sides_from
from reportgen.ab.report import ab_json, render_ab_markdown, render_scenario_only
from reportgen.ab.session import SideFailed, session_orders, usable_cpus
from reportgen.ab.settings import AbSettings, session_cpu
from reportgen.analysis.paired import AbVerdict
from reportgen.errors import ExitCode, UsageError
from reportgen.model.codec import to_jsonable
from reportgen.model.run import Environment, GitInfo, SessionOrder
from reportgen.store.loader import load_run, load_store
from reportgen.text.markdown import md_escape

ENV = to_jsonable(Environment(hostname="testhost", platform="Linux", python_version="3.11.7", cpu_model="Test CPU",
                              cpu_count=2, torch_version="2.13.0", torch_threads=2, device_name="Test CPU"))
ROOTS = {"base": "/checkouts/base", "head": "/checkouts/head"}
COMMITS = {"base": GitInfo("a" * 40, False), "head": GitInfo("b" * 40, True)}
HOSTILE = "<b>x|y</b> @octocat `tick` [l](javascript:alert(1))"


class Clock:
    """Fake time: advanced only by the fake workers' blocks."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeWorker:
    """A side whose per-call times are ``times_us[v] * process * factor(block index) * drift(clock)``, exactly;
    ``process`` is this worker process's own fixed offset (the same code runs a little faster or slower in one
    process than in another), ``warm_status_from_session`` a variant status from that session on."""

    side: str
    times_us: dict[str, float]
    clock: Clock
    log: list[tuple[str, str, dict[str, Any]]]
    session: int = 0
    process: float = 1.0
    warm_status_from_session: tuple[int, dict[str, str]] | None = None
    factor: Callable[[int], float] = lambda _i: 1.0
    drift: Callable[[float], float] = lambda _t: 1.0
    block_s: float = 1.0
    load_error: str | None = None
    warm_status: dict[str, str] = field(default_factory=dict)
    die_at_block: int | None = None
    default_shape: tuple[int, ...] = (4, 8)
    device: str = "cpu"
    cache_flush_bytes: int = 0  # what the real worker's backend flushes per timed call (CUDA: 256 MiB or 2x L2)
    blocks: int = 0
    pending: dict[str, Any] | None = None
    closed: bool = False

    def send(self, msg: dict[str, Any]) -> None:
        self.log.append((self.side, msg["cmd"], msg))
        self.pending = msg

    def receive(self) -> dict[str, Any]:
        msg, self.pending = self.pending, None
        assert msg is not None
        return getattr(self, "_" + msg["cmd"])(msg)

    def close(self) -> None:
        self.closed = True

    def _load(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.load_error:
            return {"event": "error", "stage": "load", "message": self.load_error}
        variants = [{"name": n, "description": f"{n} on {self.side}", "compile": False} for n in self.times_us]
        # as the real worker (reportgen.ab.worker.pin_to_cpu): pinned where asked, on the CPU with one thread
        pinned = msg.get("cpu") if self.device == "cpu" and msg.get("threads") in (None, 1) else None
        return {"event": "loaded", "device": self.device, "cpu": pinned,
                "time_basis": "cpu" if self.device == "cpu" else "device",
                "cache_flush_bytes": self.cache_flush_bytes, "environment": ENV,
                "scenario": {"name": "tiny", "description": "a tiny scenario", "default_shape": list(self.default_shape),
                             "default_dtype": "float32", "dtypes": ["float32"], "variants": variants}}

    def _warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        out = {}
        later = self.warm_status_from_session
        statuses = later[1] if later is not None and self.session >= later[0] else self.warm_status
        for name in msg["variants"]:
            status = statuses.get(name, "ok")
            out[name] = {"status": status, "error": None if status == "ok" else f"{status}: boom {HOSTILE}",
                         "first_call_us": 10 * self.times_us[name], "calls_per_sample": 2 if self.side == "head" else 1,
                         "correctness": None, "bytes_per_call": 64, "flops_per_call": 16}
        return {"event": "warm", "variants": out}

    def _block(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.die_at_block is not None and self.blocks == self.die_at_block:
            return {"event": "error", "stage": "block", "message": "Segmentation fault"}
        scale = self.process * self.factor(self.blocks) * self.drift(self.clock.now)
        self.blocks += 1
        self.clock.now += self.block_s
        samples = {name: [self.times_us[name] * scale * f for f in (0.9, 1.0, 1.0, 3.0)] for name in msg["calls"]}
        return {"event": "block", "samples_us": samples}


@dataclass
class Pair:
    """What a coordinated fake pair produced: the result, the log of every command, every session's workers."""

    result: PairResult
    log: list[tuple[str, str, dict[str, Any]]]
    workers: list[dict[str, FakeWorker]]


TWO_ROUNDS = AbSettings(rounds_per_session=2, samples_per_block=2)  # short pairs; the method texts below name 2
"""The fake pairs' arithmetic below counts 2 rounds per session (the default is 64: see the default's own test)."""


def pair(base_times: dict[str, float], head_times: dict[str, float], settings: AbSettings | None = None,
         process: Callable[[int], float] = lambda _session: 1.0, **head_kw: Any) -> Pair:
    """Coordinate fake workers; ``process(session)`` is head's process offset in that session; ``base_*`` keywords
    go to base's workers, the others to head's."""
    clock, log = Clock(), []  # type: ignore[var-annotated]
    base_kw = {k[5:]: head_kw.pop(k) for k in list(head_kw) if k.startswith("base_")}
    drift = head_kw.pop("drift", lambda _t: 1.0)
    made: list[dict[str, FakeWorker]] = []

    def spawn(order: SessionOrder) -> dict[str, Any]:
        session = len(made)
        assert order.session == session
        made.append({"base": FakeWorker("base", base_times, clock, log, session, drift=drift, **base_kw),
                     "head": FakeWorker("head", head_times, clock, log, session, process(session), drift=drift,
                                        **head_kw)})
        return dict(made[-1])

    result = coordinate(spawn, ROOTS, "tiny", settings or TWO_ROUNDS, clock=clock)
    return Pair(result, log, made)


def linear_drift(t: float) -> float:
    """The machine gets 1 % slower per block (per fake second): 40 % over a 40-block pair."""
    return 1.0 + t / 100.0


def block_sides(log: list[tuple[str, str, dict[str, Any]]]) -> str:
    return "".join(side[0].upper() for side, cmd, _ in log if cmd == "block")


def planned_blocks(orders: tuple[SessionOrder, ...], rounds: int) -> str:
    """What the recorded orders say the blocks were: per session, a priming round that ends with the side that
    opens (so round 0's first side runs right after its own block, as every later round's does), then ``rounds``
    rounds, ABBA from that side."""
    out = ""
    for order in orders:
        ab = "".join(side[0].upper() for side in sides_from(order.opens))
        out += ab[::-1] + "".join(ab if i % 2 == 0 else ab[::-1] for i in range(rounds))
    return out


def test_sessions_of_fresh_workers_each_prime_then_alternate_abba() -> None:
    p = pair({"naive": 100.0}, {"naive": 100.0})
    result = p.result
    assert result.stop_reason == "decided" and result.sessions == 6 and len(result.rounds) == 12
    assert len(p.workers) == 6 and all(w.closed for session in p.workers for w in session.values())
    orders = result.orders
    assert [o.session for o in orders] == list(range(6)) and result.order_seed is not None
    assert block_sides(p.log) == planned_blocks(orders, 2)  # per session: one priming round, then 2 rounds ABBA
    assert [(r.session, r.index, r.first_side) for r in result.rounds] == [
        (s, i, sides_from(orders[s].opens)[i % 2]) for s in range(6) for i in range(2)]
    assert [cmd for _, cmd, _ in p.log if cmd in ("load", "quit")] == ["load", "load", "quit", "quit"] * 6
    loads = [side for side, cmd, _ in p.log if cmd == "load"]
    warms = [(side, msg["brief"]) for side, cmd, msg in p.log if cmd == "warm"]
    assert loads == [side for o in orders for side in o.spawn_sides]
    assert warms == [(side, o.session > 0) for o in orders for side in o.spawn_sides]  # calibrated once
    # both sides time the same calls per sample in every session: the larger of session 1's calibrations
    assert all(msg["calls"] == {"naive": 2} for _, cmd, msg in p.log if cmd == "block")


def test_who_starts_and_who_opens_is_random_balanced_and_replays_from_the_recorded_seed() -> None:
    plans = {seed: list(islice(session_orders(seed), 40)) for seed in range(50)}
    for orders in plans.values():
        for k in range(0, 40, 2):  # every two sessions: each side started first once and opened once
            two = orders[k:k + 2]
            assert sorted(o.spawned_first for o in two) == ["base", "head"]
            assert sorted(o.opens for o in two) == ["base", "head"]
    assert list(islice(session_orders(7), 40)) == plans[7]  # a seed is a plan
    firsts = {(orders[0].spawned_first, orders[0].opens) for orders in plans.values()}
    assert len(firsts) == 4  # not a fixed pattern: every combination opens some pair
    drawn = pair({"naive": 100.0}, {"naive": 100.0})
    replayed = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, order_seed=drawn.result.order_seed))
    assert replayed.result.orders == drawn.result.orders and replayed.log == drawn.log
    other = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, order_seed=drawn.result.order_seed + 1))
    assert other.result.order_seed == drawn.result.order_seed + 1
    assert [o for o in other.result.orders] == list(islice(session_orders(other.result.order_seed), 6))


def test_by_default_a_session_primes_then_runs_sixty_four_one_sample_rounds_abba() -> None:
    result = pair({"naive": 100.0}, {"naive": 100.0}, AbSettings())
    assert result.result.sessions == 6 and len(result.result.rounds) == 6 * 64
    assert block_sides(result.log) == planned_blocks(result.result.orders, 64)
    blocks = [msg for _, cmd, msg in result.log if cmd == "block"]
    assert all((msg["samples"], msg["discard"]) == (1, 0) for msg in blocks)  # fine interleaving: 1 timed sample


def test_same_code_under_strong_drift_is_no_change() -> None:
    result = pair({"naive": 100.0, "fused": 50.0}, {"naive": 100.0, "fused": 50.0}, drift=linear_drift).result
    (naive, fused) = result.variants
    assert naive.stats is not None and fused.stats is not None
    medians = naive.stats.base_round_medians_us
    assert medians[-1] / medians[0] > 1.15  # the machine drifted by more than the threshold ...
    assert naive.verdict is AbVerdict.NO_CHANGE and fused.verdict is AbVerdict.NO_CHANGE  # ... and it cancelled
    assert result.verdict is AbVerdict.NO_CHANGE and result.exit_code is ExitCode.OK


def test_a_process_offset_is_never_read_as_a_change() -> None:
    """The same code in one worker process runs 10 % slower or faster than in another, for the process's life. Inside
    one session every round agrees (a one-session pair would call it a regression); across sessions it is noise."""
    offsets = (1.10, 0.90, 1.10, 0.90, 1.10, 0.90)
    p = pair({"naive": 100.0}, {"naive": 100.0}, AbSettings(rounds_per_session=2, max_seconds=36.0),
             process=lambda s: offsets[s % 6])
    stats = p.result.variants[0].stats
    assert stats is not None and stats.session_ratios == pytest.approx(offsets)
    assert all(r == pytest.approx(1.10) for r in stats.round_ratios[:2])  # session 1 alone looked like +10 %
    assert (stats.ci_low, stats.ci_high) == pytest.approx((0.90, 1.10)) and stats.process_noise_pct > 9
    assert p.result.verdict is AbVerdict.INCONCLUSIVE and p.result.exit_code is ExitCode.INCONCLUSIVE
    small = pair({"naive": 100.0}, {"naive": 100.0}, AbSettings(precision_pct=0.0),
                 process=lambda s: (1.02, 0.99, 1.01, 0.98, 1.03, 1.0)[s])
    assert small.result.verdict is AbVerdict.NO_CHANGE and small.result.sessions == 6


def test_a_real_slowdown_is_a_regression_and_three_percent_is_not() -> None:
    slow = pair({"naive": 100.0, "fused": 50.0}, {"naive": 100.0, "fused": 62.5}, drift=linear_drift).result
    assert [v.verdict for v in slow.variants] == [AbVerdict.NO_CHANGE, AbVerdict.REGRESSION]
    assert slow.exit_code is ExitCode.REGRESSION
    small = pair({"fused": 50.0}, {"fused": 51.5}, drift=linear_drift).result
    assert small.variants[0].verdict is AbVerdict.NO_CHANGE and small.exit_code is ExitCode.OK
    faster = pair({"fused": 50.0}, {"fused": 40.0}, drift=linear_drift).result
    assert faster.verdict is AbVerdict.IMPROVEMENT and faster.exit_code is ExitCode.OK


def test_inconclusive_runs_more_sessions_until_the_budget_then_exits_7() -> None:
    settings = AbSettings(rounds_per_session=2, max_seconds=100.0)
    result = pair({"naive": 100.0}, {"naive": 100.0}, settings, process=lambda s: 1.12 if s % 2 else 1.0).result
    assert result.variants[0].verdict is AbVerdict.INCONCLUSIVE
    assert result.stop_reason == "time budget" and result.exit_code is ExitCode.INCONCLUSIVE
    session_s = 6.0  # three rounds (one priming) of two fake blocks of 1 s
    assert result.sessions == 16 > settings.min_sessions  # 6 sessions (36 s), then more while one more fits
    total_s = result.rounds_s + result.warm_s
    assert total_s <= settings.max_seconds < total_s + session_s


def test_an_inconclusive_comment_says_it_is_not_no_change_and_how_to_narrow_it() -> None:
    settings = AbSettings(rounds_per_session=2, max_seconds=100.0)
    result = pair({"naive": 100.0}, {"naive": 100.0}, settings, process=lambda s: 1.12 if s % 2 else 1.0).result
    text = render_ab_markdown(result, COMMITS, None)
    assert ('Inconclusive is not "no change": an interval still straddles ±5 % after 16 sessions (stopped: time '
            "budget; `--max-seconds 100`). A longer budget or a quieter machine narrows the intervals") in text
    hint = "This pair left reportgen ab's CPU defaults"
    assert hint not in text  # run with the defaults: nothing to suggest
    one_thread = "One thread per worker, reportgen ab's CPU default (it decides on a shared CPU): this verdict cannot see"
    assert one_thread in text
    left = pair({"naive": 100.0}, {"naive": 100.0}, replace(settings, threads=2, huge_pages=False),
                process=lambda s: 1.12 if s % 2 else 1.0).result
    left_text = render_ab_markdown(left, COMMITS, None)
    assert left.verdict is AbVerdict.INCONCLUSIVE and one_thread not in left_text
    assert (f"{hint} (`--threads 2 --no-huge-pages`): on a CPU shared with other work, one thread per worker and huge "
            "pages (the defaults) gave verdicts where torch's threads and 4 KiB pages stayed inconclusive") in left_text
    on_gpu = pair({"naive": 100.0}, {"naive": 100.0}, settings, process=lambda s: 1.12 if s % 2 else 1.0,
                  device="cuda", base_device="cuda").result
    gpu_text = render_ab_markdown(on_gpu, COMMITS, None)
    assert on_gpu.verdict is AbVerdict.INCONCLUSIVE and hint not in gpu_text and one_thread not in gpu_text
    decided = pair({"naive": 100.0}, {"naive": 100.0}, TWO_ROUNDS).result
    assert decided.verdict is AbVerdict.NO_CHANGE and "Inconclusive is not" not in render_ab_markdown(decided, COMMITS, None)


def test_more_sessions_settle_an_inconclusive_start() -> None:
    # head's processes in sessions 1-6 alternate 1.0 / 1.3, later ones are all 1.2. The Walsh averages of the logs:
    # six at log 1.0 (three sessions and their pairs), six at log 1.3, then the means of 1.0 or 1.3 with each 1.2. The
    # signed-rank rank k is 6 at n = 9 (the sixth smallest is still 1.0) and 9 at n = 10: [sqrt(1.2), sqrt(1.2 x 1.3)].
    result = pair({"naive": 100.0}, {"naive": 100.0}, AbSettings(rounds_per_session=2, max_seconds=1000.0),
                  process=lambda s: (1.3 if s % 2 else 1.0) if s < 6 else 1.2).result
    assert result.stop_reason == "decided" and result.sessions == 10
    stats = result.variants[0].stats
    assert stats is not None and (stats.ci_low, stats.ci_high) == pytest.approx((1.2**0.5, (1.2 * 1.3) ** 0.5))
    assert result.exit_code is ExitCode.REGRESSION


def test_variants_on_one_side_only_are_new_or_removed_never_failures() -> None:
    p = pair({"naive": 100.0, "old": 10.0}, {"naive": 100.0, "new": 10.0})
    result, log = p.result, p.log
    kinds = {v.name: v.kind for v in result.variants}
    assert kinds == {"naive": VariantKind.MEASURED, "old": VariantKind.REMOVED, "new": VariantKind.NEW}
    assert all(set(msg["calls"]) == {"naive"} for _, cmd, msg in log if cmd == "block")
    assert result.exit_code is ExitCode.OK
    text = render_ab_markdown(result, COMMITS, None)
    assert "| new | — | — | — | — | new in head (not compared) |" in text
    assert "| old | — | — | — | — | removed in head |" in text


def test_a_side_that_fails_to_load_is_named_and_exits_3() -> None:
    p = pair({"naive": 100.0}, {"naive": 100.0}, load_error=f"ImportError: {HOSTILE}")
    result, log = p.result, p.log
    assert len(p.workers) == 1 and all(w.closed for w in p.workers[0].values())
    assert [s.side for s in result.failed_sides] == ["head"] and result.head.error_stage == "load"
    assert result.rounds == () and result.exit_code is ExitCode.BAD_INPUT
    assert [cmd for _, cmd, _ in log] == ["load", "load", "quit", "quit"]
    text = render_ab_markdown(result, COMMITS, None)
    assert "### :warning: reportgen A/B: a side failed" in text
    assert f"> The **head** side failed (import): {md_escape('ImportError: ' + HOSTILE)}" in text
    assert HOSTILE not in text


def test_a_variant_that_fails_to_compile_in_head_is_a_named_regression() -> None:
    result = pair({"naive": 100.0, "compiled": 20.0}, {"naive": 100.0, "compiled": 20.0},
                  warm_status={"compiled": "failed"}).result
    kinds = {v.name: v.kind for v in result.variants}
    assert kinds == {"naive": VariantKind.MEASURED, "compiled": VariantKind.BROKEN_IN_HEAD}
    assert result.exit_code is ExitCode.REGRESSION and result.verdict is AbVerdict.REGRESSION
    text = render_ab_markdown(result, COMMITS, None)
    assert f":red_circle: broken in head: {md_escape('failed: boom ' + HOSTILE)}" in text
    only_base = pair({"naive": 100.0, "compiled": 20.0}, {"naive": 100.0, "compiled": 20.0},
                     base_warm_status={"compiled": "incorrect"}).result
    assert only_base.variants[1].kind is VariantKind.FAILED_IN_BASE and only_base.exit_code is ExitCode.OK


def test_a_worker_dying_mid_rounds_is_named() -> None:
    with pytest.raises(SideFailed, match="the head worker failed in session 1, round 2: Segmentation fault"):
        pair({"naive": 100.0}, {"naive": 100.0}, die_at_block=2)  # blocks 0 priming, 1-2 rounds 1-2


def test_a_variant_breaking_in_a_later_session_stops_the_pair_naming_it() -> None:
    with pytest.raises(SideFailed, match=r"^the head side failed in session 3 \(warm\), after working in session 1: "
                       "compiled: failed: boom"):
        pair({"naive": 100.0, "compiled": 20.0}, {"naive": 100.0, "compiled": 20.0},
             warm_status_from_session=(2, {"compiled": "failed"}))


def test_bad_settings_and_unknown_variants_are_refused() -> None:
    with pytest.raises(UsageError, match="^sessions 5: must be at least 6"):
        pair({"naive": 1.0}, {"naive": 1.0}, AbSettings(min_sessions=5))
    with pytest.raises(UsageError, match="^rounds 3: must be an even number >= 2"):
        pair({"naive": 1.0}, {"naive": 1.0}, AbSettings(rounds_per_session=3))
    with pytest.raises(UsageError, match="^threshold 0: must be a positive"):
        pair({"naive": 1.0}, {"naive": 1.0}, AbSettings(threshold_pct=0))
    with pytest.raises(UsageError, match="^variants: turbo not declared on either side"):
        pair({"naive": 1.0}, {"naive": 1.0}, AbSettings(variants=("naive", "turbo")))
    for settings, flag in ((AbSettings(samples_per_block=0), "--samples 0: must be at least 1"),
                           (AbSettings(max_seconds=0), "--max-seconds 0: must be positive")):
        with pytest.raises(UsageError) as info:
            settings.check()
        assert info.value.as_flag_message() == flag  # the library names the field; the CLI writes it as the flag


def test_both_sides_load_with_the_threads_asked_for() -> None:
    for threads in (None, 1):
        p = pair({"naive": 1.0}, {"naive": 1.0}, replace(TWO_ROUNDS, threads=threads))
        loads = [msg for _side, cmd, msg in p.log if cmd == "load"]
        assert len(loads) == 2 * len(p.workers) and all(m["threads"] == threads for m in loads)
    with pytest.raises(UsageError) as info:
        AbSettings(threads=0).check()
    assert info.value.as_flag_message() == "--threads 0: must be at least 1"


def test_both_workers_of_a_session_are_sent_to_one_cpu_and_sessions_take_the_cpus_in_turn() -> None:
    """A difference between two CPUs must not become a difference between the sides: each session's two workers get
    the same CPU, and over sessions every usable CPU is used (in turn, not always the first)."""
    assert [session_cpu(frozenset({3, 1}), s) for s in range(5)] == [1, 3, 1, 3, 1]
    assert [session_cpu(frozenset({0}), s) for s in range(3)] == [0, 0, 0]
    p = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, precision_pct=0.0))
    cpus = sorted(usable_cpus())
    loads = [m["cpu"] for _side, cmd, m in p.log if cmd == "load"]
    per_session = [loads[i:i + 2] for i in range(0, len(loads), 2)]
    assert len(per_session) == len(p.workers) >= 6
    assert all(a == b for a, b in per_session)  # both sides of a session: the same CPU
    assert [a for a, _b in per_session] == [cpus[s % len(cpus)] for s in range(len(per_session))]
    free = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, same_cpu=False))
    assert {m["cpu"] for _s, cmd, m in free.log if cmd == "load"} == {None}
    said = "Both workers of a session ran on one CPU, the sessions taking the CPUs in turn"
    assert p.result.base.cpu == p.result.head.cpu == cpus[0]  # as the workers said: the first session's CPU
    assert said in render_ab_markdown(p.result, COMMITS, None)
    assert free.result.base.cpu is None and said not in render_ab_markdown(free.result, COMMITS, None)
    unpinned = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, threads=2))  # never pinned with 2 threads
    assert unpinned.result.head.cpu is None and said not in render_ab_markdown(unpinned.result, COMMITS, None)


def test_the_cpu_clock_is_asked_of_both_workers_and_named_in_the_method() -> None:
    p = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, clock="cpu"))
    loads = [msg for _side, cmd, msg in p.log if cmd == "load"]
    assert len(loads) == 2 * len(p.workers) and all(m["clock"] == "cpu" for m in loads)
    assert p.result.method.startswith("samples timed by each worker's CPU time (user + system, all its threads), "
                                      "not the wall clock; median of each side's block of 2 samples")
    wall = pair({"naive": 100.0}, {"naive": 100.0}, TWO_ROUNDS)
    assert all(m["clock"] == "wall" for _s, cmd, m in wall.log if cmd == "load")
    assert "CPU time" not in wall.result.method and wall.result.method.startswith("median of each side's block")


def test_the_cpu_clock_is_refused_off_the_cpu_and_a_clock_must_be_known() -> None:
    with pytest.raises(UsageError) as info:
        pair({"naive": 1.0}, {"naive": 1.0}, replace(TWO_ROUNDS, clock="cpu"), device="cuda", base_device="cuda")
    assert info.value.as_flag_message() == ("--clock cpu: times work on the CPU, but this pair runs on cuda; use "
                                            "--clock wall (or --device cpu)")
    assert pair({"naive": 1.0}, {"naive": 1.0}, TWO_ROUNDS, device="cuda", base_device="cuda").result.sessions == 6
    with pytest.raises(UsageError) as info:
        AbSettings(clock="sundial").check()
    assert info.value.as_flag_message() == "--clock 'sundial': choose wall or cpu"


def test_huge_pages_are_named_in_the_method_and_the_stored_runs_and_refused_off_the_cpu(tmp_path: Path) -> None:
    huge = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, huge_pages=True)).result
    assert huge.method.startswith("torch's large CPU allocations in transparent huge pages in both workers "
                                  "(THP_MEM_ALLOC_ENABLE=1); median of each side's block")
    ids = store_pair(huge, COMMITS, tmp_path)
    for run_id in ids.values():
        notes = load_run(tmp_path / run_id).notes
        assert len(notes) == 2 and notes[1].startswith("both workers ran with THP_MEM_ALLOC_ENABLE=1 (reportgen ab's "
                                                       "CPU default where the kernel gives huge pages on request")
    assert "huge pages" not in pair({"naive": 100.0}, {"naive": 100.0}, TWO_ROUNDS).result.method
    # the default: huge pages where this kernel gives them on request, on the CPU only; --no-huge-pages: none
    kernel = replace(TWO_ROUNDS, thp_on_request=True)
    assert pair({"naive": 1.0}, {"naive": 1.0}, kernel).result.huge_pages
    assert not pair({"naive": 1.0}, {"naive": 1.0}, replace(kernel, huge_pages=False)).result.huge_pages
    on_gpu = pair({"naive": 1.0}, {"naive": 1.0}, kernel, device="cuda", base_device="cuda").result
    assert not on_gpu.huge_pages and "huge pages" not in on_gpu.method  # not refused: only the flag itself is
    with pytest.raises(UsageError) as info:
        pair({"naive": 1.0}, {"naive": 1.0}, replace(TWO_ROUNDS, huge_pages=True), device="cuda", base_device="cuda")
    assert info.value.as_flag_message() == ("--huge-pages: changes torch's CPU allocations, but this pair runs on "
                                            "cuda; drop it (or --device cpu)")


def test_a_flushed_device_pair_records_its_flush_and_its_clock(tmp_path: Path) -> None:
    """On CUDA each sample is one call after a cache flush, timed by CUDA events: the method and both stored runs
    say so (they used to store the calibrated calls per sample and no flush)."""
    flush = 256 * 1024 * 1024
    result = pair({"naive": 100.0}, {"naive": 100.0}, TWO_ROUNDS, device="cuda", base_device="cuda",
                  cache_flush_bytes=flush, base_cache_flush_bytes=flush).result
    assert result.method.startswith("samples timed by the device's own clock (events around each call); each sample "
                                    "one call after 256 MiB written to flush the device cache (outside the timing); "
                                    "median of each side's block")
    for run_id in store_pair(result, COMMITS, tmp_path).values():
        run = load_run(tmp_path / run_id)
        assert run.settings is not None and run.settings.cache_flush_bytes == flush
        assert run.ab is not None and run.ab.method == result.method
    assert "flush" not in pair({"naive": 1.0}, {"naive": 1.0}, TWO_ROUNDS).result.method


def test_differing_default_shapes_use_base_and_say_so() -> None:
    p = pair({"naive": 1.0}, {"naive": 1.0}, default_shape=(8, 8))
    result, log = p.result, p.log
    assert result.shape == (4, 8)
    assert all(msg["shape"] == [4, 8] for _, cmd, msg in log if cmd == "warm")
    assert result.notes == ("the scenario's default shape differs (base 4,8, head 8,8); both sides used base's",)


def test_both_runs_are_stored_as_one_pair_with_every_rounds_samples(tmp_path: Path) -> None:
    result = pair({"naive": 100.0, "fused": 50.0}, {"naive": 100.0, "fused": 62.5}, drift=linear_drift).result
    ids = store_pair(result, COMMITS, tmp_path)
    base, head = load_run(tmp_path / ids["base"]), load_run(tmp_path / ids["head"])
    assert [r.run_id for r in load_store(tmp_path)] == sorted(ids.values())
    assert base.ab is not None and head.ab is not None
    assert base.ab.pair_id == head.ab.pair_id
    assert (base.ab.side, base.ab.partner_run_id) == ("base", head.run_id)
    assert (head.ab.side, head.ab.partner_run_id) == ("head", base.run_id)
    assert base.ab.method == head.ab.method == result.method and base.ab.threshold_pct == 5.0
    assert base.ab.order_seed == head.ab.order_seed == result.order_seed is not None
    assert base.ab.orders == head.ab.orders == result.orders and len(result.orders) == result.sessions
    assert base.ab.method.startswith("median of each side's block of 2 samples per variant per round, ")
    assert base.git == COMMITS["base"] and head.git == COMMITS["head"]
    for run, side in ((base, "base"), (head, "head")):
        assert run.ab is not None and len(run.ab.rounds) == len(result.rounds)
        for stored, measured in zip(run.ab.rounds, result.rounds, strict=True):
            assert (stored.first_side, stored.session, stored.index) == (measured.first_side, measured.session,
                                                                       measured.index)
            assert {s.variant: s.samples_us for s in stored.samples} == measured.samples_us[side]
        fused = run.variant("fused")
        assert fused is not None
        assert fused.samples_us == tuple(x for r in result.rounds for x in r.samples_us[side]["fused"])
        assert fused.description == f"fused on {side}"
    assert base.scenario.parameters == {"shape": "4,8", "dtype": "float32", "seed": "0"}


def test_the_stated_method_follows_the_block_settings_used() -> None:
    """The stored and commented method names the samples per block and any untimed ones, as measured."""
    plain = pair({"naive": 100.0}, {"naive": 100.0}, TWO_ROUNDS).result
    assert "block of 2 samples per variant per round, ratio" in plain.method and "untimed" not in plain.method
    settings = AbSettings(rounds_per_session=2, samples_per_block=8, discard_per_block=1)
    result = pair({"naive": 100.0}, {"naive": 100.0}, settings).result
    assert "block of 8 samples after 1 untimed per variant per round" in result.method
    single = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, samples_per_block=1)).result
    assert "block of 1 sample per variant" in single.method


def test_the_comment_states_rounds_method_noise_commits_and_machine() -> None:
    result = pair({HOSTILE: 100.0}, {HOSTILE: 125.0}, drift=linear_drift).result
    text = render_ab_markdown(result, COMMITS, {"base": "run-a", "head": "run-b"})
    assert text.startswith("<!-- reportgen-ab -->\n### :x: reportgen A/B: time regression: ")
    assert ("**6 sessions** (fresh pairs of worker processes) of 2 rounds, **12 rounds** in all, in ABBA order, "
            "2 samples per variant per side per round") in text
    assert "between pairs of processes (spread of the sessions' ratios): at most 0.0 %" in text
    single = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, samples_per_block=1)).result
    assert "in ABBA order, 1 sample per variant per side per round (" in render_ab_markdown(single, COMMITS, None)
    assert md_escape(result.method) in text and "stopped: decided" in text
    assert "The pair's own noise (spread of one side's round medians): at most " in text
    assert "base aaaaaaaaaaaa vs head bbbbbbbbbbbb \\(with uncommitted changes\\)" in text
    assert "(" + md_escape("Test CPU, host testhost, torch 2.13.0, 2 threads") + ")" in text
    assert HOSTILE not in text and md_escape(HOSTILE) in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 and all(r.count(" | ") == 5 for r in rows[1:])  # header + one row, six cells
    assert "| " + md_escape(HOSTILE) + " | " in rows[1] and ":red_circle: regression" in rows[1]
    assert "run\\-a" in text
    doc = json.loads(ab_json(result, COMMITS, None))
    assert doc["schema_version"] == 1 and doc["verdict"] == "regression" and doc["exit_code"] == 1
    assert len(doc["rounds"]) == 12 and doc["variants"][0]["stats"]["rounds"] == 12 and doc["sessions"] == 6
    assert doc["variants"][0]["stats"]["sessions"] == 6 and doc["rounds"][-1]["session"] == 5
    assert doc["order_seed"] == result.order_seed and doc["orders"] == [
        {"session": o.session, "spawned_first": o.spawned_first, "opens": o.opens} for o in result.orders]


def test_a_scenario_on_one_side_only_is_new_or_removed() -> None:
    text = render_scenario_only(HOSTILE, "new", COMMITS, "markdown")
    assert f"scenario {md_escape(HOSTILE)} is new in head" in text and "This is not a failure." in text
    doc = json.loads(render_scenario_only("tiny", "removed", COMMITS, "json"))
    assert doc["scenario_status"] == "removed"


WOBBLE = (1.03, 0.97, 1.01, 0.99, 1.02, 0.98)
"""Head's process offsets, session by session: identical code, sessions ±3 % apart (the interval after 6 sessions is
inside ±5 % but ±3 % wide)."""


def test_a_no_change_waits_for_an_interval_as_narrow_as_the_precision_asks() -> None:
    def wobble(s: int) -> float:
        return WOBBLE[s % len(WOBBLE)]

    first = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, precision_pct=0.0), process=wobble).result
    assert first.sessions == 6 and first.stop_reason == "decided"
    wide = first.variants[0].stats
    assert wide is not None and wide.verdict is AbVerdict.NO_CHANGE and wide.half_width_pct > 2.0
    narrow = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, precision_pct=2.0), process=wobble).result
    stats = narrow.variants[0].stats
    assert narrow.stop_reason == "decided" and narrow.sessions > 6 and narrow.exit_code is ExitCode.OK
    assert stats is not None and stats.verdict is AbVerdict.NO_CHANGE and stats.half_width_pct <= 2.0
    # the budget still ends it: 6 sessions of 6 fake seconds fit 40 s, a seventh does not; inside ±5 %, so no change
    short = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, max_seconds=40.0), process=wobble).result
    assert short.sessions == 6 and short.stop_reason == "time budget"
    assert short.verdict is AbVerdict.NO_CHANGE and short.exit_code is ExitCode.OK
    text = render_ab_markdown(narrow, COMMITS, None)
    assert "a *no change* waits, within the budget, for an interval at most ±2 % wide" in text
    assert json.loads(ab_json(narrow, COMMITS, None))["precision_pct"] == 2.0


def test_a_regression_stops_at_once_whatever_the_precision() -> None:
    settings = replace(TWO_ROUNDS, precision_pct=0.5)
    slower = pair({"naive": 100.0}, {"naive": 120.0}, settings,
                  process=lambda s: WOBBLE[s % len(WOBBLE)]).result
    assert slower.verdict is AbVerdict.REGRESSION and slower.sessions == 6 and slower.stop_reason == "decided"


@pytest.mark.parametrize("precision", [-0.5, 5.0, 7.0])
def test_a_precision_outside_zero_to_the_threshold_is_refused(precision: float) -> None:
    with pytest.raises(UsageError, match=r"precision .*: must be at least 0 .* below the threshold \(5\)"):
        AbSettings(precision_pct=precision).check()
