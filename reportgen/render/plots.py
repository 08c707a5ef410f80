"""The site's charts: per-variant bar chart (SVG), timeline snapshots (SVG) and history charts (PNG).

The timeline and history charts are matplotlib figures on a private ``Figure`` (no pyplot global
state) under fixed rcParams (DejaVu Sans, fixed DPI, no time or software metadata), so the same
input gives the same bytes. The bar chart is laid out here and drawn by
``templates/charts/bars.svg``: a few rectangles and lines, where a matplotlib figure cost more
than the rest of a run page together.
"""

from __future__ import annotations

import math
import re
import unicodedata
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import matplotlib
from matplotlib import transforms
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from PIL import Image

from reportgen.analysis.sweep import SweepView
from reportgen.analysis.views import FOLDED_TRACK, MAX_DEPTH, HistoryGroup, TimelineLayout, VariantView
from reportgen.devices.lanes import Lane
from reportgen.render.jinja import render_html

DPI = 100
PNG_COLOURS = 256
MAX_LABEL_CHARS = 32
"""Axis labels (variant names) longer than this are shortened on the chart."""
LOG_SPAN = 20.0
"""History charts switch to a log time axis when the medians span more than this factor."""
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
LANE_COLOURS = {
    Lane.FRAMEWORK: "#4C72B0",
    Lane.RUNTIME: "#DD8452",
    Lane.DEVICE: "#55A868",
    Lane.OTHER: "#8C8C8C",
}
_RC: dict[str, Any] = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # SVG text names it, then falls back to the viewer's sans-serif
    "svg.fonttype": "none",  # SVG text stays text: small files, selectable, drawn by the viewer's font
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
def _figure(width_in: float, height_in: float) -> Iterator[Figure]:
    """A fresh Agg figure under the fixed style."""
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        fig = Figure(figsize=(width_in, height_in), dpi=DPI)
        FigureCanvasAgg(fig)
        yield fig


