"""The lane layout of a timeline snapshot: one representative iteration's events as tracks, rows and bars.

Pure layout, no matplotlib: a track per host thread and per device stream, nested calls a row lower, and
the threads or streams beyond a lane's row budget folded into one row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reportgen.devices.lanes import Lane

LANE_TITLES = {
    Lane.FRAMEWORK: "framework ops",
    Lane.RUNTIME: "runtime",
    Lane.DEVICE: "device",
    Lane.OTHER: "other",
}
TRACK_WORDS = {Lane.FRAMEWORK: "thread", Lane.RUNTIME: "thread", Lane.DEVICE: "stream", Lane.OTHER: "track"}
"""What one track of a lane is: host lanes have a track per thread, the device lane one per stream."""
MAX_DEPTH = 6
"""Nesting levels drawn per track; calls nested deeper are not drawn (the chart says how many)."""
LANE_ROW_BUDGET = {Lane.FRAMEWORK: 13, Lane.RUNTIME: 7, Lane.DEVICE: 13, Lane.OTHER: 7}
"""Rows a lane may take (each more than MAX_DEPTH): a lane with more threads or streams than fit keeps the busiest
and draws the rest on one "other threads/streams" row, so a chart is at most 40 rows high."""
FOLDED_TRACK = "*"
"""The key of a lane's one-row track for the threads or streams that did not get their own: it shows when any of
them was busy (the union of their events, unlabelled bars with an empty name)."""


class EventLike(Protocol):
    """The fields of reportgen.traces.reader.TraceEvent that the layout needs."""

    @property
    def name(self) -> str: ...
    @property
    def lane(self) -> str: ...
    @property
    def start_us(self) -> float: ...
    @property
    def duration_us(self) -> float: ...
    @property
    def pid(self) -> str: ...
    @property
    def tid(self) -> str: ...
    @property
    def correlation(self) -> int | None: ...


@dataclass(frozen=True)
class TimelineBar:
    """One bar: lane, nesting depth, time relative to the window start, and the track (thread or stream) it is on.

    Its row is (lane, track, depth); no two bars of one row overlap in time.
    """

    lane: Lane
    depth: int
    start_us: float
    duration_us: float
    name: str
    folded: bool = False
    """True when the call is nested deeper than MAX_DEPTH: it is not drawn (its depth is MAX_DEPTH - 1)."""
    track: str = ""


@dataclass(frozen=True)
class TimelineTrack:
    """One thread (host lanes) or stream (device lane) of a lane: its rows and the label of its first row."""

    lane: Lane
    key: str
    """``pid/tid`` from the trace, or FOLDED_TRACK for a lane's threads or streams drawn together."""
    title: str
    depth: int
    """Rows it takes: nested calls, and overlapping events of one stream, go one row lower."""
    members: int = 1
    """Threads or streams drawn on it (more than one only on a folded track)."""


@dataclass(frozen=True)
class TimelineLayout:
    """Bars of one representative iteration, ready to draw, and the tracks (threads, streams) they lie on."""

    window_start_us: float
    window_us: float
    step_name: str
    bars: tuple[TimelineBar, ...]
    tracks: tuple[TimelineTrack, ...]
    event_count: int

    @property
    def rows(self) -> tuple[tuple[Lane, str, int], ...]:
        """Every row top to bottom, keyed (lane, track, depth)."""
        return tuple((t.lane, t.key, d) for t in self.tracks for d in range(t.depth))

    @property
    def lanes(self) -> tuple[Lane, ...]:
        """The lanes that have events, top to bottom."""
        return tuple(dict.fromkeys(t.lane for t in self.tracks))


def _lane_of(ev: EventLike) -> Lane:
    value = getattr(ev.lane, "value", ev.lane)
    try:
        return Lane(value)
    except ValueError:
        return Lane.OTHER


def _encloses(ev: EventLike, start_us: float, end_us: float) -> bool:
    """True for a wrapper event (the profiler's own span) that starts before and ends after the window."""
    return ev.start_us < start_us and ev.start_us + ev.duration_us > end_us


def _natural(text: str) -> tuple[int, int, str]:
    """Sort key: numbers by value (``7`` before ``20``), then other text."""
    try:
        return (0, int(text), "")
    except ValueError:
        return (1, 0, text)


