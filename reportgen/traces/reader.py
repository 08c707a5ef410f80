"""The one reader of Chrome/Kineto trace files (``.json`` or ``.json.gz``): streaming, bounded, strict.

The file is decoded in chunks and each element of ``traceEvents`` is parsed on its own, so a
large trace never exists in memory as one list of dicts: only compact ``TraceEvent`` objects
(with names, categories and thread ids shared) are kept.

Times: the Chrome Trace Event Format defines ``ts`` and ``dur`` in microseconds whatever
``displayTimeUnit`` says (that key only chooses how a viewer *displays* times), so times are
kept as in the file and ``displayTimeUnit`` is ignored. Kineto writes ``ts``
relative to ``baseTimeNanoseconds``; the absolute wall-clock time of an event is
``base_time_ns / 1000 + start_us`` (``Trace.base_time_ns``), which is what aligns ranks.

Every bad input (truncated gzip, invalid JSON, a JSON that is not a trace, missing or negative
durations, unclosed ``B`` events, a gzip that expands past the size limit, non-UTF-8 bytes,
deeply nested JSON, NaN times) is a ``TraceError`` with one line naming the file and the fault.
"""

from __future__ import annotations

import codecs
import gc
import gzip
import io
import json
import json.scanner
import math
import os
import re
import zlib
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

from reportgen.devices import classify_category, device_hint
from reportgen.devices.lanes import Lane
from reportgen.devices.spec import TraceFacts
from reportgen.errors import TraceError
from reportgen.store.bundle import NotRegularFile, open_regular

DEFAULT_MAX_BYTES = 2 * 1024**3
"""Largest uncompressed trace read (2 GiB); a gzip that expands past it is refused."""

MAX_BYTES_ENV = "REPORTGEN_MAX_TRACE_BYTES"
CHUNK_BYTES = 1 << 20
MAX_ELEMENT_CHARS = 64 * 1024 * 1024
"""Largest single JSON value (one event, or one top-level key's value) accepted."""

STEP_NAME_RE = re.compile(r"ProfilerStep#\d+")
_SURROGATE = re.compile("[\ud800-\udfff]")
"""Lone surrogates (from \\ud800-style escapes) are not text: replaced like NUL."""
MAX_SHAPES_PER_OP = 4
"""Distinct input shapes kept per host op name; more are shown as '…'."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One duration event (``X``, or a matched ``B``/``E`` pair); times in microseconds."""

    name: str
    category: str
    lane: Lane
    start_us: float
    duration_us: float
    pid: str
    tid: str
    correlation: int | None
    external_id: int | None

    @property
    def end_us(self) -> float:
        """The event's end time."""
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class Trace:
    """A parsed trace: duration events sorted by (start, longest first) and what the file says about itself."""

    source: str
    events: tuple[TraceEvent, ...]
    has_device_lane: bool
    device_kind_hint: str
    base_time_ns: int | None = None
    device_names: tuple[str, ...] = ()
    rank: int | None = None
    world_size: int | None = None
    cuda_runtime_version: int | None = None
    input_shapes: dict[str, str] = field(default_factory=dict)
    """Host op name -> its calls' distinct ``args["Input Dims"]`` (at most MAX_SHAPES_PER_OP, '; '-joined)."""


def lane_of(category: str) -> Lane:
    """The timeline lane of a Chrome-trace category (case-insensitive), by the device registry's rules."""
    return classify_category(category)[0]


def is_device_work(event: TraceEvent) -> bool:
    """True for kernels, copies and fills on a device (what device time and kernel counts sum)."""
    return event.lane is Lane.DEVICE and classify_category(event.category)[1]


def max_trace_bytes() -> int:
    """The uncompressed size limit: $REPORTGEN_MAX_TRACE_BYTES, else DEFAULT_MAX_BYTES."""
    raw = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise TraceError(f"environment variable {MAX_BYTES_ENV}={raw[:30]!r} is not a positive number of bytes")
    return value


def read_trace(path: Path, max_uncompressed_bytes: int = DEFAULT_MAX_BYTES) -> Trace:
    """Read a Chrome/Kineto trace file, plain or gzip, refusing more than ``max_uncompressed_bytes``."""
    return read_trace_copying(path, max_uncompressed_bytes, None)


def read_trace_bytes(data: bytes, source: str) -> Trace:
    """Read a trace held in memory (plain or gzip bytes); ``source`` names it in messages."""
    return _read_stream(io.BytesIO(data), source, DEFAULT_MAX_BYTES, None)


def read_trace_copying(path: Path, max_uncompressed_bytes: int, sink: Callable[[bytes], None] | None) -> Trace:
    """Read a trace file and pass every uncompressed byte to ``sink`` (to store a copy in one pass)."""
    source = str(path)
    try:
        fh = open_regular(path)  # a FIFO or device would block the read forever
    except NotRegularFile:
        raise TraceError(f"{source}: is not a regular file; pass a trace file (.json or .json.gz)") from None
    except FileNotFoundError:
        raise TraceError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{source}: is a folder; pass a trace file (.json or .json.gz)") from None
    except OSError as exc:
        raise TraceError(f"{source}: cannot be read ({exc.strerror})") from None
    with fh:
        return _read_stream(fh, source, max_uncompressed_bytes, sink)


