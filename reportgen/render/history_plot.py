"""The index's history charts (SVG): each variant's median time per call and speedup across a group's runs.

Laid out here in pixels and drawn by ``templates/charts/history.svg``, like the run page's bar chart: a build
that adds one run redraws its group's chart without importing matplotlib (which, with drawing, cost more than
the rest of the index). Each point with error bars carries a tooltip (run, time, commit); the text is the
viewer's font, so the page stays sharp at any zoom.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reportgen.analysis.change_points import SeriesSteps
from reportgen.analysis.history import HistoryGroup, HistoryPoint
from reportgen.render.jinja import render_html
from reportgen.render.style import LEGEND_FONT_PT, XTick, clip_label, colour_for, nice_ticks, px, svg_text, text_width_px

LOG_SPAN = 20.0
"""History charts switch to a log time axis when the medians span more than this factor."""
WIDTH_PX = 900
BAND_FROM_POINTS = 40
"""A series with more points than this draws its confidence interval as a shaded band, not error bars."""
LEGEND_FONT_PX = LEGEND_FONT_PT * 100 / 72
TICK_FONT_PX = 10.0
X_TICKS = 12
MINOR_LABEL_DECADES = 2.0
"""A log time axis spanning at most this many decades also labels its 2× and 5× ticks."""
_XOf = Callable[[float], float]
"""Run position (0 = oldest) -> x in pixels."""


@dataclass(frozen=True)
class AxisTick:
    """A y-axis tick: its height in pixels, its label (empty: unlabelled minor tick)."""

    y_px: float
    label: str


@dataclass(frozen=True)
class Marker:
    """A point drawn with error bars and a tooltip."""

    x_px: float
    y_px: float
    err_low_px: float
    err_high_px: float
    tooltip: str


@dataclass(frozen=True)
class SeriesDrawing:
    """One variant in one panel: its line, its band or markers, its colour."""

    label: str
    colour: str
    line: str
    """SVG polyline points ``x,y x,y ...``."""
    band: str
    """SVG polygon points of the interval band, or empty."""
    markers: tuple[Marker, ...]


@dataclass(frozen=True)
class StepMark:
    x_px: float
    colour: str
    label: str
    label_x_px: float
    label_y_px: float
    anchor: str
    label_width_px: float


@dataclass(frozen=True)
class Panel:
    """One plot box: the time panel or the speedup panel."""

    top_px: float
    bottom_px: float
    title: str
    title_size_px: float
    y_label: str
    ticks: tuple[AxisTick, ...]
    series: tuple[SeriesDrawing, ...]
    reference_y_px: float | None = None
    """The dashed line at a speedup of 1.0 (the speedup panel)."""


@dataclass(frozen=True)
class HistoryChartLayout:
    """Everything ``templates/charts/history.svg`` draws."""

    title: str
    width_px: int
    height_px: int
    left_px: float
    right_px: float
    panels: tuple[Panel, ...]
    x_ticks: tuple[XTick, ...]
    x_label: str
    steps: tuple[StepMark, ...]
    legend: tuple[tuple[str, str], ...]
    """(colour, label) per variant."""
    legend_font_px: float = LEGEND_FONT_PX
    tick_font_px: float = TICK_FONT_PX


class _Scale:
    """Data value -> pixel height in one panel, linear from zero or logarithmic."""

    def __init__(self, low: float, high: float, top_px: float, bottom_px: float, log: bool) -> None:
        self.log = log
        self.low, self.high = (math.log10(low), math.log10(high)) if log else (low, high)
        self.top_px, self.bottom_px = top_px, bottom_px

    def __call__(self, value: float) -> float:
        v = math.log10(max(value, 10.0 ** self.low)) if self.log else value
        frac = (v - self.low) / ((self.high - self.low) or 1.0)
        return px(self.bottom_px - min(max(frac, -0.02), 1.02) * (self.bottom_px - self.top_px))


def history_layout(group: HistoryGroup, steps: Sequence[SeriesSteps] = ()) -> HistoryChartLayout:
    """Pixels of the history chart of ``group``: a time panel and, with two or more variants, a speedup panel."""
    with_gain = len(group.series) > 1
    height = 560 if with_gain else 380
    labels = [svg_text(clip_label(s.variant)) for s in group.series]
    legend_px = max((text_width_px(t, LEGEND_FONT_PX) for t in labels), default=0.0) + 30
    left, right = 90.0, WIDTH_PX - 25.0 - legend_px
    n_runs = len(group.run_ids)
    position = {run_id: i for i, run_id in enumerate(group.run_ids)}

    def x_of(i: float) -> float:
        return px(left + (i + 0.5) / max(n_runs, 1) * (right - left))

    bottom = height - 100.0
    time_bottom = 35 + (bottom - 35 - 30) * 0.6 if with_gain else bottom
    medians = [p.median_us for s in group.series for p in s.points]
    time_panel = _time_panel(group, 35.0, time_bottom, x_of, position, medians, labels)
    panels = [time_panel]
    if with_gain:
        panels.append(_gain_panel(group, time_bottom + 30, bottom, x_of, position))
    every = max(1, n_runs // X_TICKS)
    ticks = list(range(0, n_runs, every))
    x_ticks = tuple(XTick(x_of(t), text) for t, text in zip(ticks, _tick_times([group.created_utc[t] for t in ticks]),
                                                          strict=True))
    return HistoryChartLayout(
        title=svg_text(group.title), width_px=WIDTH_PX, height_px=height, left_px=left, right_px=round(right, 2),
        panels=tuple(panels), x_ticks=x_ticks, x_label="run (oldest left)",
        steps=_step_marks(group, steps, position, x_of, time_panel), legend=tuple(
            (colour_for(i), label) for i, label in enumerate(labels)))


def _time_panel(group: HistoryGroup, top: float, bottom: float, x_of: _XOf, position: dict[str, int],
                medians: list[float], labels: list[str]) -> Panel:
    positive = [m for m in medians if m > 0]
    log = bool(positive) and max(positive) / min(positive) > LOG_SPAN
    if log:
        low, high = 10.0 ** math.floor(math.log10(min(positive))), 10.0 ** math.ceil(math.log10(max(positive)))
        scale = _Scale(low, high, top, bottom, True)
        ticks = _log_ticks(low, high, scale)
        y_label = "median µs per call (log scale)"
    else:
        highs = [p.ci_high_us for s in group.series for p in s.points]
        y_max = max([*medians, *highs], default=0.0) * 1.05 or 1.0
        values, decimals = nice_ticks(y_max)
        scale = _Scale(0.0, y_max, top, bottom, False)
        ticks = tuple(AxisTick(scale(v), f"{v:,.{decimals}f}") for v in values)
        y_label = "median µs per call"
    series = tuple(_time_series(s.points, colour_for(i), labels[i], x_of, position, scale, group)
                   for i, s in enumerate(group.series))
    return Panel(top, round(bottom, 2), svg_text(group.title), 13.0, y_label, ticks, series)


def _time_series(points: Sequence[HistoryPoint], colour: str, label: str, x_of: _XOf, position: dict[str, int],
                 scale: _Scale, group: HistoryGroup) -> SeriesDrawing:
    xs = [x_of(position[p.run_id]) for p in points]
    line = " ".join(f"{x},{scale(p.median_us)}" for x, p in zip(xs, points, strict=True))
    if len(points) > BAND_FROM_POINTS:
        upper = [f"{x},{scale(p.ci_high_us)}" for x, p in zip(xs, points, strict=True)]
        lower = [f"{x},{scale(p.ci_low_us)}" for x, p in reversed(list(zip(xs, points, strict=True)))]
        return SeriesDrawing(label, colour, line, " ".join(upper + lower), ())
    shas = dict(zip(group.run_ids, group.git_shas, strict=False))
    markers = tuple(Marker(x, scale(p.median_us), scale(min(p.ci_low_us, p.median_us)),
                           scale(max(p.ci_high_us, p.median_us)), _tooltip(label, p, shas.get(p.run_id)))
                    for x, p in zip(xs, points, strict=True))
    return SeriesDrawing(label, colour, line, "", markers)


def _tooltip(label: str, p: HistoryPoint, sha: str | None) -> str:
    commit = f", commit {sha[:12]}" if sha else ""
    return svg_text(f"{label}: {p.median_us:,.2f} µs (95 % CI {p.ci_low_us:,.2f}–{p.ci_high_us:,.2f}); "
                    f"run {p.run_id}, {_short_time(p.created_utc)}{commit}")


def _gain_panel(group: HistoryGroup, top: float, bottom: float, x_of: _XOf, position: dict[str, int]) -> Panel:
    gains = [p.speedup for s in group.series for p in s.points if p.speedup is not None]
    y_max = max([*gains, 1.0]) * 1.1
    values, decimals = nice_ticks(y_max)
    scale = _Scale(0.0, y_max, top, bottom, False)
    series = []
    for i, s in enumerate(group.series):
        pts = [(x_of(position[p.run_id]), p.speedup) for p in s.points if p.speedup is not None]
        line = " ".join(f"{x},{scale(g)}" for x, g in pts)
        markers = tuple(Marker(x, scale(g), scale(g), scale(g), svg_text(f"{clip_label(s.variant)}: {g:.2f}×"))
                        for x, g in pts) if len(pts) <= BAND_FROM_POINTS else ()
        series.append(SeriesDrawing(svg_text(clip_label(s.variant)), colour_for(i), line, "", markers))
    return Panel(top, round(bottom, 2), "speedup over each run's baseline variant", 10.0,
                 "speedup vs baseline (×)", tuple(AxisTick(scale(v), f"{v:,.{decimals}f}") for v in values),
                 tuple(series), reference_y_px=scale(1.0))


def _step_marks(group: HistoryGroup, steps: Sequence[SeriesSteps], position: dict[str, int], x_of: _XOf,
                panel: Panel) -> tuple[StepMark, ...]:
    """A dashed line at each step, in its variant's colour, labelled ``+10.2 % abc1234..def5678``."""
    colours = {s.variant: colour_for(i) for i, s in enumerate(group.series)}
    marks = []
    for one in steps:
        for k, st in enumerate(one.steps):
            mid = (position[st.before.run_id] + position[st.after.run_id]) / 2
            x = x_of(mid)
            right = mid > 0.6 * len(group.run_ids)  # a recent step: its label on the left, inside the plot
            label = svg_text(f"{st.change_pct:+.1f} %  {clip_label(st.commit_range, 30)}")
            y = panel.bottom_px - 6 - (panel.bottom_px - panel.top_px) * (0.04 + 0.08 * (k % 3))
            marks.append(StepMark(x, colours.get(one.variant, "#333333"), label, round(x - 3 if right else x + 3, 2),
                                  round(y, 2), "end" if right else "start",
                                  round(text_width_px(label, LEGEND_FONT_PX), 2)))
    return tuple(marks)


