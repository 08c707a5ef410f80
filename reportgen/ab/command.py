"""``reportgen ab --base DIR --head DIR``: the edge around the coordinator.

Validate the arguments (no torch here) -> find the scenario file in each checkout (a name through
that checkout's config, else its ``scenarios/``; a scenario on one side only is reported as new or
removed, exit 0) -> start one worker process per side -> ``coordinate`` -> store both runs as
bundles marked as one A/B pair -> the PR comment (Markdown, or JSON) and the exit code (0 no
change or improvement, 1 regression, 7 still inconclusive after the budget, 3 a side failed to
load or compile).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import secrets
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from reportgen import __version__
from reportgen.ab.coordinator import (
    SIDES,
    PairResult,
    SideReport,
    VariantKind,
    VariantPair,
    Worker,
    WorkerFailed,
    coordinate,
)
from reportgen.ab.settings import HUGE_PAGES_ENV, HUGE_PAGES_TEXT, SHARED_CPU_RUNNER_ARGS, AbSettings
from reportgen.ab.worker import scenario_path
from reportgen.analysis.paired import AbVerdict
from reportgen.analysis.stats import median
from reportgen.config import parse_param_flags
from reportgen.devices.allocator import THP_ENABLED_FILE, read_thp_mode
from reportgen.devices.host import git_info
from reportgen.errors import ExitCode, ReportgenError, ScenarioError, UsageError
from reportgen.model.codec import from_jsonable, to_jsonable
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
from reportgen.render.jinja import MdSafe, render_md
from reportgen.scenario.loader import parse_dtype, parse_shape
from reportgen.store.bundle import new_run, write_bundle

AB_SCHEMA_VERSION = 1
"""Version of the ``--format json`` document."""
MARKER = "<!-- reportgen-ab -->"
TEMPLATE = "ab.md.j2"
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


@dataclass(frozen=True)
class AbRequest:
    """A validated ``reportgen ab`` invocation."""

    base: Path
    head: Path
    scenario: str
    settings: AbSettings
    output: Path | None
    fmt: str
    store: Path
    quiet: bool

    @staticmethod
    def from_cli(args: argparse.Namespace, store: Path, param_defaults: Mapping[str, str] | None = None) -> AbRequest:
        for field, value in (("base", args.base), ("head", args.head)):
            if not Path(value).is_dir():
                raise UsageError(f"{field} {value}: not a folder; give the checkout to measure", field=field)
        variants = tuple(x.strip() for x in args.variants.split(",") if x.strip()) if args.variants else None
        if args.variants is not None and not variants:
            raise UsageError(f"variants {args.variants!r}: name at least one variant", field="variants")
        settings = AbSettings(
            threshold_pct=args.threshold, min_sessions=args.sessions, rounds_per_session=args.rounds,
            max_seconds=args.max_seconds,
            samples_per_block=args.samples, shape=parse_shape(args.shape) if args.shape else None,
            dtype=parse_dtype(args.dtype) if args.dtype else None, seed=args.seed, variants=variants,
            device=args.device, threads=args.threads, clock=args.clock, huge_pages=args.huge_pages,
            params=tuple(sorted(parse_param_flags(args.param).items())),
            param_defaults=tuple(sorted((param_defaults or {}).items())))
        settings.check()
        if settings.huge_pages:
            check_huge_pages(read_thp_mode())
        return AbRequest(Path(args.base).resolve(), Path(args.head).resolve(), args.scenario, settings,
                         args.output, args.format, store, args.quiet)


def run_ab_command(args: argparse.Namespace, store: Path, param_defaults: Mapping[str, str] | None = None) -> int:
    """The whole command; returns the exit code. ``param_defaults``: the working folder's config ``params``."""
    request = AbRequest.from_cli(args, store, param_defaults)
    roots = {"base": request.base, "head": request.head}
    present = {side: _scenario_present(root, request.scenario) for side, root in roots.items()}
    if not any(present.values()):
        raise ScenarioError(f"{scenario_path(request.base, request.scenario)} and "
                            f"{scenario_path(request.head, request.scenario)}: no such scenario file on either side")
    commits = {side: git_info(root) for side, root in roots.items()}
    if not all(present.values()):
        text = render_scenario_only(request.scenario, "new" if present["head"] else "removed", commits, request.fmt)
        _emit(text, request.output)
        return ExitCode.OK
    result = _measure(request, roots)
    stored = store_pair(result, commits, request.store) if result.rounds else None
    text = (ab_json(result, commits, stored) if request.fmt == "json"
            else render_ab_markdown(result, commits, stored))
    _emit(text, request.output)
    if result.failed_sides:
        print("reportgen: error: " + "; ".join(f"the {s.side} side ({roots[s.side]}) failed in {s.error_stage}: {s.error}"
                                               for s in result.failed_sides), file=sys.stderr)
    return int(result.exit_code)