def profiler_steps(trace: Trace) -> list[TraceEvent]:
    """The host-side ``ProfilerStep#N`` events, in time order."""
    return [e for e in trace.events
            if e.name.startswith("ProfilerStep#") and e.lane is not Lane.DEVICE and STEP_NAME_RE.fullmatch(e.name)]


def events_in_window(trace: Trace, start_us: float, end_us: float) -> list[TraceEvent]:
    """Events that overlap ``[start_us, end_us)`` (zero-length ones that fall inside it), in trace order."""
    events = trace.events
    stop = bisect_left(events, end_us, key=attrgetter("start_us"))
    return [e for e in events[:stop] if e.start_us + e.duration_us > start_us or e.start_us >= start_us]


# ---------------------------------------------------------------------------------------------
# Bytes: gzip sniffing, the size limit, UTF-8 decoding in chunks.


def _read_stream(raw: IO[bytes], source: str, limit: int, sink: Callable[[bytes], None] | None) -> Trace:
    head = raw.read(2)
    raw.seek(0)
    binary: IO[bytes] = raw
    if head == b"\x1f\x8b":
        binary = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    chunks = _text_chunks(binary, source, limit, sink, gzipped=head == b"\x1f\x8b")
    # The parser makes millions of short-lived dicts and long-lived events with no reference cycles:
    # the cyclic collector would only rescan them (about 20% of the read time), so it is paused.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _Parser(source, chunks).parse()
    finally:
        if was_enabled:
            gc.enable()


def _text_chunks(binary: IO[bytes], source: str, limit: int, sink: Callable[[bytes], None] | None,
                 gzipped: bool) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    total = 0
    first = True
    while True:
        block = _read_block(binary, source, gzipped)
        total += len(block)
        if total > limit:
            raise TraceError(
                f"{source}: expands past {limit} bytes uncompressed; refusing it (raise the limit with "
                f"{MAX_BYTES_ENV} if the trace is genuine)"
            )
        if sink is not None and block:
            sink(block)
        try:
            text = decoder.decode(block, final=not block)
        except UnicodeDecodeError as exc:
            raise TraceError(f"{source}: not UTF-8 text (bad byte near offset {total - len(block) + exc.start}); "
                             "a trace must be UTF-8 JSON") from None
        if first and text:
            text = text.removeprefix("\ufeff")
            first = False
        if not block:
            if text:
                yield text
            return
        if text:
            yield text


def _read_block(binary: IO[bytes], source: str, gzipped: bool) -> bytes:
    try:
        return binary.read(CHUNK_BYTES)
    except EOFError:
        raise TraceError(f"{source}: gzip data is truncated (the file ends before the gzip end marker); "
                         "copy the file again") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{source}: corrupt gzip data ({exc}); copy the file again") from None
    except OSError as exc:
        what = "gzip data" if gzipped else "file"
        raise TraceError(f"{source}: cannot read the {what} ({exc})") from None


# ---------------------------------------------------------------------------------------------
# JSON: the top level by hand, each value with the C decoder.

_WS = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_NUMBER_TYPES = (int, float)
_HASHABLE = (str, int)
_INF = math.inf
MAX_TIME_US = 1e18
"""Largest ``ts``/``dur`` accepted (31,700 years in µs): sums and squares of such times stay finite."""
_MAX_TOKEN_TAIL = 16  # a partial literal/escape at the end of the buffer ('-Infinity', '\\ud83d\\ude00')
_FLOW_PHASES = frozenset({"s", "t", "f"})
_KEPT_TOP_KEYS = frozenset({
    "baseTimeNanoseconds", "deviceProperties", "distributedInfo", "cuda_runtime_version",
})