def _clip_label(text: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """A label cut to ``max_chars`` with an ellipsis; the page's tables carry the full name."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def svg_text(text: str) -> str:
    """``text`` with what XML 1.0 forbids (C0 controls but tab and newlines, lone surrogates, U+FFFE/F) as U+FFFD.

    Names come from traces and users; one ESC character would make the whole SVG unreadable.
    """
    return _NOT_XML.sub("\ufffd", text)


def _save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a 256-colour PNG with no software/time metadata (reproducible bytes).

    The charts hold a few flat colours and anti-aliased text, which a palette keeps: the 1,005-run
    history chart of the benchmark store is 15 kB against 63 kB in true colour, and quantising plus
    encoding takes 9 ms against 17 ms for the true-colour encode alone.
    """
    canvas = cast(FigureCanvasAgg, fig.canvas)
    canvas.draw()
    rgba = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    image = rgba.convert("RGB").quantize(PNG_COLOURS, method=Image.Quantize.FASTOCTREE)
    image.save(path, format="PNG", dpi=(DPI, DPI))


def colour_for(index: int) -> str:
    """The palette colour of the variant at ``index`` (stable order: the run's variant order)."""
    return PALETTE[index % len(PALETTE)]


BAR_WIDTH_PX = 750
BAR_FONT_PX = 12.0
CHAR_WIDTH_EM = 0.62
"""Mean advance of a DejaVu Sans character, in em: the bar chart sizes its label margin from it."""


@dataclass(frozen=True)
class SvgBar:
    """One variant's bar, its error bar and its value label, in SVG pixels."""

    label: str
    colour: str
    y_px: float
    height_px: float
    width_px: float
    err_from_px: float | None
    err_to_px: float | None
    value_text: str
    value_x_px: float


@dataclass(frozen=True)
class SvgTick:
    x_px: float
    label: str


@dataclass(frozen=True)
class BarChartLayout:
    """Everything ``templates/charts/bars.svg`` draws: plot box, axis ticks and bars, in pixels."""

    title: str
    caption: str
    width_px: int
    height_px: int
    plot_left_px: float
    plot_right_px: float
    plot_top_px: float
    plot_bottom_px: float
    ticks: tuple[SvgTick, ...]
    bars: tuple[SvgBar, ...]


def text_width_px(text: str, font_px: float) -> float:
    """An estimate of ``text``'s drawn width: the viewer's font lays SVG text out, not ours.

    East Asian wide and full-width characters take about a whole em; others about CHAR_WIDTH_EM.
    """
    wide = sum(1 for c in text if unicodedata.east_asian_width(c) in ("W", "F"))
    return ((len(text) - wide) * CHAR_WIDTH_EM + wide) * font_px


def nice_ticks(top: float, max_ticks: int = 7) -> tuple[list[float], int]:
    """Ticks 0, s, 2s ... up to ``top`` with s a 1, 2, 2.5 or 5 times a power of ten; and the decimals to print."""
    if not math.isfinite(top) or top <= 0:
        return [0.0], 0
    raw = top / max(max_ticks - 1, 1)
    if raw < 1e-12:  # below an attosecond: one tick at zero (and no logarithm of an underflow)
        return [0.0], 0
    exponent = math.floor(math.log10(raw))
    mantissa = next(m for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * 10.0**exponent >= raw * (1 - 1e-12))
    if mantissa == 10.0:
        mantissa, exponent = 1.0, exponent + 1
    step = mantissa * 10.0**exponent
    decimals = max(0, -exponent) + (1 if mantissa == 2.5 and exponent <= 0 else 0)
    count = int(top / step + 1e-9)
    return [i * step for i in range(count + 1)], decimals


def bar_layout(variants: Sequence[VariantView], title: str) -> BarChartLayout:
    """Median time per call per variant as horizontal bars, with the 95 % bootstrap interval as error bars."""
    labels = [svg_text(_clip_label(v.name)) for v in variants]
    row_px = 45.0
    height_px = int(round(60 + row_px * max(len(variants), 1) + 90))
    left = 20.0 + max((text_width_px(label, BAR_FONT_PX) for label in labels), default=0.0)
    right, top_px, bottom = BAR_WIDTH_PX - 15.0, 35.0, height_px - 55.0
    medians = [v.timing.median_us if v.timing is not None else 0.0 for v in variants]
    highs = [v.timing.ci_high_us if v.timing is not None else 0.0 for v in variants]
    top = max([*medians, *highs], default=0.0) or 1.0
    x_max = top * 1.3
    scale = (right - left) / x_max
    ticks, decimals = nice_ticks(x_max)
    band = (bottom - top_px) / max(len(variants), 1)
    bars = []
    for i, (v, label) in enumerate(zip(variants, labels, strict=True)):
        y = top_px + band * (i + 0.5)
        t = v.timing
        err_from = err_to = None
        if t is not None:
            err_from = left + max(min(t.ci_low_us, t.median_us), 0.0) * scale
            err_to = left + max(t.ci_high_us, t.median_us) * scale
        end = err_to if err_to is not None else left + medians[i] * scale
        text = f"{t.median_us:,.1f} µs" if t is not None else f"{v.status.value}: no timing"
        bars.append(SvgBar(label, colour_for(i), _px(y), _px(band * 0.8), _px(medians[i] * scale),
                           _px_or_none(err_from), _px_or_none(err_to), text, _px(end + 6)))
    return BarChartLayout(
        title=svg_text(title),
        caption="median time per call (µs); error bars: 95 % bootstrap CI of the median",
        width_px=BAR_WIDTH_PX, height_px=height_px, plot_left_px=_px(left), plot_right_px=_px(right),
        plot_top_px=top_px, plot_bottom_px=_px(bottom),
        ticks=tuple(SvgTick(_px(left + t * scale), f"{t:,.{decimals}f}") for t in ticks),
        bars=tuple(bars),
    )


def _px(value: float) -> float:
    return round(value, 2)


def _px_or_none(value: float | None) -> float | None:
    return None if value is None else _px(value)


def bar_chart(variants: Sequence[VariantView], path: Path, title: str) -> None:
    """Write the bar chart as SVG through ``templates/charts/bars.svg`` (every label escaped)."""
    path.write_text(render_html("charts/bars.svg", chart=bar_layout(variants, title)), encoding="utf-8")


HISTORY_WIDTH_IN = 9.0
BAND_FROM_POINTS = 40
"""A series with more points than this draws its confidence interval as a shaded band, not error bars."""
LEGEND_FONT_PT = 8.0


def history_chart(group: HistoryGroup, path: Path) -> None:
    """Each variant's median time (with CI) and, with two or more variants, speedup across the group's runs.

    Up to ``BAND_FROM_POINTS`` runs, each point has error bars; beyond, the interval is a shaded band
    (hundreds of error bars are a smear, and cost a build more than everything else on the index).
    """
    position = {run_id: i for i, run_id in enumerate(group.run_ids)}
    with_gain = len(group.series) > 1
    height_in = 5.6 if with_gain else 3.8
    legend_in = max((len(_clip_label(s.variant)) for s in group.series), default=0) * LEGEND_FONT_PT / 72 * CHAR_WIDTH_EM
    with _figure(HISTORY_WIDTH_IN, height_in) as fig:
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
                ax_time.plot(xs, meds, color=colour, lw=1.2, label=_clip_label(series.variant))
            else:
                err = [[max(p.median_us - p.ci_low_us, 0.0) for p in series.points],
                       [max(p.ci_high_us - p.median_us, 0.0) for p in series.points]]
                ax_time.errorbar(xs, meds, yerr=err, marker="o", ms=4, capsize=3, color=colour,
                                 label=_clip_label(series.variant))
            gains = [(x, p.speedup) for x, p in zip(xs, series.points, strict=True) if p.speedup is not None]
            if gains and with_gain:
                ax_gain.plot([g[0] for g in gains], [g[1] for g in gains], color=colour,
                             marker="o" if len(gains) <= BAND_FROM_POINTS else None, ms=4, lw=1.2)
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
        _save(fig, path)


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


TIMELINE_WIDTH_IN = 11.0
TIMELINE_MARGINS = Margins(1.1, 0.45, 0.35, 0.55)  # right: half a time label past the last grid line
TIMELINE_X_TICKS = 8
SVG_METADATA = {"Date": None, "Creator": None}
"""No time and no software version in the files: same input, same bytes."""


class _TimelineFigure:
    """The one figure a process draws every timeline on: made once, cleared of the last chart's artists.

    Making a figure and its axes costs about 10 ms here, a sizeable part of a small chart;
    reusing them keeps that out of the per-run price of a build. What a chart
    leaves behind (bars, labels, lane bands) is removed before the next one is drawn, and
    everything else (size, limits, texts) is set afresh, so a chart's bytes do not
    depend on what was drawn before it (tests draw A, B, A and compare).
    """

    def __init__(self) -> None:
        self.fig = Figure(figsize=(TIMELINE_WIDTH_IN, 3.0), dpi=DPI)
        FigureCanvasAgg(self.fig)
        self.ax = self.fig.add_subplot()
        # The axes draw no ticks of their own: matplotlib's tick machinery (a Tick of two lines and two
        # texts per position, each label measured to place the others) was about half of a chart's
        # drawing time under cProfile. The
        # grid, the tick labels and the row labels are drawn as plain artists by timeline_chart.
        self.ax.xaxis.set_visible(False)
        self.ax.yaxis.set_visible(False)
        self.x_labels = transforms.offset_copy(self.ax.get_xaxis_transform(), fig=self.fig, y=-4, units="points")
        self.y_labels = transforms.offset_copy(self.ax.get_yaxis_transform(), fig=self.fig, x=-4, units="points")
        # Title and axis label as figure texts at fixed places.
        self.title = self.fig.text(0.0, 0.0, "", fontsize=10, ha="left", va="baseline")
        self.xlabel = self.fig.text(0.5, 0.0, "", ha="center", va="bottom")

    def reset(self, height_in: float, left_in: float = TIMELINE_MARGINS.left_in,
              bottom_in: float = TIMELINE_MARGINS.bottom_in) -> Axes:
        """Size the figure for ``height_in`` (and these margins) and empty the axes of the previous chart."""
        w = TIMELINE_WIDTH_IN
        m = Margins(left_in, TIMELINE_MARGINS.right_in, TIMELINE_MARGINS.top_in, bottom_in)
        self.fig.set_size_inches(w, height_in)
        self.fig.subplots_adjust(left=m.left_in / w, right=1 - m.right_in / w,
                                 top=1 - m.top_in / height_in, bottom=m.bottom_in / height_in)
        self.title.set_position((m.left_in / w, 1 - (m.top_in - 0.12) / height_in))
        # Under the middle of the axes; a label with notes (lines up to NOTE_LINE_CHARS) under the figure's middle.
        wide = bottom_in > TIMELINE_MARGINS.bottom_in
        self.xlabel.set_position((0.5 if wide else (m.left_in + (w - m.left_in - m.right_in) / 2) / w,
                                  0.04 / height_in))
        for artist in [*self.ax.collections, *self.ax.texts, *self.ax.patches]:
            artist.remove()
        return self.ax


_TIMELINE: _TimelineFigure | None = None


def _timeline_figure() -> _TimelineFigure:
    global _TIMELINE
    if _TIMELINE is None:
        _TIMELINE = _TimelineFigure()
    return _TIMELINE


TIMELINE_ROW_IN = 0.32
ROW_LABEL_PT = 8.0
MAX_ROW_LABEL_CHARS = 36
"""Row labels (lane · thread or stream) longer than this are shortened; the left margin grows to fit the rest."""
MAX_LEFT_IN = 2.8


NOTE_LINE_IN = 0.17
NOTE_LINE_CHARS = 130
"""Notes under the time axis are packed into lines of at most about this many characters (9 pt, 11 in wide)."""


def _note_lines(notes: Sequence[str]) -> list[str]:
    """``notes`` packed into lines, ' · ' between two notes of a line; a note is never split."""
    lines: list[str] = []
    for note in notes:
        if lines and len(lines[-1]) + 3 + len(note) <= NOTE_LINE_CHARS:
            lines[-1] += " · " + note
        else:
            lines.append(note)
    return lines


def _left_margin_in(labels: Sequence[str]) -> float:
    """Room for the longest row label (estimated as the bar chart does), at least the default margin."""
    widest = max((text_width_px(label, ROW_LABEL_PT) for label in labels), default=0.0) / 72  # pt -> in
    return min(max(TIMELINE_MARGINS.left_in, widest + 0.2), MAX_LEFT_IN)


def timeline_chart(layout: TimelineLayout, path: Path, title: str) -> None:
    """SVG of one iteration: a track per host thread and per device stream, each labelled, nested calls (and
    overlapping events of one stream) one row lower, names inside bars where they fit.

    SVG (text kept as text): sharp at any zoom, a few kB, and no rasterising or PNG encoding.
    """
    rows = list(layout.rows)
    n_rows = max(len(rows), 1)
    labels = _row_labels(layout)
    row_of = {key: i for i, key in enumerate(rows)}
    drawn, notes = _bars_and_notes(layout, row_of, MAX_TIMELINE_BARS)
    xlabel = "\n".join([f"time since the start of {layout.step_name or 'the trace'} (µs)", *_note_lines(notes)])
    extra_in = NOTE_LINE_IN * xlabel.count("\n")
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        tf = _timeline_figure()
        ax = tf.reset(1.0 + TIMELINE_ROW_IN * n_rows + 0.6 + extra_in, _left_margin_in(labels),
                      TIMELINE_MARGINS.bottom_in + extra_in)
        _lane_bands(ax, layout)
        label_end: dict[int, float] = {}
        boxes, colours, edges = [], [], []
        pixel_us = layout.window_us / TIMELINE_PLOT_PX
        for bar, (x0, x1) in zip(drawn, drawn_extents(drawn, layout.window_us * 0.0015), strict=True):
            y = bar.row
            boxes.append([(x0, y - 0.4), (x0, y + 0.4), (x1, y + 0.4), (x1, y - 0.4)])
            colours.append(LANE_COLOURS[bar.lane])
            # A white edge separates neighbours, but would wash a bar of a pixel or two out to a pale line.
            edges.append("white" if x1 - x0 >= 3 * pixel_us else LANE_COLOURS[bar.lane])
            if bar.name is not None and bar.start_us >= label_end.get(y, -1.0):
                if _label_bar(ax, bar.name, bar.start_us, bar.duration_us, y, layout.window_us, TIMELINE_WIDTH_IN):
                    label_end[y] = bar.start_us + bar.duration_us
        # One collection for all bars: one artist to draw instead of one per bar.
        ax.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors=edges, linewidths=0.4),
                          autolim=False)
        ax.set_ylim(n_rows - 0.5, -0.5)
        ax.set_xlim(0, layout.window_us)
        _time_axis(tf, layout.window_us)
        for y, label in enumerate(labels):
            ax.text(0, y, svg_text(label), transform=tf.y_labels, ha="right", va="center", fontsize=ROW_LABEL_PT,
                    color="#222222" if not label.startswith("↳") else "#777777")
        tf.xlabel.set_text(svg_text(xlabel))
        tf.title.set_text(svg_text(title))
        if not layout.bars:
            ax.text(0.5, 0.5, "no events in this window", transform=ax.transAxes, ha="center", va="center")
        with warnings.catch_warnings():
            # The viewer draws SVG text with its own fonts (CJK included): DejaVu Sans lacking a glyph is moot.
            warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
            tf.fig.savefig(path, format="svg", metadata=SVG_METADATA)


