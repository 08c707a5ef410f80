"""History across runs: compact digests of runs, so an index of many runs needs no full run.json, and their groups.

A digest keeps per variant the median, its CI and the speedup over the run's baseline; runs of the same device,
scenario and parameters form one history group, one series per variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reportgen.analysis import stats
from reportgen.analysis.run_view import RunView, baseline_name
from reportgen.model.run import DeviceKind, Run, RunSource, VariantStatus


@dataclass(frozen=True)
class VariantDigest:
    """One variant of a run as the index and history need it."""

    name: str
    status: VariantStatus
    median_us: float | None = None
    ci_low_us: float | None = None
    ci_high_us: float | None = None
    speedup: float | None = None
    """median(baseline) / median(this variant); None for the baseline itself and untimed variants."""


@dataclass(frozen=True)
class ShapeDigest:
    """One shape of a run's sweep as the history needs it: per variant the median, its CI and the speedup."""

    shape: str
    variants: tuple[VariantDigest, ...]
    params: dict[str, str] = field(default_factory=dict)
    """Scenario parameters the sweep point set (``--sweep-param``); they key its history too."""


@dataclass(frozen=True)
class RunDigest:
    """What the index and the history charts show of a run (kept in the site manifest)."""

    run_id: str
    created_utc: str
    label: str
    source: RunSource
    device: DeviceKind
    device_name: str
    scenario: str
    parameters: dict[str, str]
    git_sha: str | None
    baseline: str | None
    variants: tuple[VariantDigest, ...]
    machine: str | None = None
    shapes: tuple[ShapeDigest, ...] = ()
    """The run's sweep, one entry per shape measured (its own shape excluded): each joins that shape's history."""

    @property
    def ok(self) -> bool:
        """True when every variant ran and matched the reference."""
        return all(v.status is VariantStatus.OK for v in self.variants)


def digest(run: Run, view: RunView | None = None) -> RunDigest:
    """The run's digest: per variant the median, its bootstrap CI and the speedup over the baseline.

    Pass the run's ``view`` when there is one: its summaries are reused, not bootstrapped again.
    """
    if view is not None:
        summaries = {v.name: v.timing for v in view.variants}
    else:
        summaries = {v.name: stats.summarize(v.samples_us) if v.status is not VariantStatus.FAILED else None
                     for v in run.variants}
    base = baseline_name(run)
    variants = _variant_digests([(v.name, v.status) for v in run.variants], summaries, base)
    return RunDigest(run.run_id, run.created_utc, run.label, run.source, run.device,
                     run.environment.device_name or "", run.scenario.name, dict(run.scenario.parameters),
                     run.git.sha, base, variants, run.environment.machine, _shape_digests(run, base))


def _variant_digests(variants: Sequence[tuple[str, VariantStatus]], summaries: dict[str, stats.SampleSummary | None],
                     base: str | None) -> tuple[VariantDigest, ...]:
    """Each variant's median, CI and speedup over ``base`` (None for the base itself and untimed variants)."""
    base_summary = summaries.get(base) if base else None
    out = []
    for name, status in variants:
        s = summaries[name]
        gain = (base_summary.median_us / s.median_us
                if s is not None and base_summary is not None and name != base and s.median_us > 0 else None)
        out.append(VariantDigest(name, status, s.median_us if s else None, s.ci_low_us if s else None,
                                 s.ci_high_us if s else None, gain))
    return tuple(out)


def _shape_digests(run: Run, base: str | None) -> tuple[ShapeDigest, ...]:
    """Each swept shape but the run's own: per variant the median and CI, and the speedup over ``base`` there."""
    out = []
    for point in run.sweep:
        shape = ",".join(str(d) for d in point.shape)
        params = {**run.scenario.parameters, "shape": shape, **point.params}
        if point.error is not None or params == run.scenario.parameters:
            continue
        summaries = {s.variant: stats.summarize(s.samples_us) if s.status is not VariantStatus.FAILED else None
                     for s in point.samples}
        variants = _variant_digests([(s.variant, s.status) for s in point.samples], summaries, base)
        out.append(ShapeDigest(shape, variants, dict(point.params)))
    return tuple(out)


