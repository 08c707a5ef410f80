"""Timeline snapshots (SVG): one iteration's bars on a track per host thread and per device stream.

Laid out here in pixels and drawn by ``templates/charts/timeline.svg``, like the bar and history charts: a run
page is drawn without matplotlib (whose import and drawing were most of the cost of adding one run to a site).
Every named bar carries a tooltip (its op, duration and start); past MAX_TIMELINE_BARS bars, runs of bars
narrower than a pixel are merged (and the chart says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reportgen.analysis.timeline import FOLDED_TRACK, MAX_DEPTH, TimelineLayout
from reportgen.devices.lanes import Lane
from reportgen.model.breakdown import COMMUNICATION_RE
from reportgen.render.jinja import render_html
from reportgen.render.style import CHAR_WIDTH_EM, XTick, clip_label, nice_ticks, px, svg_text, text_width_px

LANE_COLOURS = {
    Lane.FRAMEWORK: "#4C72B0",
    Lane.RUNTIME: "#DD8452",
    Lane.DEVICE: "#55A868",
    Lane.OTHER: "#8C8C8C",
}
COMMUNICATION_COLOUR = "#C44E52"
"""Device kernels of a collective communication library (model.breakdown.COMMUNICATION_RE), apart from compute."""
COMMUNICATION_NOTE = "communication kernels (NCCL, RCCL, MSCCL, c10d, Gloo) in red, compute in green"

WIDTH_PX = 1100
"""The page shows a timeline 1,100 px wide."""
LEFT_PX, RIGHT_PX, TOP_PX, BOTTOM_PX = 110.0, 45.0, 40.0, 50.0
"""Margins around the plot box; the left one grows to fit the row labels (up to MAX_LEFT_PX)."""
MAX_LEFT_PX = 280.0
ROW_PX = 32.0
BAR_HEIGHT_PX = 25.6
ROW_LABEL_PX = 11.0
BAR_LABEL_PX = 9.0
TICK_LABEL_PX = 11.0
X_TICKS = 8
MAX_ROW_LABEL_CHARS = 42
"""Row labels (lane · thread or stream) longer than this are shortened; the left margin grows to fit the rest."""
NOTE_LINE_PX = 17.0
NOTE_LINE_CHARS = 130
"""Notes under the time axis are packed into lines of at most about this many characters."""


@dataclass(frozen=True)
class SvgBar:
    """A bar in pixels, its fill and edge, its label inside (or empty) and its tooltip (or empty)."""

    x_px: float
    y_px: float
    width_px: float
    fill: str
    edge: str
    label: str
    label_x_px: float
    tooltip: str


@dataclass(frozen=True)
class RowLabel:
    y_px: float
    text: str
    colour: str


@dataclass(frozen=True)
class TimelineChart:
    """Everything ``templates/charts/timeline.svg`` draws, in pixels."""

    title: str
    width_px: int
    height_px: int
    left_px: float
    right_px: float
    top_px: float
    bottom_px: float
    bands: tuple[tuple[float, float], ...]
    """(top, height) of every other lane's shaded band."""
    separators: tuple[float, ...]
    """Heights of the dotted lines between two tracks of one lane."""
    ticks: tuple[XTick, ...]
    rows: tuple[RowLabel, ...]
    bars: tuple[SvgBar, ...]
    x_label: tuple[str, ...]
    """The time axis's label, then the notes, one line each."""
    x_label_x_px: float
    empty: bool
    bar_height_px: float = BAR_HEIGHT_PX
    row_label_px: float = ROW_LABEL_PX
    bar_label_px: float = BAR_LABEL_PX
    tick_label_px: float = TICK_LABEL_PX
    note_line_px: float = NOTE_LINE_PX


def _note_lines(notes: Sequence[str]) -> list[str]:
    """``notes`` packed into lines, ' · ' between two notes of a line; a note is never split."""
    lines: list[str] = []
    for note in notes:
        if lines and len(lines[-1]) + 3 + len(note) <= NOTE_LINE_CHARS:
            lines[-1] += " · " + note
        else:
            lines.append(note)
    return lines


def _left_margin_px(labels: Sequence[str]) -> float:
    """Room for the longest row label, at least the default margin."""
    widest = max((text_width_px(label, ROW_LABEL_PX) for label in labels), default=0.0)
    return min(max(LEFT_PX, widest + 20.0), MAX_LEFT_PX)