MAX_TIMELINE_BARS = 2000
"""A timeline with more bars than this merges runs of bars narrower than a pixel (and says so on the chart):
a million-event trace would otherwise draw a million rectangles (a 62 MB SVG)."""
TIMELINE_PLOT_PX = TIMELINE_WIDTH_IN * DPI * 0.8
"""About how many pixels wide the timeline's plot area is."""


@dataclass(frozen=True)
class DrawnBar:
    """A bar as drawn: its row, lane, span, and the name to label it with (None: merged, unlabelled)."""

    row: int
    lane: Lane
    start_us: float
    duration_us: float
    name: str | None


RowKey = tuple[Lane, str, int]
"""A timeline row: (lane, track, depth); the track is a thread or stream (analysis.TimelineTrack.key)."""


def timeline_bars(layout: TimelineLayout, row_of: dict[RowKey, int],
                  max_bars: int = MAX_TIMELINE_BARS) -> tuple[list[DrawnBar], str]:
    """The bars to draw and a note for the chart ('' when every event is drawn as its own bar, on its own track)."""
    drawn, notes = _bars_and_notes(layout, row_of, max_bars)
    return drawn, " · ".join(notes)


def _bars_and_notes(layout: TimelineLayout, row_of: dict[RowKey, int],
                    max_bars: int) -> tuple[list[DrawnBar], list[str]]:
    """The bars to draw and the chart's notes on what is not drawn one bar per event.

    Calls nested deeper than MAX_DEPTH are not drawn (they lie inside the last row's bar). Up to
    ``max_bars`` bars are drawn as they are. Beyond, in each row, neighbouring bars narrower than a
    pixel (less than a pixel apart) become one unlabelled bar; if that still leaves more than
    ``max_bars``, the widest are drawn and the rest left out, and the note says how many.
    """
    bars = [DrawnBar(row_of[(b.lane, b.track, b.depth)], b.lane, b.start_us, b.duration_us, b.name or None)
            for b in layout.bars if not b.folded]
    notes = [f"{t.title}: one row, busy when any of them is" for t in layout.tracks if t.key == FOLDED_TRACK]
    deep = len(layout.bars) - len(bars)
    if deep:
        notes.append(f"{deep:,} calls nested deeper than {MAX_DEPTH} levels not drawn")
    if len(bars) <= max_bars or not layout.window_us > 0:
        return bars, notes
    pixel_us = layout.window_us / TIMELINE_PLOT_PX
    merged: list[DrawnBar] = []
    for bar in sorted(bars, key=lambda b: (b.row, b.start_us)):
        last = merged[-1] if merged else None
        narrow = bar.duration_us < pixel_us
        if (last is not None and narrow and last.name is None and last.row == bar.row
                and last.lane == bar.lane and bar.start_us - (last.start_us + last.duration_us) < pixel_us):
            end = max(last.start_us + last.duration_us, bar.start_us + bar.duration_us)
            merged[-1] = DrawnBar(last.row, last.lane, last.start_us, end - last.start_us, None)
        else:
            merged.append(bar if not narrow else DrawnBar(bar.row, bar.lane, bar.start_us, bar.duration_us, None))
    note = f"{len(bars):,} events drawn as {len(merged):,} bars (runs of bars narrower than a pixel merged)"
    if len(merged) > max_bars:
        left_out = len(merged) - max_bars
        merged = sorted(sorted(merged, key=lambda b: -b.duration_us)[:max_bars], key=lambda b: (b.row, b.start_us))
        note = (f"{len(bars):,} events: the {max_bars:,} widest bars drawn, {left_out:,} narrower ones left out "
                "(runs of bars narrower than a pixel merged)")
    return merged, [note, *notes]


