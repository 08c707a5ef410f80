"""Normalising a trace's events: decoded event dicts validated and made compact ``TraceEvent``s, then the ``Trace``.

``B``/``E`` pairs are matched per thread, flows bound to launches that lack a correlation id, each event's
lane found from its category, and the device-kind hint taken from the evidence in the trace.
"""

from __future__ import annotations

import math
import re
from operator import attrgetter
from typing import Any

from reportgen.devices import device_hint
from reportgen.devices.lanes import Lane
from reportgen.devices.spec import TraceFacts
from reportgen.errors import TraceError
from reportgen.text.documents import depth_within
from reportgen.traces.events import Trace, TraceEvent, is_device_work, lane_of

_SURROGATE = re.compile("[\ud800-\udfff]")
"""Lone surrogates (from \\ud800-style escapes) are not text: replaced like NUL."""
MAX_SHAPES_PER_OP = 4
MAX_DIMS_DEPTH = 8
"""``Input Dims`` nested deeper than this are no shapes (a tensor list's dims nest 3 levels): not kept, so that
comparing and printing them cannot recurse without bound."""
"""Distinct input shapes kept per host op name; more are shown as '…'."""
_NUMBER_TYPES = (int, float)
_HASHABLE = (str, int)
MAX_TIME_US = 1e18
"""Largest ``ts``/``dur`` accepted (31,700 years in µs): sums and squares of such times stay finite."""
_FLOW_PHASES = frozenset({"s", "t", "f"})
DEFAULT_MAX_EVENTS = 4_000_000
"""Most elements of ``traceEvents`` read. Every duration event is kept until the op table is built (about 365 bytes
each: 1.5 GB at this limit, measured in benchmarks/README.md); a 2.5 MB gzip can hold 10**7 of them. Real traces of
the 2 GiB byte limit hold about 11 million; raise the limit with ``MAX_EVENTS_ENV`` for such a trace."""
MAX_EVENTS_ENV = "REPORTGEN_MAX_TRACE_EVENTS"

MAX_NAMED_TRACKS = 10_000
"""Most ``thread_name`` / ``process_name`` metadata events kept (a trace has one per thread and process)."""
MAX_TRACK_NAME_CHARS = 60

