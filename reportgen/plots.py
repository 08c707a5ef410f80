"""matplotlib figures for the site: per-variant bar chart, history chart, timeline snapshot.

Figures are drawn on a private ``Figure`` (no pyplot global state) under fixed rcParams
(DejaVu Sans, fixed DPI, no "Software" PNG metadata) so the same input gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from PIL import Image

from reportgen.analysis import LANE_TITLES, HistoryGroup, LaneKind, TimelineLayout, VariantView

DPI = 100
PNG_COLOURS = 256
MAX_LABEL_CHARS = 32
"""Axis labels (variant names) longer than this are shortened on the chart."""
LOG_SPAN = 20.0
"""History charts switch to a log time axis when the medians span more than this factor."""
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
LANE_COLOURS = {
    LaneKind.FRAMEWORK: "#4C72B0",
    LaneKind.RUNTIME: "#DD8452",
    LaneKind.DEVICE: "#55A868",
    LaneKind.OTHER: "#8C8C8C",
}
_RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "text.parse_math": False,  # names from traces are literal text: '$' must not start mathtext
    "font.size": 9,
    "svg.hashsalt": "reportgen",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}


@dataclass(frozen=True)
class Margins:
    """Fixed margins around the axes, in inches: cheaper than ``tight_layout`` (which draws every text twice)."""

    left_in: float
    right_in: float
    top_in: float
    bottom_in: float


@contextmanager
def _figure(width_in: float, height_in: float, margins: Margins | None = None) -> Iterator[Figure]:
    """A fresh Agg figure under the fixed style; with ``margins``, the subplot area is placed by them."""
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        fig = Figure(figsize=(width_in, height_in), dpi=DPI)
        FigureCanvasAgg(fig)
        if margins is not None:
            fig.subplots_adjust(left=margins.left_in / width_in, right=1 - margins.right_in / width_in,
                                top=1 - margins.top_in / height_in, bottom=margins.bottom_in / height_in)
        yield fig


def _text_width_in(fig: Figure, text: str, size_pt: float) -> float:
    """The drawn width of ``text`` at ``size_pt`` in the figure's font: one measurement, no layout pass."""
    width_px, _, _ = fig.canvas.get_renderer().get_text_width_height_descent(  # type: ignore[attr-defined]
        text, FontProperties(size=size_pt), ismath=False)
    return float(width_px) / DPI