def drawn_extents(drawn: Sequence[DrawnBar], min_width_us: float) -> list[tuple[float, float]]:
    """Each bar's drawn span: at least ``min_width_us`` wide (a zero-length event stays visible), but never
    reaching into the next bar of its row."""
    next_start: dict[int, float] = {}
    ends = [0.0] * len(drawn)
    for i in sorted(range(len(drawn)), key=lambda i: (drawn[i].row, -drawn[i].start_us)):
        bar = drawn[i]
        end = bar.start_us + bar.duration_us
        ends[i] = max(end, min(bar.start_us + min_width_us, next_start.get(bar.row, math.inf)))
        next_start[bar.row] = bar.start_us
    return [(b.start_us, e) for b, e in zip(drawn, ends, strict=True)]


def _time_axis(tf: _TimelineFigure, window_us: float) -> None:
    """Vertical grid lines at round times, and their labels under the axes."""
    ticks, decimals = nice_ticks(window_us, TIMELINE_X_TICKS)
    tf.ax.add_collection(LineCollection([[(t, 0.0), (t, 1.0)] for t in ticks], colors="#e5e5e5", linewidths=0.6,
                                        transform=tf.ax.get_xaxis_transform(), zorder=0.5), autolim=False)
    for t in ticks:
        tf.ax.text(t, 0, f"{t:,.{decimals}f}", transform=tf.x_labels, ha="center", va="top")