def _log_ticks(low: float, high: float, scale: _Scale) -> tuple[AxisTick, ...]:
    """Decades labelled; 2× and 5× ticks too, labelled when the axis spans at most MINOR_LABEL_DECADES."""
    decades = round(math.log10(high / low))
    ticks = []
    for e in range(round(math.log10(low)), round(math.log10(high)) + 1):
        for m in (1.0, 2.0, 5.0):
            v = m * 10.0**e
            if v > high * (1 + 1e-9):
                break
            label = _log_tick(v) if m == 1.0 or decades <= MINOR_LABEL_DECADES else ""
            ticks.append(AxisTick(scale(v), label))
    return tuple(ticks)


def _log_tick(value: float, _pos: object = None) -> str:
    """A log-axis tick as plain text: 10,000 / 20 / 0.5 / 0.002."""
    if value >= 1:
        return f"{value:,.0f}"
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def _short_time(created_utc: str) -> str:
    """``2026-11-30T04:55:00Z`` -> ``2026-11-30 04:55`` for a tick label."""
    return created_utc[:16].replace("T", " ")


def _tick_times(created_utc: list[str]) -> list[str]:
    """Tick labels to the minute, or to the second where two ticks would read the same."""
    minutes = [_short_time(t) for t in created_utc]
    if len(set(minutes)) == len(minutes):
        return minutes
    return [t[:19].replace("T", " ") for t in created_utc]


def history_chart(group: HistoryGroup, path: Path, steps: Sequence[SeriesSteps] = ()) -> None:
    """Write the history chart of ``group`` as SVG through ``templates/charts/history.svg`` (every text escaped)."""
    path.write_text(render_html("charts/history.svg", chart=history_layout(group, steps)), encoding="utf-8")