def _scenario_present(root: Path, ref: str) -> bool:
    """Whether the checkout has the scenario (through its config, else ``scenarios/``); a broken config counts as
    present, so that side's worker fails to load and the comment names the error."""
    try:
        return scenario_path(root, ref).is_file()
    except ReportgenError:
        return True


def check_huge_pages(mode: str | None) -> None:
    """Refuse --huge-pages where this kernel gives no transparent huge pages on request (``mode``: its THP mode)."""
    if mode in ("always", "madvise"):
        return
    where = f"{THP_ENABLED_FILE} says {mode}" if mode else f"no {THP_ENABLED_FILE}"
    raise UsageError(f"huge_pages: this machine gives no transparent huge pages on request ({where}); drop it, or "
                     "set that file to madvise", field="huge_pages")


def worker_environment(settings: AbSettings, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The workers' environment: ``environ`` with ``HUGE_PAGES_ENV`` for --huge-pages; None (inherit) otherwise."""
    return {**environ, **HUGE_PAGES_ENV} if settings.huge_pages else None


def _measure(request: AbRequest, roots: dict[str, Path]) -> PairResult:
    env = worker_environment(request.settings, os.environ)
    return coordinate(lambda: _spawn_pair(env), {s: str(r) for s, r in roots.items()}, request.scenario,
                      request.settings, progress=None if request.quiet else _progress)


def _spawn_pair(env: Mapping[str, str] | None = None) -> dict[str, Worker]:
    """One session's workers: a fresh process per side (``env``: their environment; None inherits this one's)."""
    return {side: ProcessWorker(side, env=env) for side in SIDES}


def _progress(message: str) -> None:
    print(f"reportgen ab: {message}", file=sys.stderr, flush=True)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        from reportgen.text.terminal import terminal_safe

        sys.stdout.write(terminal_safe(text, keep_newlines=True))  # names from data never reach the terminal raw
        return
    from reportgen.compare.command import write_output

    write_output(output, text)  # refuses a FIFO, device or folder; writes through a symlink


# ---- bundles ---------------------------------------------------------------------------------------------------


def store_pair(result: PairResult, commits: dict[str, GitInfo], store: Path) -> dict[str, str]:
    """Write both sides as run bundles marked as one pair; returns side -> run id."""
    created = datetime.now(timezone.utc).replace(microsecond=0)
    pair_id = secrets.token_hex(6)
    runs = {side: side_run(result, side, pair_id, created, commits[side]) for side in SIDES}
    for side, run in runs.items():
        partner = runs["head" if side == "base" else "base"].run_id
        assert run.ab is not None
        write_bundle(store, dataclasses.replace(
            run, ab=dataclasses.replace(run.ab, partner_run_id=partner),
            notes=(f"side {side} of the interleaved A/B pair {pair_id} with {partner}: {len(run.ab.rounds)} rounds "
                   f"in {result.sessions} sessions",) + setting_notes(result.settings)), {})
    return {side: run.run_id for side, run in runs.items()}


def setting_notes(settings: AbSettings) -> tuple[str, ...]:
    """What a run bundle of the pair says about how its times were taken, beyond the method."""
    huge = (f"both workers ran with {HUGE_PAGES_TEXT} (reportgen ab "
            "--huge-pages): torch's large CPU allocations in transparent huge pages, so they page-fault far less "
            "than by default",) if settings.huge_pages else ()
    return CLOCK_NOTES[settings.clock] + huge


CLOCK_NOTES = {"wall": (), "cpu": ("times are the worker process's CPU time per call (user + system, all its threads), "
                                   "not wall-clock time (reportgen ab --clock cpu)",)}


def _params_text(base: Mapping[str, str], head: Mapping[str, str]) -> str:
    """The scenario parameters both sides measured with (``eps=1e-05, dim=-1``); each side's where they differ."""
    def show(params: Mapping[str, str]) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))

    if base and head and base != head:
        return f"base {show(base)}; head {show(head)}"
    return show(head or base)


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
    run = new_run(
        created, DeviceKind(report.device or "unknown"), f"A/B {side}", RunSource.PROFILE, pair_id, git=git,
        environment=env, peak=DevicePeak(None, None, "not measured by reportgen ab"),
        scenario=ScenarioInfo(report.scenario_name or "", report.scenario_description,
                              {"shape": shape, "dtype": result.dtype or "", "seed": str(s.seed), **report.params}),
        variants=tuple(_variant_result(report, name, rounds, measured) for name in report.variants),
        settings=MeasureSettings(warmup_iters=s.warmup, samples=len(result.rounds) * s.samples_per_block,
                                 calls_per_sample=0, profile_wait=0, profile_warmup=0, profile_active=0))
    return dataclasses.replace(run, ab=AbInfo(pair_id, side, "", result.method, s.threshold_pct, rounds))


