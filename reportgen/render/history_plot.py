"""The index's history charts (PNG): each variant's median time per call and speedup across a group's runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from reportgen.analysis.change_points import SeriesSteps
from reportgen.analysis.history import HistoryGroup
from reportgen.render.drawing import CHAR_WIDTH_EM, LEGEND_FONT_PT, clip_label, colour_for, save_png, styled_figure

LOG_SPAN = 20.0
"""History charts switch to a log time axis when the medians span more than this factor."""
HISTORY_WIDTH_IN = 9.0
BAND_FROM_POINTS = 40
"""A series with more points than this draws its confidence interval as a shaded band, not error bars."""


def history_chart(group: HistoryGroup, path: Path, steps: Sequence[SeriesSteps] = ()) -> None:
    """Each variant's median time (with CI) and, with two or more variants, speedup across the group's runs.

    Each step of ``steps`` is a dashed line in its variant's colour between the runs either side of it, labelled
    with its size and commit range.

    Up to ``BAND_FROM_POINTS`` runs, each point has error bars; beyond, the interval is a shaded band
    (hundreds of error bars are a smear, and cost a build more than everything else on the index).
    """
    position = {run_id: i for i, run_id in enumerate(group.run_ids)}
    with_gain = len(group.series) > 1
    height_in = 5.6 if with_gain else 3.8
    legend_in = max((len(clip_label(s.variant)) for s in group.series), default=0) * LEGEND_FONT_PT / 72 * CHAR_WIDTH_EM
    with styled_figure(HISTORY_WIDTH_IN, height_in) as fig:
        fig.subplots_adjust(left=0.9 / HISTORY_WIDTH_IN, right=1 - (0.55 + legend_in) / HISTORY_WIDTH_IN,
                            top=1 - 0.35 / height_in, bottom=1.0 / height_in, hspace=0.3)
        if with_gain:
            ax_time, ax_gain = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        else:
            ax_time = ax_gain = fig.subplots(1, 1)
        for i, series in enumerate(group.series):
            xs = [position[p.run_id] for p in series.points]
            meds = [p.median_us for p in series.points]
            colour = colour_for(i)
            if len(xs) > BAND_FROM_POINTS:
                ax_time.fill_between(xs, [p.ci_low_us for p in series.points], [p.ci_high_us for p in series.points],
                                     color=colour, alpha=0.25, lw=0)
                ax_time.plot(xs, meds, color=colour, lw=1.2, label=clip_label(series.variant))
            else:
                err = [[max(p.median_us - p.ci_low_us, 0.0) for p in series.points],
                       [max(p.ci_high_us - p.median_us, 0.0) for p in series.points]]
                ax_time.errorbar(xs, meds, yerr=err, marker="o", ms=4, capsize=3, color=colour,
                                 label=clip_label(series.variant))
            gains = [(x, p.speedup) for x, p in zip(xs, series.points, strict=True) if p.speedup is not None]
            if gains and with_gain:
                ax_gain.plot([g[0] for g in gains], [g[1] for g in gains], color=colour,
                             marker="o" if len(gains) <= BAND_FROM_POINTS else None, ms=4, lw=1.2)
        _mark_steps(ax_time, group, steps, position)
        ax_time.set_ylabel("median µs per call")
        _time_scale(ax_time, [p.median_us for series in group.series for p in series.points])
        ax_time.legend(fontsize=LEGEND_FONT_PT, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax_time.set_title(group.title, fontsize=10, loc="left")
        if with_gain:
            ax_gain.set_ylabel("speedup vs baseline (×)")
            ax_gain.set_title("speedup over each run's baseline variant", fontsize=8, loc="left")
            ax_gain.axhline(1.0, color="#999999", lw=0.8, ls="--")
            ax_gain.set_ylim(bottom=0)
        n_runs = len(group.run_ids)
        ticks = list(range(0, n_runs, max(1, n_runs // 12)))
        ax_gain.set_xticks(ticks, _tick_times([group.created_utc[t] for t in ticks]), rotation=30, ha="right",
                           fontsize=7)
        ax_gain.set_xlabel("run (oldest left)")
        ax_gain.set_xlim(-0.5, max(n_runs - 0.5, 0.5))
        save_png(fig, path)


def _mark_steps(ax: Axes, group: HistoryGroup, steps: Sequence[SeriesSteps], position: dict[str, int]) -> None:
    """A dashed line at each step, in its variant's colour, labelled ``+10.2 % abc1234..def5678`` at the top."""
    colours = {s.variant: colour_for(i) for i, s in enumerate(group.series)}
    for one in steps:
        for k, st in enumerate(one.steps):
            x = (position[st.before.run_id] + position[st.after.run_id]) / 2
            colour = colours.get(one.variant, "#333333")
            ax.axvline(x, color=colour, ls="--", lw=1.0)
            right = x > 0.6 * len(group.run_ids)  # a recent step: its label on the left, inside the axes
            ax.annotate(f"{st.change_pct:+.1f} %  {clip_label(st.commit_range, 30)}", (x, 0.04 + 0.08 * (k % 3)),
                        xycoords=("data", "axes fraction"), xytext=(-3 if right else 3, 0), textcoords="offset points",
                        ha="right" if right else "left", va="bottom",
                        fontsize=7, color=colour, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})


def _time_scale(ax: Axes, medians_us: list[float]) -> None:
    """Linear from zero, unless the medians span more than LOG_SPAN×: then log, so small variants stay visible."""
    positive = [m for m in medians_us if m > 0]
    if positive and max(positive) / min(positive) > LOG_SPAN:
        ax.set_yscale("log")
        ax.set_ylabel("median µs per call (log scale)")
        # matplotlib's log labels are mathtext ($\mathdefault{10^{4}}$), which text.parse_math=False prints
        # raw (and their width pushed the axis label off the figure): plain numbers instead.
        ax.yaxis.set_major_formatter(FuncFormatter(_log_tick))
        ax.yaxis.set_minor_locator(LogLocator(base=10.0, subs=(2.0, 5.0)))
        decades = math.log10(max(positive) / min(positive))
        ax.yaxis.set_minor_formatter(FuncFormatter(_log_tick) if decades <= MINOR_LABEL_DECADES else NullFormatter())
    else:
        ax.set_ylim(bottom=0)


MINOR_LABEL_DECADES = 2.0
"""A log time axis spanning at most this many decades also labels its 2× and 5× ticks."""


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
