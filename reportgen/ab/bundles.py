"""Both sides of a measured pair as run bundles, each marked as one side of the pair and naming its partner."""

from __future__ import annotations

import dataclasses
import secrets
from datetime import datetime, timezone
from pathlib import Path

from reportgen import catalog
from reportgen.ab.pair import SIDES, PairResult, SideReport, VariantKind, side_memory
from reportgen.ab.settings import HUGE_PAGES_TEXT, AbSettings
from reportgen.analysis.stats import median_or_none
from reportgen.model.codec import from_jsonable
from reportgen.model.run import (
    AbInfo,
    AbRound,
    AbRoundSamples,
    Correctness,
    DeviceKind,
    DevicePeak,
    Environment,
    GitInfo,
    MeasureSettings,
    Run,
    RunSource,
    ScenarioInfo,
    TimeBasis,
    VariantResult,
    VariantStatus,
)
from reportgen.store.layout import NewRunRequest, new_run
from reportgen.store.writer import write_bundle


def store_pair(result: PairResult, commits: dict[str, GitInfo], store: Path) -> dict[str, str]:
    """Write both sides as run bundles marked as one pair; returns side -> run id."""
    created = datetime.now(timezone.utc).replace(microsecond=0)
    pair_id = secrets.token_hex(6)
    runs = {side: side_run(result, side, pair_id, created, commits[side]) for side in SIDES}
    for side, run in runs.items():
        partner = runs["head" if side == "base" else "base"].run_id
        assert run.ab is not None
        stored = dataclasses.replace(
            run, ab=dataclasses.replace(run.ab, partner_run_id=partner),
            notes=(f"side {side} of the interleaved A/B pair {pair_id} with {partner}: {len(run.ab.rounds)} rounds "
                   f"in {result.sessions} sessions",) + setting_notes(result.settings, result.huge_pages))
        catalog.record(store, stored, write_bundle(store, stored, {}))
    return {side: run.run_id for side, run in runs.items()}


def side_label(side: str) -> str:
    """The label of a pair's run on ``side`` (``A/B base``): part of its run id, so stores can be searched by name."""
    return f"A/B {side}"


def setting_notes(settings: AbSettings, huge_pages: bool) -> tuple[str, ...]:
    """What a run bundle of the pair says about how its times were taken, beyond the method."""
    huge = (f"both workers ran with {HUGE_PAGES_TEXT} (reportgen ab's CPU default where the kernel gives huge "
            "pages on request; --no-huge-pages turns it off): torch's large CPU allocations in transparent huge "
            "pages, so they page-fault far less than with 4 KiB pages",) if huge_pages else ()
    return CLOCK_NOTES[settings.clock] + huge


CLOCK_NOTES = {"wall": (), "cpu": ("times are the worker process's CPU time per call (user + system, all its threads), "
                                   "not wall-clock time (reportgen ab --clock cpu)",)}


def side_run(result: PairResult, side: str, pair_id: str, created: datetime, git: GitInfo) -> Run:
    """One side of a measured pair as a Run (made by the bundle's ``new_run``): every round's samples in ``ab``,
    all of them in each variant; ``store_pair`` fills in the partner's run id."""
    report: SideReport = getattr(result, side)
    measured = [v.name for v in result.variants if v.kind is VariantKind.MEASURED]
    rounds = tuple(AbRound(r.index, r.first_side, tuple(AbRoundSamples(name, r.samples_us[side][name])
                                                         for name in measured), r.session) for r in result.rounds)
    env = from_jsonable(Environment, report.environment or {}, f"{side} worker")
    shape = ",".join(str(d) for d in result.shape or ())
    s = result.settings
    run = new_run(NewRunRequest(
        created, DeviceKind(report.device or "unknown"), side_label(side), RunSource.PROFILE, pair_id, git=git,
        environment=env, peak=DevicePeak(None, None, "not measured by reportgen ab"),
        scenario=ScenarioInfo(report.scenario_name or "", report.scenario_description,
                              {"shape": shape, "dtype": result.dtype or "", "seed": str(s.seed), **report.params}),
        variants=tuple(_variant_result(report, name, rounds, measured) for name in report.variants),
        settings=MeasureSettings(warmup_iters=s.warmup, samples=len(result.rounds) * s.samples_per_block,
                                 calls_per_sample=0, profile_wait=0, profile_warmup=0, profile_active=0,
                                 cache_flush_bytes=report.cache_flush_bytes)))
    return dataclasses.replace(run, ab=AbInfo(pair_id, side, "", result.method, s.threshold_pct, rounds,
                                              result.order_seed, result.orders, result.session_s, s.calibrate))


def _variant_result(report: SideReport, name: str, rounds: tuple[AbRound, ...], measured: list[str]) -> VariantResult:
    w = report.variants[name]
    samples = tuple(x for r in rounds for rs in r.samples if rs.variant == name for x in rs.samples_us)
    median = median_or_none(samples)
    first = w.get("first_call_us")
    correctness = from_jsonable(Correctness, w["correctness"], "worker") if w.get("correctness") else None
    return VariantResult(
        name=name, status=VariantStatus(w["status"]), description=report.descriptions.get(name, ""),
        error=w.get("error"), first_call_us=first,
        compile_time_us=max(0.0, first - median) if first is not None and median is not None else None,
        samples_us=samples if name in measured else (), calls_per_sample=int(w.get("calls_per_sample") or 1),
        correctness=correctness, time_basis=TimeBasis(report.time_basis or "cpu"),
        bytes_per_call=int(w.get("bytes_per_call") or 0), flops_per_call=int(w.get("flops_per_call") or 0),
        memory=side_memory(report, name))