def _clip_label(text: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """A label cut to ``max_chars`` with an ellipsis; the page's tables carry the full name."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a 256-colour PNG with no software/time metadata (reproducible bytes).

    The charts hold a few flat colours and anti-aliased text, which a palette keeps: the file is
    about a third of a true-colour PNG's and encodes faster (measured in benchmarks/README.md).
    """
    canvas = cast(FigureCanvasAgg, fig.canvas)
    canvas.draw()
    rgba = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    image = rgba.convert("RGB").quantize(PNG_COLOURS, method=Image.Quantize.FASTOCTREE)
    image.save(path, format="PNG", dpi=(DPI, DPI))


def colour_for(index: int) -> str:
    """The palette colour of the variant at ``index`` (stable order: the run's variant order)."""
    return PALETTE[index % len(PALETTE)]


def bar_chart(variants: Sequence[VariantView], path: Path, title: str) -> None:
    """Median time per call per variant, with the 95 % bootstrap interval of the median as error bars."""
    height = 0.6 + 0.45 * max(len(variants), 1)
    labels = [_clip_label(v.name) for v in variants]
    with _figure(7.5, height + 0.9) as fig:
        left_in = 0.2 + max((_text_width_in(fig, label, 9) for label in labels), default=0.0)
        fig.subplots_adjust(left=left_in / 7.5, right=1 - 0.15 / 7.5, top=1 - 0.35 / (height + 0.9),
                            bottom=0.55 / (height + 0.9))
        ax = fig.add_subplot()
        medians, lows, highs, colours = [], [], [], []
        for i, v in enumerate(variants):
            colours.append(colour_for(i))
            if v.timing is None:
                medians.append(0.0)
                lows.append(0.0)
                highs.append(0.0)
            else:
                medians.append(v.timing.median_us)
                lows.append(max(v.timing.median_us - v.timing.ci_low_us, 0.0))
                highs.append(max(v.timing.ci_high_us - v.timing.median_us, 0.0))
        ys = list(range(len(labels)))
        ax.barh(ys, medians, color=colours, xerr=[lows, highs], capsize=4, error_kw={"elinewidth": 1.2})
        ax.set_yticks(ys, labels)
        ax.invert_yaxis()
        top = max((m + h for m, h in zip(medians, highs, strict=True)), default=1.0) or 1.0
        ax.set_xlim(0, top * 1.3)
        for y, v, m, h in zip(ys, variants, medians, highs, strict=True):
            text = f"{m:,.1f} µs" if v.timing is not None else f"{v.status.value}: no timing"
            ax.text(m + h + top * 0.01, y, text, va="center", fontsize=8)
        # Centred on the figure, not the axes: a long variant name narrows the axes.
        fig.text(0.5, 0.04 / (height + 0.9), "median time per call (µs); error bars: 95 % bootstrap CI of the median",
                 ha="center", va="bottom")
        ax.set_title(title, fontsize=10, loc="left")
        _save(fig, path)


def history_chart(group: HistoryGroup, path: Path) -> None:
    """Each variant's median time (with CI) and, with two or more variants, speedup across the group's runs."""
    run_ids = list(group.run_ids)
    stamps = dict(zip(group.run_ids, group.created_utc, strict=True))
    with_gain = len(group.series) > 1
    with _figure(9.0, 5.6 if with_gain else 3.8) as fig:
        if with_gain:
            ax_time, ax_gain = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        else:
            ax_time = ax_gain = fig.subplots(1, 1)
        for i, series in enumerate(group.series):
            xs = [run_ids.index(p.run_id) for p in series.points]
            meds = [p.median_us for p in series.points]
            err = [[max(p.median_us - p.ci_low_us, 0.0) for p in series.points],
                   [max(p.ci_high_us - p.median_us, 0.0) for p in series.points]]
            ax_time.errorbar(xs, meds, yerr=err, marker="o", ms=4, capsize=3, color=colour_for(i),
                             label=series.variant)
            gains = [(x, p.speedup) for x, p in zip(xs, series.points, strict=True) if p.speedup is not None]
            if gains and with_gain:
                ax_gain.plot([g[0] for g in gains], [g[1] for g in gains], marker="o", ms=4, color=colour_for(i),
                             label=series.variant)
        ax_time.set_ylabel("median µs per call")
        _time_scale(ax_time, [p.median_us for series in group.series for p in series.points])
        ax_time.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax_time.set_title(group.title, fontsize=10, loc="left")
        if with_gain:
            ax_gain.set_ylabel("speedup vs baseline (×)")
            ax_gain.set_title("speedup over the baseline (naive, or the first variant)", fontsize=8, loc="left")
            ax_gain.axhline(1.0, color="#999999", lw=0.8, ls="--")
            ax_gain.set_ylim(bottom=0)
        step = max(1, len(run_ids) // 12)
        ticks = list(range(0, len(run_ids), step))
        ax_gain.set_xticks(ticks, [_short_time(stamps[run_ids[t]]) for t in ticks], rotation=30, ha="right", fontsize=7)
        ax_gain.set_xlabel("run (oldest left)")
        ax_gain.set_xlim(-0.5, max(len(run_ids) - 0.5, 0.5))
        fig.tight_layout()
        _save(fig, path)


def _time_scale(ax: Axes, medians_us: list[float]) -> None:
    """Linear from zero, unless the medians span more than LOG_SPAN×: then log, so small variants stay visible."""
    positive = [m for m in medians_us if m > 0]
    if positive and max(positive) / min(positive) > LOG_SPAN:
        ax.set_yscale("log")
        ax.set_ylabel("median µs per call (log scale)")
    else:
        ax.set_ylim(bottom=0)


def _short_time(created_utc: str) -> str:
    """``2026-11-30T04:55:00Z`` -> ``2026-11-30 04:55`` for a tick label."""
    return created_utc[:16].replace("T", " ")


def timeline_chart(layout: TimelineLayout, path: Path, title: str) -> None:
    """Lanes (framework, runtime, device) of one iteration, nested calls one row lower, labels where they fit."""
    rows = _lane_rows(layout)
    n_rows = max(len(rows), 1)
    width_in = 11.0
    with _figure(width_in, 1.0 + 0.32 * n_rows + 0.6, Margins(1.1, 0.15, 0.35, 0.55)) as fig:
        ax = fig.add_subplot()
        row_of = {key: i for i, key in enumerate(rows)}
        _lane_bands(ax, rows)
        label_end: dict[int, float] = {}
        min_width = layout.window_us * 0.0015
        boxes, colours = [], []
        for bar in layout.bars:
            y = row_of[(bar.lane, bar.depth)]
            x0, x1 = bar.start_us, bar.start_us + max(bar.duration_us, min_width)
            boxes.append([(x0, y - 0.4), (x0, y + 0.4), (x1, y + 0.4), (x1, y - 0.4)])
            colours.append(LANE_COLOURS[bar.lane])
            if not bar.folded and bar.start_us >= label_end.get(y, -1.0):
                if _label_bar(ax, bar.name, bar.start_us, bar.duration_us, y, layout.window_us, width_in):
                    label_end[y] = bar.start_us + bar.duration_us
        # One collection for all bars: one artist to draw instead of one per bar.
        ax.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors="white", linewidths=0.4),
                          autolim=False)
        ax.set_yticks(range(len(rows)), [_row_label(lane, depth) for lane, depth in rows], fontsize=8)
        ax.set_ylim(n_rows - 0.5, -0.5)
        ax.set_xlim(0, layout.window_us)
        ax.set_xlabel(f"time since the start of {layout.step_name or 'the trace'} (µs)")
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(axis="x", color="#e5e5e5", lw=0.6)
        ax.set_axisbelow(True)
        if not layout.bars:
            ax.text(0.5, 0.5, "no events in this window", transform=ax.transAxes, ha="center", va="center")
        _save(fig, path)


