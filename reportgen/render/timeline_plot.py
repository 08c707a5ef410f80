"""Timeline snapshots (SVG): one iteration's bars on a track per host thread and per device stream.

Drawn on one reused matplotlib figure under the fixed style; past MAX_TIMELINE_BARS bars, runs of bars
narrower than a pixel are merged (and the chart says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib import transforms
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure

from reportgen.analysis.timeline import FOLDED_TRACK, MAX_DEPTH, TimelineLayout
from reportgen.devices.lanes import Lane
from reportgen.model.breakdown import COMMUNICATION_RE
from reportgen.render.drawing import DPI, chart_style
from reportgen.render.style import clip_label, nice_ticks, svg_text, text_width_px

LANE_COLOURS = {
    Lane.FRAMEWORK: "#4C72B0",
    Lane.RUNTIME: "#DD8452",
    Lane.DEVICE: "#55A868",
    Lane.OTHER: "#8C8C8C",
}
COMMUNICATION_COLOUR = "#C44E52"
"""Device kernels of a collective communication library (model.breakdown.COMMUNICATION_RE), apart from compute."""
COMMUNICATION_NOTE = "communication kernels (NCCL, RCCL, MSCCL, c10d, Gloo) in red, compute in green"


@dataclass(frozen=True)
class Margins:
    """Fixed margins around the axes, in inches: cheaper than ``tight_layout`` (which draws every text twice)."""

    left_in: float
    right_in: float
    top_in: float
    bottom_in: float


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
MAX_ROW_LABEL_CHARS = 42
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
    with chart_style():
        tf = _timeline_figure()
        ax = tf.reset(1.0 + TIMELINE_ROW_IN * n_rows + 0.6 + extra_in, _left_margin_in(labels),
                      TIMELINE_MARGINS.bottom_in + extra_in)
        _lane_bands(ax, layout)
        _draw_bars(ax, drawn, layout.window_us)
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
        tf.fig.savefig(path, format="svg", metadata=SVG_METADATA)  # missing glyphs: see chart_style


def _draw_bars(ax: Axes, drawn: Sequence[DrawnBar], window_us: float) -> None:
    """The bars as one collection, each op's name inside its bar where it fits (one label at a time per row)."""
    label_end: dict[int, float] = {}
    boxes, colours, edges = [], [], []
    pixel_us = window_us / TIMELINE_PLOT_PX
    for bar, (x0, x1) in zip(drawn, drawn_extents(drawn, window_us * 0.0015), strict=True):
        y = bar.row
        boxes.append([(x0, y - 0.4), (x0, y + 0.4), (x1, y + 0.4), (x1, y - 0.4)])
        colours.append(bar_colour(bar))
        # A white edge separates neighbours, but would wash a bar of a pixel or two out to a pale line.
        edges.append("white" if x1 - x0 >= 3 * pixel_us else bar_colour(bar))
        if bar.name is not None and bar.start_us >= label_end.get(y, -1.0):
            if _label_bar(ax, bar.name, bar.start_us, bar.duration_us, y, window_us, TIMELINE_WIDTH_IN):
                label_end[y] = bar.start_us + bar.duration_us
    # One collection for all bars: one artist to draw instead of one per bar.
    ax.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors=edges, linewidths=0.4), autolim=False)


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
    communication: bool = False  # a device kernel of a collective communication library


def bar_colour(bar: DrawnBar) -> str:
    """Its lane's colour; communication kernels apart from compute ones."""
    return COMMUNICATION_COLOUR if bar.communication else LANE_COLOURS[bar.lane]


def _is_communication(lane: Lane, name: str) -> bool:
    return lane is Lane.DEVICE and COMMUNICATION_RE.search(name) is not None


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
    bars = [DrawnBar(row_of[(b.lane, b.track, b.depth)], b.lane, b.start_us, b.duration_us, b.name or None,
                     _is_communication(b.lane, b.name)) for b in layout.bars if not b.folded]
    notes = [f"{t.title}: one row, busy when any of them is" for t in layout.tracks if t.key == FOLDED_TRACK]
    if any(b.communication for b in bars):
        notes.append(COMMUNICATION_NOTE)
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
            merged[-1] = DrawnBar(last.row, last.lane, last.start_us, end - last.start_us, None,
                                  last.communication and bar.communication)
        else:
            merged.append(bar if not narrow else DrawnBar(bar.row, bar.lane, bar.start_us, bar.duration_us, None,
                                                          bar.communication))
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
    return [clip_label(t.title, MAX_ROW_LABEL_CHARS) if d == 0
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