def _lane_bands(ax: Axes, layout: TimelineLayout) -> None:
    """Shade every other lane so its rows read as one lane; a faint line between two tracks of one lane."""
    first = 0
    lines = []
    for i, lane in enumerate(layout.lanes):
        tracks = [t for t in layout.tracks if t.lane is lane]
        rows = sum(t.depth for t in tracks)
        if i % 2:
            ax.axhspan(first - 0.5, first + rows - 0.5, color="#f3f4f6", zorder=0)
        y = first
        for t in tracks[:-1]:
            y += t.depth
            lines.append([(0.0, y - 0.5), (1.0, y - 0.5)])
        first += rows
    if lines:
        ax.add_collection(LineCollection(lines, colors="#c8c8c8", linewidths=0.5, linestyles="dotted",
                                         transform=ax.get_yaxis_transform(), zorder=0.6), autolim=False)


def _row_labels(layout: TimelineLayout) -> list[str]:
    """Each row's label: the track's (lane · thread or stream) on its first row, the level below on the others."""
    return [_clip_label(t.title, MAX_ROW_LABEL_CHARS) if d == 0
            else (f"↳ overlap {d}" if t.lane is Lane.DEVICE else f"↳ depth {d}")
            for t in layout.tracks for d in range(t.depth)]


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
    ax.text(start_us + duration_us / 2, y, svg_text(text), ha="center", va="center", fontsize=6.5, color="white",
            clip_on=True)
    return True