def _lane_bands(ax: Axes, rows: list[tuple[LaneKind, int]]) -> None:
    """Shade every other lane so nested rows read as one lane."""
    lanes = [lane for lane, _ in rows]
    for i, lane in enumerate(dict.fromkeys(lanes)):
        if i % 2:
            first, last = lanes.index(lane), len(lanes) - 1 - lanes[::-1].index(lane)
            ax.axhspan(first - 0.5, last + 0.5, color="#f3f4f6", zorder=0)


def _lane_rows(layout: TimelineLayout) -> list[tuple[LaneKind, int]]:
    return [(lane, d) for lane, depth in layout.lane_depths for d in range(depth)]


def _row_label(lane: LaneKind, depth: int) -> str:
    return LANE_TITLES[lane] if depth == 0 else f"↳ depth {depth}"


def _label_bar(ax: Axes, name: str, start_us: float, duration_us: float, y: int, window_us: float,
               width_in: float) -> bool:
    """Write the op name inside its bar when it fits (else its last ``::`` part, else shortened); True if written."""
    plot_width_px = width_in * DPI * 0.8
    max_chars = int(duration_us / window_us * plot_width_px / 5.0) - 1
    if max_chars < 3:
        return False
    short = name.rsplit("::", 1)[-1] or name
    if len(name) <= max_chars:
        text = name
    elif len(short) <= max_chars:
        text = short
    elif max_chars >= 5:
        text = short[: max_chars - 1] + "…"
    else:
        return False
    ax.text(start_us + duration_us / 2, y, text, ha="center", va="center", fontsize=6.5, color="white",
            clip_on=True)
    return True
