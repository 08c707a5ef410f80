"""History across runs: compact digests of runs, so an index of many runs needs no full run.json, and their groups.

A digest keeps per variant the median, its CI and the speedup over the run's baseline; runs of the same device,
scenario and parameters form one history group, one series per variant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
    runs_total: int = 0
    """Runs of the group in all; more than ``run_ids`` when only the latest were kept (``window``)."""


def group_key(d: RunDigest) -> GroupKey:
    """What must match for two runs to share a history line (the seed may differ)."""
    params = tuple(sorted((k, v) for k, v in d.parameters.items() if k != "seed"))
    return (d.device.value, f"machine {d.machine}" if d.machine else d.device_name, d.scenario, params)


def _group_title(key: GroupKey) -> str:
    device, device_name, scenario, params = key
    where = f"{device} ({device_name})" if device_name else device
    shown = ", ".join(f"{k}={v}" for k, v in params)
    return f"{scenario} on {where}" + (f" — {shown}" if shown else "")


@dataclass(frozen=True)
class GroupPoint:
    """One variant of one run as a member of one history group: the flat row the history is built from.

    The catalog stores these as its ``points`` table, so one group's history is read without the rest.
    ``variant`` is None for a run with no variants (it still counts as a run of the group).
    """

    key: str
    device: str
    where: str
    scenario: str
    parameters: tuple[tuple[str, str], ...]
    run_id: str
    created_utc: str
    git_sha: str | None
    variant_index: int
    variant: str | None
    median_us: float | None = None
    ci_low_us: float | None = None
    ci_high_us: float | None = None
    speedup: float | None = None


def key_text(key: GroupKey) -> str:
    """A group's key as one string: ``device|where|scenario|k=v...``."""
    return "|".join([key[0], key[1], key[2], *(f"{k}={v}" for k, v in key[3])])


def group_points(d: RunDigest) -> list[GroupPoint]:
    """The run's points in every group it belongs to: its own, and one per swept shape."""
    out = []
    for member in (d, *_per_shape(d)):
        key = group_key(member)
        head = (key_text(key), key[0], key[1], key[2], key[3], d.run_id, d.created_utc, d.git_sha)
        out += [GroupPoint(*head, i, v.name, v.median_us, v.ci_low_us, v.ci_high_us, v.speedup)
                for i, v in enumerate(member.variants)] or [GroupPoint(*head, -1, None)]
    return out


def history(digests: Sequence[RunDigest]) -> tuple[HistoryGroup, ...]:
    """Per group (sorted by title), per variant, the median time and speedup of every run that timed it."""
    return groups_from_points([p for d in digests for p in group_points(d)])


def groups_from_points(points: Sequence[GroupPoint], window: int | None = None,
                       totals: Mapping[str, int] | None = None) -> tuple[HistoryGroup, ...]:
    """The history groups of these points (any order; a group's runs oldest first, ties by run id); with
    ``window``, each group keeps only its latest ``window`` runs (``runs_total`` says how many it has: the runs
    among ``points``, or ``totals[key]`` when the points were already cut to a window)."""
    groups: dict[str, list[GroupPoint]] = {}
    for p in sorted(points, key=lambda p: (p.created_utc, p.run_id, p.variant_index)):
        groups.setdefault(p.key, []).append(p)
    out = [_history_group(members, window, (totals or {}).get(key)) for key, members in groups.items()]
    return tuple(sorted(out, key=lambda g: (g.title, g.key)))


def run_counts(points: Iterable[GroupPoint]) -> dict[str, int]:
    """Each group's number of distinct runs among ``points``."""
    runs: dict[str, set[str]] = {}
    for p in points:
        runs.setdefault(p.key, set()).add(p.run_id)
    return {key: len(ids) for key, ids in runs.items()}


def _per_shape(d: RunDigest) -> list[RunDigest]:
    """A sweep run's shapes as digests of their own shape, so each joins that shape's history."""
    return [RunDigest(d.run_id, d.created_utc, d.label, d.source, d.device, d.device_name, d.scenario,
                      {**d.parameters, "shape": s.shape, **s.params}, d.git_sha, d.baseline, s.variants, d.machine)
            for s in d.shapes]


def _history_group(members: list[GroupPoint], window: int | None = None, total: int | None = None) -> HistoryGroup:
    """One group from its points, oldest run first (its latest ``window`` runs only, when given)."""
    ids = list(dict.fromkeys(p.run_id for p in members))
    total = len(ids) if total is None else total
    if window is not None and total > window:
        kept = set(ids[-window:])
        members = [p for p in members if p.run_id in kept]
    runs: dict[str, GroupPoint] = {}
    points: dict[str, list[HistoryPoint]] = {}
    for p in members:
        runs.setdefault(p.run_id, p)
        if p.variant is None:
            continue
        series = points.setdefault(p.variant, [])
        if p.median_us is None or p.ci_low_us is None or p.ci_high_us is None:
            continue
        series.append(HistoryPoint(p.run_id, p.created_utc, p.median_us, p.ci_low_us, p.ci_high_us, p.speedup))
    first = members[0]
    key: GroupKey = (first.device, first.where, first.scenario, first.parameters)
    return HistoryGroup(
        key=first.key,
        title=_group_title(key),
        device=first.device,
        scenario=first.scenario,
        parameters=first.parameters,
        run_ids=tuple(runs),
        created_utc=tuple(p.created_utc for p in runs.values()),
        series=tuple(HistorySeries(n, tuple(ps)) for n, ps in points.items() if ps),
        git_shas=tuple(p.git_sha for p in runs.values()),
        runs_total=total,
    )