@dataclass(frozen=True)
class HistoryPoint:
    """One run's median per-call time of one variant, and its speedup over the baseline."""

    run_id: str
    created_utc: str
    median_us: float
    ci_low_us: float
    ci_high_us: float
    speedup: float | None


@dataclass(frozen=True)
class HistorySeries:
    """One variant's points across the runs of one group, oldest first."""

    variant: str
    points: tuple[HistoryPoint, ...]


GroupKey = tuple[str, str, str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class HistoryGroup:
    """Runs that are comparable: same device, device name, scenario and scenario parameters."""

    key: str
    title: str
    device: str
    scenario: str
    parameters: tuple[tuple[str, str], ...]
    run_ids: tuple[str, ...]
    created_utc: tuple[str, ...]
    series: tuple[HistorySeries, ...]
    git_shas: tuple[str | None, ...] = ()
    """Each run's git commit (from its environment), parallel to ``run_ids``: a step's commit range."""


def group_key(d: RunDigest) -> GroupKey:
    """What must match for two runs to share a history line (the seed may differ)."""
    params = tuple(sorted((k, v) for k, v in d.parameters.items() if k != "seed"))
    return (d.device.value, f"machine {d.machine}" if d.machine else d.device_name, d.scenario, params)


def _group_title(key: GroupKey) -> str:
    device, device_name, scenario, params = key
    where = f"{device} ({device_name})" if device_name else device
    shown = ", ".join(f"{k}={v}" for k, v in params)
    return f"{scenario} on {where}" + (f" — {shown}" if shown else "")


def history(digests: Sequence[RunDigest]) -> tuple[HistoryGroup, ...]:
    """Per group (sorted by title), per variant, the median time and speedup of every run that timed it."""
    groups: dict[GroupKey, list[RunDigest]] = {}
    for d in sorted(digests, key=lambda r: (r.created_utc, r.run_id)):
        for member in (d, *_per_shape(d)):
            groups.setdefault(group_key(member), []).append(member)
    out = [_history_group(key, members) for key, members in groups.items()]
    return tuple(sorted(out, key=lambda g: (g.title, g.key)))


def _per_shape(d: RunDigest) -> list[RunDigest]:
    """A sweep run's shapes as digests of their own shape, so each joins that shape's history."""
    return [RunDigest(d.run_id, d.created_utc, d.label, d.source, d.device, d.device_name, d.scenario,
                      {**d.parameters, "shape": s.shape, **s.params}, d.git_sha, d.baseline, s.variants, d.machine)
            for s in d.shapes]


def _history_group(key: GroupKey, runs: list[RunDigest]) -> HistoryGroup:
    names: list[str] = []
    for d in runs:
        names.extend(v.name for v in d.variants if v.name not in names)
    points: dict[str, list[HistoryPoint]] = {n: [] for n in names}
    for d in runs:
        for v in d.variants:
            if v.median_us is None or v.ci_low_us is None or v.ci_high_us is None:
                continue
            points[v.name].append(HistoryPoint(d.run_id, d.created_utc, v.median_us, v.ci_low_us, v.ci_high_us,
                                               v.speedup))
    return HistoryGroup(
        key="|".join([key[0], key[1], key[2], *(f"{k}={v}" for k, v in key[3])]),
        title=_group_title(key),
        device=key[0],
        scenario=key[2],
        parameters=key[3],
        run_ids=tuple(d.run_id for d in runs),
        created_utc=tuple(d.created_utc for d in runs),
        series=tuple(HistorySeries(n, tuple(points[n])) for n in names if points[n]),
        git_shas=tuple(d.git_sha for d in runs),
    )