class EventBuilder:
    """Turns decoded event dicts into compact TraceEvents, validating as it goes."""

    def __init__(self, source: str, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        self.source = source
        self.max_events = max_events
        self.out: list[TraceEvent] = []
        self.count = 0
        self.strings: dict[Any, str] = {}
        self.lanes: dict[str, Lane] = {}
        self.open_b: dict[tuple[str, str], list[tuple[dict[str, Any], float]]] = {}
        self.flows: list[tuple[Any, Any, Any, Any, Any]] = []
        self.runtime_names: set[str] = set()
        self.shapes: dict[str, list[Any]] = {}
        self.thread_names: dict[tuple[str, str], str] = {}
        self.process_names: dict[str, str] = {}

    def fail(self, obj: Any, problem: str) -> TraceError:
        name = obj.get("name") if isinstance(obj, dict) else None
        what = f"event #{self.count}" + (f" ({str(name)[:60]!r})" if name is not None else "")
        return TraceError(f"{self.source}: {what}: {problem}")

    def text(self, value: Any) -> str:
        """A shared str for a name/category/pid/tid value (traces repeat them millions of times)."""
        try:
            s = self.strings.get(value)
        except TypeError:
            s = None
        if s is None:
            s = value if isinstance(value, str) else str(value) if isinstance(value, (int, float)) else ""
            if "\x00" in s or _SURROGATE.search(s):  # not text: cannot be written as UTF-8 or stored
                s = _SURROGATE.sub("\ufffd", s.replace("\x00", "\ufffd"))
            try:
                self.strings[value] = s
            except TypeError:
                pass
        return s

    def add(self, obj: Any) -> None:
        """One decoded event. The common case (a valid ``X`` event) is inlined: this runs per event."""
        self.count += 1
        if self.count > self.max_events:
            raise TraceError(f"{self.source}: holds more than {self.max_events:,} events; refusing it (raise the limit "
                             f"with {MAX_EVENTS_ENV} if the trace is genuine)")
        if type(obj) is not dict:
            raise self.fail(obj, f"is {type(obj).__name__}, not an object; this is not a Chrome trace event")
        get = obj.get
        ph = get("ph")
        if ph == "X":
            ts: Any = get("ts")
            dur: Any = get("dur")
            if type(ts) not in _NUMBER_TYPES or type(dur) not in _NUMBER_TYPES or not (0.0 <= dur <= MAX_TIME_US) \
                    or not (-MAX_TIME_US <= ts <= MAX_TIME_US):
                self.add_complete(obj)  # raises the precise error
                return
            self.emit(obj, get("args"), float(ts), float(dur))
        elif ph == "B" or ph == "E":
            self.add_begin_end(obj, ph)
        elif ph in _FLOW_PHASES:
            self.add_flow(obj)
        elif ph == "M":
            self.add_metadata(obj)
        elif ph is None:
            raise self.fail(obj, "field 'ph' is missing; every Chrome trace event has a phase")

    def number(self, obj: dict[str, Any], key: str) -> float:
        value: Any = obj.get(key)
        if type(value) not in _NUMBER_TYPES:
            if value is None:
                raise self.fail(obj, f"field '{key}' is missing")
            raise self.fail(obj, f"field '{key}' is {str(value)[:30]!r}, expected a number of microseconds")
        if type(value) is float and not math.isfinite(value):
            raise self.fail(obj, f"field '{key}' is {value}, expected a finite number")
        if not -MAX_TIME_US <= value <= MAX_TIME_US:  # an int of hundreds of digits, or 1e308: sums become inf
            text = str(value)
            raise self.fail(obj, f"field '{key}' is {text if len(text) <= 30 else text[:27] + '...'}, "
                                 f"beyond {MAX_TIME_US:g} µs; not a real time")
        return float(value)

    def add_complete(self, obj: dict[str, Any]) -> None:
        ts = self.number(obj, "ts")
        dur = self.number(obj, "dur")
        if dur < 0:
            raise self.fail(obj, f"field 'dur' is negative ({dur}); durations must be >= 0")
        self.emit(obj, obj.get("args"), ts, dur)

    def emit(self, obj: dict[str, Any], args: Any, ts: float, dur: float) -> None:
        strings = self.strings
        get = obj.get
        raw_cat, raw_name, raw_pid, raw_tid = get("cat", ""), get("name", ""), get("pid", ""), get("tid", "")
        cat = strings.get(raw_cat) if type(raw_cat) is str else None
        cat = cat if cat is not None else self.text(raw_cat)
        lane = self.lanes.get(cat)
        if lane is None:
            lane = self.lanes[cat] = lane_of(cat)
        name = strings.get(raw_name) if type(raw_name) is str else None
        name = name if name is not None else self.text(raw_name)
        if lane is Lane.RUNTIME:
            self.runtime_names.add(name)
        pid = strings.get(raw_pid) if type(raw_pid) in _HASHABLE else None
        pid = pid if pid is not None else self.text(raw_pid)
        tid = strings.get(raw_tid) if type(raw_tid) in _HASHABLE else None
        tid = tid if tid is not None else self.text(raw_tid)
        corr = ext = None
        if type(args) is dict:
            corr = args.get("correlation")
            ext = args.get("External id")
            if type(corr) is not int:
                corr = None
            if type(ext) is not int:
                ext = None
            if lane is Lane.FRAMEWORK:
                dims = args.get("Input Dims")
                if type(dims) is list and depth_within(dims, MAX_DIMS_DEPTH):
                    seen = self.shapes.get(name)
                    if seen is None:
                        self.shapes[name] = [dims]
                    elif len(seen) <= MAX_SHAPES_PER_OP and dims not in seen:
                        seen.append(dims)  # one more than kept: marks "and others"
        self.out.append(TraceEvent(name, cat, lane, ts, dur, pid, tid, corr, ext))

    def add_begin_end(self, obj: dict[str, Any], ph: str) -> None:
        ts = self.number(obj, "ts")
        key = (self.text(obj.get("pid", "")), self.text(obj.get("tid", "")))
        stack = self.open_b.setdefault(key, [])
        if ph == "B":
            stack.append((obj, ts))
            return
        if not stack:
            raise self.fail(obj, f"'E' event on pid {key[0]} tid {key[1]} has no matching 'B' event")
        begin, start = stack.pop()
        if ts < start:
            raise self.fail(obj, f"'E' event ends before its 'B' event began (negative duration {ts - start})")
        args = begin.get("args")
        end_args = obj.get("args")
        if type(end_args) is dict and end_args:
            args = {**end_args, **args} if type(args) is dict else end_args
        self.emit(begin, args, start, ts - start)

    def add_metadata(self, obj: dict[str, Any]) -> None:
        """Kineto's ``thread_name`` / ``process_name`` metadata (``args.name``): the timeline's row labels."""
        get = obj.get
        args = get("args")
        kind = get("name")
        if type(args) is not dict or kind not in ("thread_name", "process_name") or \
                len(self.thread_names) + len(self.process_names) >= MAX_NAMED_TRACKS:
            return
        label = self.text(args.get("name", ""))[:MAX_TRACK_NAME_CHARS]
        if not label:
            return
        pid = self.text(get("pid", ""))
        if kind == "thread_name":
            self.thread_names[(pid, self.text(get("tid", "")))] = label
        else:
            self.process_names[pid] = label

    def add_flow(self, obj: dict[str, Any]) -> None:
        """Keep a flow's raw fields; they are matched to events only if some launch lacks a correlation id."""
        get = obj.get
        self.flows.append((get("pid", ""), get("tid", ""), get("ts"), get("id"), get("cat")))

    def build(self, top: dict[str, Any]) -> Trace:
        for key, stack in self.open_b.items():
            if stack:
                begin, start = stack[0]
                raise TraceError(f"{self.source}: 'B' event {str(begin.get('name', ''))[:60]!r} at ts {start} on "
                                 f"pid {key[0]} tid {key[1]} is never closed by an 'E' event; the trace is truncated")
        events = self.bind_flows(self.out)
        self.out = []
        # Two stable sorts give (start ascending, duration descending) without a key tuple per event.
        events.sort(key=attrgetter("duration_us"), reverse=True)
        events.sort(key=attrgetter("start_us"))
        has_device = any(e.lane is Lane.DEVICE for e in events)
        device_names = _device_names(top.get("deviceProperties"))
        dist: dict[str, Any] = top["distributedInfo"] if type(top.get("distributedInfo")) is dict else {}
        return Trace(
            source=self.source,
            events=tuple(events),
            has_device_lane=has_device,
            device_kind_hint=_device_hint(events, has_device, device_names, self.runtime_names),
            base_time_ns=_opt(top.get("baseTimeNanoseconds"), int),
            device_names=device_names,
            rank=_opt(dist.get("rank"), int),
            world_size=_opt(dist.get("world_size"), int),
            cuda_runtime_version=_opt(top.get("cuda_runtime_version"), int),
            input_shapes={name: _shapes_text(seen) for name, seen in self.shapes.items()},
            thread_names=self.thread_names,
            process_names=self.process_names,
        )

    def bind_flows(self, events: list[TraceEvent]) -> list[TraceEvent]:
        """Give launches and device work without ``args.correlation`` the id of a flow event that starts on them."""
        if not self.flows or all(e.correlation is not None for e in events if _flow_bound(e)):
            return events
        flows: dict[tuple[str, str, float], int] = {}
        for pid, tid, ts, fid, cat in self.flows:
            if cat != "fwdbwd" and type(fid) is int and type(ts) in _NUMBER_TYPES:  # fwdbwd: autograd links
                flows[(self.text(pid), self.text(tid), float(ts))] = fid
        out = []
        for e in events:
            if e.correlation is None and _flow_bound(e):
                fid = flows.get((e.pid, e.tid, e.start_us))
                if fid is not None:
                    e = TraceEvent(e.name, e.category, e.lane, e.start_us, e.duration_us, e.pid, e.tid, fid,
                                   e.external_id)
            out.append(e)
        return out


def _flow_bound(e: TraceEvent) -> bool:
    """Events a launch flow (``ac2g``) can start or end on: runtime calls and device work."""
    return e.lane is Lane.RUNTIME or is_device_work(e)


def _shapes_text(seen: list[Any]) -> str:
    """Distinct Input Dims as key_averages prints them ('[[4, 8], []]'), '; '-joined; text-safe and bounded."""
    text = "; ".join(str(d)[:200] for d in seen[:MAX_SHAPES_PER_OP]) + ("; …" if len(seen) > MAX_SHAPES_PER_OP else "")
    return _SURROGATE.sub("\ufffd", text.replace("\x00", "\ufffd"))


def _opt(value: Any, kind: type) -> Any:
    return value if type(value) is kind else None


def _device_names(props: Any) -> tuple[str, ...]:
    if type(props) is not list:
        return ()
    return tuple(str(p["name"]) for p in props if type(p) is dict and isinstance(p.get("name"), str))


def _device_hint(events: list[TraceEvent], has_device: bool, device_names: tuple[str, ...],
                 runtime_names: set[str]) -> str:
    """Where the trace was taken: a device name or 'unknown', from the evidence in it (see reportgen.devices)."""
    facts = TraceFacts(categories=frozenset(e.category.lower() for e in events),
                       device_names=" ".join(device_names).lower(),
                       runtime_names=frozenset(n.lower() for n in runtime_names), has_device_lane=has_device)
    return device_hint(facts)
