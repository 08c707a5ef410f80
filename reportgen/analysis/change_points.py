"""Steps on main: change points in each history series (machine, scenario, parameters, variant).

Method. Each run contributes one value per variant, its median per-call time (the history's
``HistoryPoint.median_us``); the series is taken in logs, so a step is a ratio. The run-to-run noise
``sigma`` is estimated robustly from the first differences (``1.4826 * median|d| / sqrt(2)``): a few
steps barely move it, unlike a plain standard deviation. The logs, divided by ``sigma``, are split
into segments of constant mean by PELT (Killick, Fearnhead & Eckley 2012: the exact minimum of the
sum of squared deviations plus ``PENALTY_PER_LOG_N * ln(n)`` per change point, with a minimum
segment length), the same search and L2 cost ``ruptures.Pelt(model="l2")`` runs (tests compare the
two). Every candidate step must then be significant, else it is merged away (weakest first):

- its size ``ratio = exp(median_after - median_before)`` (after / before, medians of the two segments'
  logs) is at least ``MIN_RELATIVE`` away from 1;
- ``|log ratio| / se >= MIN_Z``, ``se = 1.2533 * sigma * sqrt(1/n_before + 1/n_after)`` (a median's
  standard error);
- both segments hold at least ``MIN_SEGMENT`` runs.

Medians, not means, judge the step: one slow run cannot make a step, and a segment that PELT closes on
a step still being made (its last runs only) is not one until most of its runs show it. The step's
interval is ``ratio * exp(+-1.96 * se)``.

Why our own PELT rather than the library: ruptures needs scipy (about 40 MB) for nothing this search
uses, and every ``reportgen build`` marks steps; for a 1-D mean shift the exact search is 30 lines over
cumulative sums. E-divisive means (MongoDB's signal-processing-algorithms) is a permutation test:
slower, random, and built for shape changes that per-run medians do not have. The thresholds were
chosen on histories made of this machine's measured A/A noise: ``benchmarks/change_points.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reportgen.analysis.history import HistoryGroup, HistoryPoint

MIN_RELATIVE = 0.02
"""A step smaller than 2 % (after / before) is not reported, however significant."""
MIN_SEGMENT = 4
"""Runs on each side of a step: a new step is reported once this many runs show it."""
MIN_Z = 4.0
"""Size of the step in standard errors of the difference of the two segments' medians."""
PENALTY_PER_LOG_N = 3.0
"""PELT's cost of one change point, times ln(n), in units of sigma squared (BIC-like, a little stricter)."""
MIN_SIGMA = 1e-3
"""Noise floor (0.1 %): a perfectly flat synthetic series does not make every wiggle a step."""
Z_95 = 1.959963984540054
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
"""Standard error of a median over that of a mean, for normal noise (large samples)."""
NEW_STEP_RUNS = MIN_SEGMENT
NEW_STEP_LOOKBACK = 3
"""A step counts as new when the series without its newest 1, 2 or 3 runs had none within NEW_STEP_RUNS of it:
while its first runs arrive a step can flicker in and out, and move by up to a segment's length (PELT closes the
last segment early, on a few runs from before the step); it is reported once..."""
NEW_STEP_MAX_RUNS_AFTER = 2 * MIN_SEGMENT
"""...and at most this many runs show it: an old step whose significance flickers with each new run is not news."""


@dataclass(frozen=True)
class Step:
    """A change of level between ``series[start:index]`` and ``series[index:end]``."""

    index: int
    """Position of the first run after the step."""
    start: int
    end: int
    ratio: float
    """Median after / median before: 1.10 is 10 % slower."""
    ci_low: float
    ci_high: float
    z: float

    @property
    def runs_before(self) -> int:
        return self.index - self.start

    @property
    def runs_after(self) -> int:
        return self.end - self.index


def noise_sigma(logs: Sequence[float]) -> float:
    """Robust run-to-run standard deviation of the log values, from their first differences (floored)."""
    diffs = np.abs(np.diff(np.asarray(logs, dtype=float)))
    if diffs.size == 0:
        return MIN_SIGMA
    return max(float(1.4826 * np.median(diffs) / math.sqrt(2.0)), MIN_SIGMA)


def pelt(values: Sequence[float], penalty: float, min_size: int) -> list[int]:
    """Change points (index of each segment's first value) minimising squared error + ``penalty`` each.

    PELT with pruning: candidate starts whose cost already exceeds the best cannot win later (the
    L2 cost is additive), so the search is about linear in the length.
    """
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2 * min_size:
        return []
    s1 = np.concatenate(([0.0], np.cumsum(x)))
    s2 = np.concatenate(([0.0], np.cumsum(x * x)))
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    last = np.zeros(n + 1, dtype=int)
    s = np.zeros(0, dtype=int)
    for t in range(min_size, n + 1):
        start = t - min_size
        if start == 0 or (start >= min_size and math.isfinite(best[start])):
            s = np.append(s, start)
        if not s.size:
            continue
        cost = s2[t] - s2[s] - (s1[t] - s1[s]) ** 2 / (t - s)
        total = best[s] + cost
        k = int(np.argmin(total))
        best[t], last[t] = total[k] + penalty, s[k]
        s = s[total <= best[t]]
    out = []
    t = n
    while t > 0:
        t = int(last[t])
        if t > 0:
            out.append(t)
    return sorted(out)