SWEEP_WIDTH_IN = 7.5
SWEEP_HEIGHT_IN = 4.2
ROOF_COLOUR = "#555555"


def _log_axes(ax: Axes, x_label: str, y_label: str) -> None:
    """Both axes log scale with plain-number tick labels (no mathtext: text.parse_math is off)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(_si_tick))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(True, which="major", color="#e5e5e5", lw=0.6)


def _si_tick(value: float, _pos: object = None) -> str:
    """A log tick in SI steps: 1k, 10M, 1G, 0.1."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def _legend_right(fig: Figure, ax: Axes, names: Sequence[str]) -> None:
    legend_in = max((len(_clip_label(n)) for n in names), default=0) * LEGEND_FONT_PT / 72 * CHAR_WIDTH_EM
    fig.subplots_adjust(left=0.85 / SWEEP_WIDTH_IN, right=1 - (0.5 + legend_in) / SWEEP_WIDTH_IN,
                        top=1 - 0.4 / SWEEP_HEIGHT_IN, bottom=0.7 / SWEEP_HEIGHT_IN)
    ax.legend(fontsize=LEGEND_FONT_PT, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def scaling_chart(view: SweepView, path: Path, title: str) -> None:
    """Achieved bandwidth against bytes moved per call (log-log), one line per variant, the ceilings drawn.

    The memory roofs (the best copy bandwidth measured in each memory level) are dashed horizontal lines;
    the cache sizes are faint vertical lines, so each point shows which level its data lives in.
    """
    with _figure(SWEEP_WIDTH_IN, SWEEP_HEIGHT_IN) as fig:
        ax = fig.subplots(1, 1)
        rows = [r for r in view.rows if r.bytes_per_call > 0]
        for k, roof in enumerate(view.memory_roofs):
            ax.axhline(roof.bandwidth_bytes_per_s, color=ROOF_COLOUR, lw=1.0, ls=("--", ":", "-.", "-")[k % 4],
                       label=f"{roof.label} roof {roof.bandwidth_bytes_per_s / 1e9:.3g} GB/s")
        for i, name in enumerate(view.variants):
            pts = [(r.bytes_per_call, c.achieved_bytes_per_s) for r in rows
                   if (c := r.cell(name)) is not None and c.achieved_bytes_per_s]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, lw=1.4, color=colour_for(i),
                        label=_clip_label(name))
        if rows:
            lo, hi = min(r.bytes_per_call for r in rows) / 2, max(r.bytes_per_call for r in rows) * 2
            ax.set_xlim(lo, hi)
            for level in view.cache_levels:
                if lo < level.size_bytes < hi:
                    ax.axvline(level.size_bytes, color="#bbbbbb", lw=0.8)
                    ax.annotate(f"{level.name} size", (level.size_bytes, 1.0), xycoords=("data", "axes fraction"),
                                xytext=(2, -10), textcoords="offset points", fontsize=7, color="#777777")
        _log_axes(ax, "bytes moved per call (minimum traffic, log)", "achieved bandwidth, B/s (log)")
        ax.set_title(svg_text(title), fontsize=10, loc="left")
        labels = [f"{r.label} roof {r.bandwidth_bytes_per_s / 1e9:.3g} GB/s" for r in view.memory_roofs]
        _legend_right(fig, ax, [*labels, *view.variants])
        _save(fig, path)