class _Parser:
    """Walks the top-level object by hand and decodes each event with ``json``'s C scanner."""

    def __init__(self, source: str, chunks: Iterator[str]) -> None:
        self.source = source
        self.chunks = chunks
        self.buf = ""
        self.pos = 0
        self.consumed = 0
        self.eof = False
        self.decode = json.JSONDecoder().raw_decode
        # The C scanner itself: no Python frame per event (JSONDecoder.raw_decode wraps it).
        self.scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
            json.JSONDecoder())  # type: ignore[arg-type]
        self.events = _EventBuilder(source)
        self.top: dict[str, Any] = {}
        self.saw_events = False

    # -- buffer ------------------------------------------------------------------------------

    def more(self) -> bool:
        """Append the next chunk to the buffer; False at end of input."""
        if self.eof:
            return False
        chunk = next(self.chunks, None)
        if chunk is None:
            self.eof = True
            return False
        self.consumed += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def skip_ws(self) -> str:
        """Skip whitespace and return the next character ('' at end of input)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def value(self) -> Any:
        """Decode one complete JSON value at the cursor, reading more input until it is whole."""
        while True:
            try:
                obj, end = self.decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_ELEMENT_CHARS:
                    raise self.fail(f"a single JSON value is larger than {MAX_ELEMENT_CHARS} characters") from None
                if _is_incomplete(exc, len(self.buf)) and self.more():
                    continue
                raise self.fail(f"invalid or truncated JSON ({exc.msg}) at character {self.consumed + exc.pos}"
                                ) from None
            except RecursionError:
                raise self.fail("JSON nested too deeply; this is not a trace") from None
            except ValueError:  # not a JSONDecodeError: only Python's 4,300-digit limit on int() raises it
                raise self.fail("invalid JSON (an integer of more than 4300 digits) in the value at character "
                                f"{self.consumed + self.pos}") from None
            if end >= len(self.buf) and self.more():
                continue  # a number or literal may continue in the next chunk
            self.pos = end
            return obj

    def expect(self, chars: str, where: str) -> str:
        """Consume one of ``chars`` after whitespace, or fail naming what was found."""
        c = self.skip_ws()
        if not c or c not in chars:
            found = repr(c) if c else "end of file"
            raise self.fail(f"invalid or truncated JSON: expected {' or '.join(map(repr, chars))} {where}, "
                            f"found {found} at character {self.consumed + self.pos}")
        self.pos += 1
        return c

    def fail(self, problem: str) -> TraceError:
        return TraceError(f"{self.source}: {problem}")

    # -- grammar -----------------------------------------------------------------------------

    def parse(self) -> Trace:
        """Parse the whole input and build the Trace."""
        c = self.skip_ws()
        if c == "{":
            self.pos += 1
            self.parse_object()
        elif c == "[":
            self.pos += 1
            self.parse_events()
        elif not c:
            raise self.fail("is empty; expected a Chrome trace (a JSON object with 'traceEvents')")
        else:
            raise self.fail("does not start with '{' or '['; expected a Chrome/Kineto trace "
                            "(a JSON object with 'traceEvents')")
        if self.skip_ws():
            raise self.fail(f"has extra data after the JSON value at character {self.consumed + self.pos}")
        if not self.saw_events:
            raise self.fail("has no 'traceEvents' list; this JSON is not a Chrome/Kineto trace")
        return self.events.build(self.top)

    def parse_object(self) -> None:
        if self.skip_ws() == "}":
            self.pos += 1
            return
        while True:
            if self.skip_ws() != '"':
                self.expect('"', "(an object key)")
            key = self.value()
            self.expect(":", f"after key {key[:40]!r}")
            if key == "traceEvents":
                if self.skip_ws() != "[":
                    raise self.fail("field 'traceEvents' is not a list; this is not a Chrome/Kineto trace")
                self.pos += 1
                self.parse_events()
            else:
                self.skip_ws()
                val = self.value()
                if key in _KEPT_TOP_KEYS:
                    self.top[key] = val
            if self.expect(",}", "between top-level fields") == "}":
                return

    def parse_events(self) -> None:
        """The ``traceEvents`` list: a fast path for whole events in the buffer, ``value()`` for the rest."""
        self.saw_events = True
        if self.skip_ws() == "]":
            self.pos += 1
            return
        add = self.events.add
        scan = self.scan
        comma = _COMMA.match
        while True:
            buf = self.buf
            try:
                obj, end = scan(buf, self.pos)
            except (StopIteration, ValueError, RecursionError):
                end = len(buf)
            if end >= len(buf):
                obj = self.value()  # needs more input, or is an error: the slow path says which
                buf, end = self.buf, self.pos
            add(obj)
            m = comma(buf, end)
            if m is not None and m.end() < len(buf):
                self.pos = m.end()
                continue
            self.pos = end
            if self.expect(",]", "between events") == "]":
                return
            self.skip_ws()


# ---------------------------------------------------------------------------------------------
# Events: validation, B/E matching, flow binding, lanes, device-kind hint.


class _EventBuilder:
    """Turns decoded event dicts into compact TraceEvents, validating as it goes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.out: list[TraceEvent] = []
        self.count = 0
        self.strings: dict[Any, str] = {}
        self.lanes: dict[str, Lane] = {}
        self.open_b: dict[tuple[str, str], list[tuple[dict[str, Any], float]]] = {}
        self.flows: list[tuple[Any, Any, Any, Any, Any]] = []
        self.runtime_names: set[str] = set()
        self.shapes: dict[str, list[Any]] = {}

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
                if type(dims) is list:
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


def _is_incomplete(exc: json.JSONDecodeError, buffered: int) -> bool:
    """True when a decode error may only mean that the value continues past the buffered text."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= buffered - _MAX_TOKEN_TAIL


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