def timeline_drawing(layout: TimelineLayout, title: str) -> TimelineChart:
    """One iteration in pixels: a track per host thread and per device stream, each labelled, nested calls (and
    overlapping events of one stream) one row lower, names inside bars where they fit."""
    rows = list(layout.rows)
    n_rows = max(len(rows), 1)
    labels = _row_labels(layout)
    drawn, notes = _bars_and_notes(layout, {key: i for i, key in enumerate(rows)}, MAX_TIMELINE_BARS)
    lines = (f"time since the start of {layout.step_name or 'the trace'} (µs)", *_note_lines(notes))
    left = _left_margin_px(labels)
    right = WIDTH_PX - RIGHT_PX
    bottom = TOP_PX + ROW_PX * n_rows
    height = bottom + BOTTOM_PX + NOTE_LINE_PX * (len(lines) - 1)
    window = layout.window_us if layout.window_us > 0 else 1.0
    scale = (right - left) / window
    ticks, decimals = nice_ticks(layout.window_us, X_TICKS)
    return TimelineChart(
        svg_text(title), WIDTH_PX, math.ceil(height), left, right, TOP_PX, bottom,
        *_lane_lines(layout),
        tuple(XTick(px(left + t * scale), f"{t:,.{decimals}f}") for t in ticks),
        tuple(RowLabel(px(TOP_PX + ROW_PX * (y + 0.5)), svg_text(label),
                       "#777777" if label.startswith("↳") else "#222222") for y, label in enumerate(labels)),
        _svg_bars(drawn, layout.window_us, left, scale),
        tuple(svg_text(line) for line in lines),
        WIDTH_PX / 2 if len(lines) > 1 else (left + right) / 2,
        not layout.bars)


def timeline_chart(layout: TimelineLayout, path: Path, title: str) -> None:
    """Write the timeline of ``layout`` as SVG through ``templates/charts/timeline.svg`` (every text escaped)."""
    chart = timeline_drawing(layout, title)
    path.write_text(render_html("charts/timeline.svg", chart=chart), encoding="utf-8")


def _svg_bars(drawn: Sequence[DrawnBar], window_us: float, left: float, scale: float) -> tuple[SvgBar, ...]:
    """The bars in pixels, each op's name inside its bar where it fits (one label at a time per row)."""
    label_end: dict[int, float] = {}
    out = []
    for bar, (x0, x1) in zip(drawn, drawn_extents(drawn, window_us * 0.0015), strict=True):
        width = (x1 - x0) * scale
        label = ""
        if bar.name is not None and bar.start_us >= label_end.get(bar.row, -1.0):
            label = _bar_label(bar.name, bar.duration_us * scale)
            if label:
                label_end[bar.row] = bar.start_us + bar.duration_us
        colour = bar_colour(bar)
        tooltip = "" if bar.name is None else svg_text(
            f"{bar.name}: {bar.duration_us:,.3f} µs, from {bar.start_us:,.3f} µs")
        # A white edge separates neighbours, but would wash a bar of a pixel or two out to a pale line.
        out.append(SvgBar(px(left + x0 * scale), px(TOP_PX + ROW_PX * bar.row + (ROW_PX - BAR_HEIGHT_PX) / 2),
                          max(px(width), 0.1), colour, "#ffffff" if width >= 3 else colour, label,
                          px(left + (bar.start_us + bar.duration_us / 2) * scale), tooltip))
    return tuple(out)


def _bar_label(name: str, width_px: float) -> str:
    """The op name to write inside a bar ``width_px`` wide: whole, else its last ``::`` part, else shortened;
    empty when not even three characters fit."""
    max_chars = int(width_px / (BAR_LABEL_PX * CHAR_WIDTH_EM)) - 1
    if max_chars < 3:
        return ""
    short = name.rsplit("::", 1)[-1] or name
    if len(name) <= max_chars:
        return svg_text(name)
    if len(short) <= max_chars:
        return svg_text(short)
    return svg_text(short[: max_chars - 1] + "…") if max_chars >= 5 else ""


MAX_TIMELINE_BARS = 2000
"""A timeline with more bars than this merges runs of bars narrower than a pixel (and says so on the chart):
a million-event trace would otherwise draw a million rectangles (a 62 MB SVG)."""
TIMELINE_PLOT_PX = WIDTH_PX - LEFT_PX - RIGHT_PX
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


def _lane_lines(layout: TimelineLayout) -> tuple[tuple[tuple[float, float], ...], tuple[float, ...]]:
    """Every other lane shaded, so its rows read as one lane: (top, height) in pixels; and the heights of a faint
    line between two tracks of one lane."""
    bands, lines, first = [], [], 0
    for i, lane in enumerate(layout.lanes):
        tracks = [t for t in layout.tracks if t.lane is lane]
        rows = sum(t.depth for t in tracks)
        if i % 2:
            bands.append((TOP_PX + ROW_PX * first, ROW_PX * rows))
        y = first
        for t in tracks[:-1]:
            y += t.depth
            lines.append(TOP_PX + ROW_PX * y)
        first += rows
    return tuple(bands), tuple(lines)


def _row_labels(layout: TimelineLayout) -> list[str]:
    """Each row's label: the track's (lane · thread or stream) on its first row, the level below on the others."""
    return [clip_label(t.title, MAX_ROW_LABEL_CHARS) if d == 0
            else (f"↳ overlap {d}" if t.lane is Lane.DEVICE else f"↳ depth {d}")
            for t in layout.tracks for d in range(t.depth)]