def _stack_depths(events: Sequence[EventLike]) -> list[int]:
    """The row of each event (sorted by start) on one track: calls nested in, or overlapping, an open one go lower.

    An event goes to the first row whose events have all ended by its start (the open events form a stack),
    so no two events of a row overlap. Depth MAX_DEPTH and more means "too deep to draw".
    """
    stack: list[float] = []
    depths = []
    for ev in events:
        while stack and stack[-1] <= ev.start_us:
            stack.pop()
        depths.append(len(stack))
        stack.append(ev.start_us + ev.duration_us)
    return depths


def _rows_of(depths: Sequence[int]) -> int:
    return min(max(depths, default=-1) + 1, MAX_DEPTH)


def _track_key(pid: str, tid: str) -> str:
    """``pid/tid``, a ``/`` or ``\\`` in either escaped so two tracks never share a key."""
    return "/".join(t.replace("\\", "\\\\").replace("/", "\\/") for t in (pid, tid))


@dataclass(frozen=True)
class TrackNames:
    """Kineto's ``thread_name`` and ``process_name`` metadata of a trace, by (pid, tid) and by pid."""

    threads: Mapping[tuple[str, str], str] = field(default_factory=dict)
    processes: Mapping[str, str] = field(default_factory=dict)

    def titled(self, title: str, pid: str, tid: str, pids: int) -> str:
        """``title`` with the thread's name where the trace names it (Kineto's ``thread 1234 (python3)`` in place
        of ``thread 1234``), and the process's name when the lane spans processes."""
        thread = self.threads.get((pid, tid))
        if thread and tid and tid in thread:  # Kineto's "thread 1234 (python3)", "stream 7": it replaces ours
            title = f"{title.rsplit(' · ', 1)[0]} · {thread}"
        elif thread and thread not in title:
            title = f"{title} ({thread})"
        process = self.processes.get(pid) if pids > 1 else None
        return f"{title} · {process}" if process and process not in title else title


def _track_title(lane: Lane, pid: str, tid: str, pids: int) -> str:
    """``framework ops · thread 1234``, ``device · stream 7`` (``device 1 · stream 7`` when the lane spans pids)."""
    word = TRACK_WORDS[lane]
    head = LANE_TITLES[lane] if pids == 1 else (f"device {pid}" if lane is Lane.DEVICE else f"{LANE_TITLES[lane]} · pid {pid}")
    number = _natural(tid)[0] == 0
    if lane is Lane.DEVICE and number and int(tid) < 0:
        return f"{head} · all streams"  # Kineto's tid -1: device-wide events (a context synchronisation)
    return f"{head} · {word} {tid}" if number else f"{head} · {tid}"


def _fit_tracks(lane: Lane, ranked: list[tuple[str, str]], depths: dict[tuple[str, str], list[int]]) -> int:
    """How many of ``ranked`` (busiest first) get tracks of their own: as many as fit the lane's row budget
    beside the one row that shows the rest's busy time."""
    budget = LANE_ROW_BUDGET[lane]
    rows = [_rows_of(depths[k]) for k in ranked]
    for kept in range(len(ranked), -1, -1):
        if sum(rows[:kept]) + (kept < len(ranked)) <= budget:
            return kept
    return 0


def _merged_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``spans`` as disjoint spans, in time order (spans that only touch stay apart)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _order(ev: EventLike) -> tuple[float, float, str]:
    return (ev.start_us, -ev.duration_us, ev.name)


def timeline_layout(events: Sequence[EventLike], window_start_us: float, window_end_us: float,
                    step_name: str = "", names: TrackNames | None = None) -> TimelineLayout:
    """Lay out the events overlapping the window: a track per thread (host lanes) and per stream (device lane),
    calls nested (or overlapping) on one track a row lower, no two bars of a row over each other."""
    span = max(window_end_us - window_start_us, 1e-9)
    inside = sorted((e for e in events if e.start_us < window_end_us and e.start_us + e.duration_us > window_start_us
                     and not _encloses(e, window_start_us, window_end_us) and not e.name.startswith("ProfilerStep#")),
                    key=_order)
    by_track: dict[Lane, dict[tuple[str, str], list[EventLike]]] = {}
    for ev in inside:
        by_track.setdefault(_lane_of(ev), {}).setdefault((str(ev.pid), str(ev.tid)), []).append(ev)
    tracks: list[TimelineTrack] = []
    bars: list[TimelineBar] = []
    for lane in Lane:
        lane_events = by_track.get(lane)
        if not lane_events:
            continue
        lane_tracks, lane_bars = _lane_layout(lane, lane_events, window_start_us, window_end_us,
                                              names or TrackNames())
        tracks.extend(lane_tracks)
        bars.extend(lane_bars)
    bars.sort(key=lambda b: (b.start_us, -b.duration_us))  # stable: time order, lanes top to bottom at a tie
    return TimelineLayout(window_start_us, span, step_name, tuple(bars), tuple(tracks), len(inside))