def _variant_result(report: SideReport, name: str, rounds: tuple[AbRound, ...], measured: list[str]) -> VariantResult:
    w = report.variants[name]
    samples = tuple(x for r in rounds for rs in r.samples if rs.variant == name for x in rs.samples_us)
    median = sorted(samples)[len(samples) // 2] if samples else None
    first = w.get("first_call_us")
    correctness = from_jsonable(Correctness, w["correctness"], "worker") if w.get("correctness") else None
    return VariantResult(
        name=name, status=VariantStatus(w["status"]), description=report.descriptions.get(name, ""),
        error=w.get("error"), first_call_us=first,
        compile_time_us=max(0.0, first - median) if first is not None and median is not None else None,
        samples_us=samples if name in measured else (), calls_per_sample=int(w.get("calls_per_sample") or 1),
        correctness=correctness, time_basis=TimeBasis(report.time_basis or "cpu"),
        bytes_per_call=int(w.get("bytes_per_call") or 0), flops_per_call=int(w.get("flops_per_call") or 0))


# ---- the comment -----------------------------------------------------------------------------------------------

HEADLINES = {
    AbVerdict.REGRESSION: ":x: reportgen A/B: regression",
    AbVerdict.IMPROVEMENT: ":white_check_mark: reportgen A/B: faster",
    AbVerdict.NO_CHANGE: ":white_check_mark: reportgen A/B: no change",
    AbVerdict.INCONCLUSIVE: ":grey_question: reportgen A/B: inconclusive after the time budget",
}
KIND_TEXT = {
    VariantKind.NEW: "new in head (not compared)",
    VariantKind.REMOVED: "removed in head",
    VariantKind.BROKEN_IN_HEAD: ":red_circle: broken in head",
    VariantKind.FAILED_IN_BASE: "failed in base (not compared)",
    VariantKind.FAILED_BOTH: "failed on both sides",
}
VERDICT_TEXT = {
    AbVerdict.REGRESSION: ":red_circle: regression",
    AbVerdict.IMPROVEMENT: ":green_circle: faster",
    AbVerdict.NO_CHANGE: "no change",
    AbVerdict.INCONCLUSIVE: ":grey_question: inconclusive",
}


def _pct(value: float) -> str:
    """A signed percentage with a real minus sign: '+1.6 %', '−0.4 %'."""
    return f"{'+' if value >= 0 else '−'}{abs(value):.1f} %"


def _us(value: float) -> str:
    return f"{value:,.4g} µs" if abs(value) < 1e4 else f"{value:,.0f} µs"


def _row(v: VariantPair) -> dict[str, Any]:
    """One table row: numbers formatted here (MdSafe: digits and units only), names escaped by the template."""
    s = v.stats
    if s is None:
        error = v.head_error if v.kind in (VariantKind.BROKEN_IN_HEAD, VariantKind.NEW) else v.base_error
        return {"name": v.name, "base": None, "head": None, "change": None, "noise": None,
                "result": MdSafe(KIND_TEXT.get(v.kind, v.kind.value)), "error": error}
    base_us, head_us = median(s.base_round_medians_us), median(s.head_round_medians_us)
    return {"name": v.name, "base": MdSafe(_us(base_us)), "head": MdSafe(_us(head_us)),
            "change": MdSafe(f"{_pct(s.change_pct)} ({_pct(s.ci_low_pct)} to {_pct(s.ci_high_pct)}, "
                             f"{s.coverage * 100:.1f} %)"),
            "noise": MdSafe(f"{s.base_noise_pct:.1f} % / {s.head_noise_pct:.1f} %"),
            "result": MdSafe(VERDICT_TEXT[s.verdict]), "error": None}


def _commit(git: GitInfo) -> str:
    if git.sha is None:
        return "not a git checkout"
    return git.sha[:12] + (" (with uncommitted changes)" if git.dirty else "")


def _machine(side: SideReport, threads_set: bool) -> str:
    env = side.environment or {}
    parts = [str(env.get("device_name") or env.get("cpu_model") or "unknown device"), f"host {env.get('hostname', '?')}"]
    if env.get("torch_version"):
        parts.append(f"torch {env['torch_version']}")
    if env.get("torch_threads"):
        n = env["torch_threads"]
        parts.append(f"{n} {'thread' if n == 1 else 'threads'}" + (" (--threads)" if threads_set else ""))
    allocator = env.get("allocator_env") or {}
    if allocator:
        parts.append("allocator " + " ".join(f"{k}={v}" for k, v in allocator.items()))
    return ", ".join(parts)


def comment_context(result: PairResult, commits: dict[str, GitInfo], stored: dict[str, str] | None) -> dict[str, Any]:
    """Everything the template prints; strings from the checkouts stay raw (the environment escapes them)."""
    measured = [v.stats for v in result.variants if v.stats is not None]
    failed = [{"side": s.side, "stage": "import" if s.error_stage == "load" else "compile/warm-up"
               if s.error_stage == "warm" else s.error_stage, "error": s.error} for s in result.failed_sides]
    verdict = result.verdict
    named = [v.name for v in result.variants if v.verdict is verdict] if verdict is not AbVerdict.NO_CHANGE else []
    return {
        "marker": MdSafe(MARKER),
        "headline": MdSafe(":warning: reportgen A/B: a side failed" if failed else HEADLINES[verdict]),
        "named": named,
        "failed": failed,
        "scenario": result.head.scenario_name or result.base.scenario_name or "",
        "shape": ",".join(str(d) for d in result.shape or ()),
        "dtype": result.dtype or "",
        "params": _params_text(result.base.params, result.head.params),
        "device": result.base.device or result.head.device or "",
        "machine": _machine(result.base if result.base.environment else result.head, result.settings.threads is not None),
        "base_commit": _commit(commits["base"]),
        "head_commit": _commit(commits["head"]),
        "rounds": len(result.rounds),
        "sessions": result.sessions,
        "rounds_per_session": result.settings.rounds_per_session,
        "samples": result.settings.samples_per_block,
        "rounds_s": MdSafe(f"{result.rounds_s:.1f} s"),
        "warm_s": MdSafe(f"{result.warm_s:.1f} s"),
        "stop": result.stop_reason,
        "still_inconclusive": verdict is AbVerdict.INCONCLUSIVE and not failed,
        "cpu_hint": MdSafe(" ".join(SHARED_CPU_RUNNER_ARGS)) if (result.base.device or result.head.device) == "cpu"
        and not (result.settings.threads == 1 and result.settings.huge_pages) else "",  # not already run with them
        "budget": MdSafe(f"{result.settings.max_seconds:g}"),
        "threshold": MdSafe(f"{result.settings.threshold_pct:g} %"),
        "max_noise": MdSafe(f"{max(max(s.base_noise_pct, s.head_noise_pct) for s in measured):.1f} %")
        if measured else None,
        "process_noise": MdSafe(f"{max(s.process_noise_pct for s in measured):.1f} %") if measured else None,
        "rows": [_row(v) for v in result.variants],
        "notes": list(result.notes),
        "method": result.method,
        "stored": stored,
        "version": __version__,
    }


def render_ab_markdown(result: PairResult, commits: dict[str, GitInfo], stored: dict[str, str] | None) -> str:
    """The PR comment for a measured (or failed) pair."""
    return render_md(TEMPLATE, only=None, **comment_context(result, commits, stored))


def render_scenario_only(scenario: str, kind: str, commits: dict[str, GitInfo], fmt: str) -> str:
    """The comment when the scenario exists on one side only: new or removed, never a failure."""
    if fmt == "json":
        return json.dumps({"schema_version": AB_SCHEMA_VERSION, "scenario": scenario, "scenario_status": kind,
                           "commits": {s: to_jsonable(g) for s, g in commits.items()}}, indent=1) + "\n"
    return render_md(TEMPLATE, only={"scenario": scenario, "kind": kind}, marker=MdSafe(MARKER),
                     base_commit=_commit(commits["base"]), head_commit=_commit(commits["head"]), version=__version__)


def ab_json(result: PairResult, commits: dict[str, GitInfo], stored: dict[str, str] | None) -> str:
    """The pair as a versioned JSON document (every round's samples included)."""
    doc = {
        "schema_version": AB_SCHEMA_VERSION,
        "verdict": result.verdict.value,
        "exit_code": int(result.exit_code),
        "method": result.method,
        "threshold_pct": result.settings.threshold_pct,
        "stop_reason": result.stop_reason,
        "sessions": result.sessions,
        "rounds_s": result.rounds_s,
        "warm_s": result.warm_s,
        "shape": list(result.shape or ()),
        "dtype": result.dtype,
        "params": {"base": result.base.params, "head": result.head.params},
        "commits": {s: to_jsonable(g) for s, g in commits.items()},
        "failed_sides": [{"side": s.side, "stage": s.error_stage, "error": s.error} for s in result.failed_sides],
        "variants": [{"name": v.name, "kind": v.kind.value, "verdict": v.verdict.value if v.verdict else None,
                      "stats": to_jsonable(v.stats) if v.stats else None, "base_error": v.base_error,
                      "head_error": v.head_error} for v in result.variants],
        "rounds": [to_jsonable(r) for r in result.rounds],
        "notes": list(result.notes),
        "stored_runs": stored,
    }
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