def roofline_chart(view: SweepView, path: Path, title: str) -> None:
    """Arithmetic intensity against achieved FLOP/s (log-log): each variant × shape a point, the roofs drawn.

    Memory roofs are lines of slope 1 (FLOP/s = intensity × bandwidth), one per memory level; the
    compute roof is horizontal. Where both are known the memory roofs stop at the compute roof.
    """
    with _figure(SWEEP_WIDTH_IN, SWEEP_HEIGHT_IN) as fig:
        ax = fig.subplots(1, 1)
        points = [(r.arithmetic_intensity, c.achieved_flops_per_s, i)
                  for r in view.rows if r.arithmetic_intensity
                  for i, name in enumerate(view.variants)
                  if (c := r.cell(name)) is not None and c.achieved_flops_per_s]
        intensities = [p[0] for p in points] or [1.0]
        lo, hi = min(intensities) / 4, max(max(intensities) * 4, 1.0)
        if view.compute_roof_flops_per_s:
            hi = max(hi, 4 * view.compute_roof_flops_per_s / max(r.bandwidth_bytes_per_s for r in view.memory_roofs)
                     if view.memory_roofs else hi)
        xs = [lo * (hi / lo) ** (k / 60) for k in range(61)]
        top = view.compute_roof_flops_per_s or float("inf")
        for k, roof in enumerate(view.memory_roofs):
            ax.plot(xs, [min(x * roof.bandwidth_bytes_per_s, top) for x in xs], color=ROOF_COLOUR, lw=1.0,
                    ls=("-", "--", ":", "-.")[k % 4], label=f"{roof.label} roof {roof.bandwidth_bytes_per_s / 1e9:.3g} GB/s")
        if view.compute_roof_flops_per_s:
            ax.axhline(view.compute_roof_flops_per_s, color="#222222", lw=1.2,
                       label=f"compute roof {view.compute_roof_flops_per_s / 1e9:.3g} GFLOP/s")
        for i, name in enumerate(view.variants):
            mine = [(x, y) for x, y, j in points if j == i]
            if mine:
                ax.scatter([m[0] for m in mine], [m[1] for m in mine], s=18, color=colour_for(i), zorder=3,
                           label=_clip_label(name))
        _log_axes(ax, "arithmetic intensity, FLOP per byte moved (log)", "achieved FLOP/s (log)")
        ax.set_xlim(lo, hi)
        ax.set_title(svg_text(title), fontsize=10, loc="left")
        labels = [f"{r.label} roof {r.bandwidth_bytes_per_s / 1e9:.3g} GB/s" for r in view.memory_roofs]
        _legend_right(fig, ax, [*labels, "compute roof 000 GFLOP/s", *view.variants])
        _save(fig, path)