def detect_steps(values: Sequence[float], min_relative: float = MIN_RELATIVE, min_segment: int = MIN_SEGMENT,
                 min_z: float = MIN_Z) -> tuple[Step, ...]:
    """The significant steps in a series of positive values (per-run medians), oldest first."""
    logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
    if len(logs) != len(values) or len(logs) < 2 * min_segment:
        return ()
    sigma = noise_sigma(logs)
    scaled = [x / sigma for x in logs]
    bounds = pelt(scaled, PENALTY_PER_LOG_N * math.log(len(logs)), min_segment)
    while True:
        steps = _steps_at(logs, bounds, sigma)
        weak = [s for s in steps if not _significant(s, min_relative, min_segment, min_z)]
        if not weak:
            return tuple(steps)
        bounds.remove(min(weak, key=lambda s: s.z).index)


def _steps_at(logs: Sequence[float], bounds: Sequence[int], sigma: float) -> list[Step]:
    """Each boundary as a step: the ratio of the medians of the segments either side, its interval and z."""
    edges = [0, *bounds, len(logs)]
    medians = [float(np.median(logs[a:b])) for a, b in zip(edges, edges[1:], strict=False)]
    out = []
    for i, index in enumerate(bounds):
        start, end = edges[i], edges[i + 2]
        diff = medians[i + 1] - medians[i]
        se = MEDIAN_EFFICIENCY * sigma * math.sqrt(1.0 / (index - start) + 1.0 / (end - index))
        out.append(Step(index, start, end, math.exp(diff), math.exp(diff - Z_95 * se), math.exp(diff + Z_95 * se),
                        abs(diff) / se))
    return out


def _significant(step: Step, min_relative: float, min_segment: int, min_z: float) -> bool:
    return (abs(step.ratio - 1.0) >= min_relative and step.z >= min_z
            and min(step.runs_before, step.runs_after) >= min_segment)


@dataclass(frozen=True)
class SeriesStep:
    """A step of one history series, with the runs either side of it (the commit range)."""

    step: Step
    before: HistoryPoint
    """The last run before the step."""
    after: HistoryPoint
    """The first run after it."""
    before_sha: str | None
    after_sha: str | None
    new: bool
    """The newest run is the first to show it (see NEW_STEP_RUNS): only the last step of a series can be new."""

    @property
    def change_pct(self) -> float:
        return (self.step.ratio - 1.0) * 100.0

    @property
    def commit_range(self) -> str:
        """``abc1234..def5678`` (git commits of the runs either side), or the run ids where a commit is unknown."""
        return f"{(self.before_sha or self.before.run_id)[:12]}..{(self.after_sha or self.after.run_id)[:12]}"


@dataclass(frozen=True)
class SeriesSteps:
    """One history series (a group's variant) and its steps."""

    group_key: str
    title: str
    variant: str
    runs: int
    noise_pct: float | None
    steps: tuple[SeriesStep, ...]


def series_steps(group: HistoryGroup) -> tuple[SeriesSteps, ...]:
    """The steps of each variant's series in ``group`` (its runs' git commits from ``group.git_shas``)."""
    shas = dict(zip(group.run_ids, group.git_shas, strict=False))
    out = []
    for series in group.series:
        points = series.points
        values = [p.median_us for p in points]
        found = detect_steps(values)
        new = _newest_is_new(values, found)
        marked = tuple(SeriesStep(s, points[s.index - 1], points[s.index], shas.get(points[s.index - 1].run_id),
                                  shas.get(points[s.index].run_id), new and k == len(found) - 1)
                       for k, s in enumerate(found))
        logs = [math.log(v) for v in values if v > 0]
        noise = noise_sigma(logs) * 100.0 if len(logs) > 2 else None
        out.append(SeriesSteps(group.key, group.title, series.variant, len(points), noise, marked))
    return tuple(out)


def _newest_is_new(values: Sequence[float], found: Sequence[Step]) -> bool:
    """Whether the last step of ``found`` is new: it ends at the newest run, at most NEW_STEP_MAX_RUNS_AFTER runs
    show it, and none of the series without its last 1..NEW_STEP_LOOKBACK runs had a step within NEW_STEP_RUNS."""
    if not found or found[-1].end != len(values) or found[-1].runs_after > NEW_STEP_MAX_RUNS_AFTER:
        return False
    index = found[-1].index
    return not any(abs(e.index - index) <= NEW_STEP_RUNS
                   for back in range(1, NEW_STEP_LOOKBACK + 1) for e in detect_steps(values[:-back]))