def _lane_layout(lane: Lane, lane_events: dict[tuple[str, str], list[EventLike]], window_start_us: float,
                 window_end_us: float, names: TrackNames) -> tuple[list[TimelineTrack], list[TimelineBar]]:
    """One lane's tracks and bars: the busiest threads or streams that fit its row budget, the rest on one row."""
    depths = {k: _stack_depths(evs) for k, evs in lane_events.items()}
    busy = {k: sum(min(e.start_us + e.duration_us, window_end_us) - max(e.start_us, window_start_us)
                   for e, d in zip(evs, depths[k], strict=True) if d == 0)
            for k, evs in lane_events.items()}
    ranked = sorted(lane_events, key=lambda k: (-busy[k], _natural(k[0]), _natural(k[1])))
    n_kept = _fit_tracks(lane, ranked, depths)
    pids = len({pid for pid, _ in ranked})
    tracks: list[TimelineTrack] = []
    bars: list[TimelineBar] = []
    for pid, tid in sorted(ranked[:n_kept], key=lambda k: (_natural(k[0]), _natural(k[1]))):
        key = _track_key(pid, tid)
        tracks.append(TimelineTrack(lane, key, names.titled(_track_title(lane, pid, tid, pids), pid, tid, pids),
                                    _rows_of(depths[(pid, tid)])))
        for ev, depth in zip(lane_events[(pid, tid)], depths[(pid, tid)], strict=True):
            start, duration = _clipped(ev, window_start_us, window_end_us)
            bars.append(TimelineBar(lane, min(depth, MAX_DEPTH - 1), start, duration, ev.name, depth >= MAX_DEPTH,
                                    key))
    rest = ranked[n_kept:]
    if rest:  # one row of when any of the rest was busy: the union of their events, unlabelled
        title = f"{LANE_TITLES[lane]} · {len(rest)} {'other ' if n_kept else ''}{TRACK_WORDS[lane]}s"
        tracks.append(TimelineTrack(lane, FOLDED_TRACK, title, 1, len(rest)))
        spans = [_clipped(ev, window_start_us, window_end_us) for k in rest for ev in lane_events[k]]
        bars.extend(TimelineBar(lane, 0, a, b - a, "", False, FOLDED_TRACK)
                    for a, b in _merged_spans([(start, start + duration) for start, duration in spans]))
    return tracks, bars


def _clipped(ev: EventLike, window_start_us: float, window_end_us: float) -> tuple[float, float]:
    """Start (from the window's start) and duration of the part of ``ev`` inside the window."""
    start = max(ev.start_us, window_start_us) - window_start_us
    end = min(ev.start_us + ev.duration_us, window_end_us) - window_start_us
    return start, max(end - start, 0.0)


def iteration_window(events: Sequence[EventLike], start_us: float, end_us: float) -> tuple[float, float]:
    """A host step's window, cut to where its events end and extended to the device work it launched.

    Device work runs asynchronously and often finishes after the host step ends; without the
    extension the snapshot would cut off the kernels the step launched. A step that idles long
    after its last event (a first step that waited on compilation) is cut so the ops stay readable.
    """
    inside = [e for e in events if start_us <= e.start_us < end_us and not e.name.startswith("ProfilerStep#")]
    launched = {e.correlation for e in inside if _lane_of(e) is Lane.RUNTIME and e.correlation is not None}
    device_ends = [e.start_us + e.duration_us for e in events
                   if _lane_of(e) is Lane.DEVICE and e.correlation is not None and e.correlation in launched]
    content_end = max((e.start_us + e.duration_us for e in inside), default=end_us)
    return start_us, max([min(content_end, end_us), *device_ends])


def representative_step(steps: Sequence[EventLike]) -> EventLike | None:
    """The profiler step of median duration (the last of equal ones): a typical iteration."""
    if not steps:
        return None
    ordered = sorted(range(len(steps)), key=lambda i: (steps[i].duration_us, i))
    return steps[ordered[len(ordered) // 2]]
