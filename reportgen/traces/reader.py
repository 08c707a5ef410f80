"""The one reader of Chrome/Kineto trace files (``.json`` or ``.json.gz``): streaming, bounded, strict.

The file is decoded in chunks and each element of ``traceEvents`` is parsed on its own, so a
large trace never exists in memory as one list of dicts: only compact ``TraceEvent`` objects
(with names, categories and thread ids shared) are kept. This module reads the bytes (gzip
sniffing, the size limit, UTF-8 in chunks); ``reportgen.traces.jsonstream`` walks the JSON and
``reportgen.traces.normalise`` turns each event into a ``TraceEvent`` (``reportgen.traces.events``).

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
import contextlib
import gc
import gzip
import io
import os
import re
import zlib
from bisect import bisect_left
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import IO

from reportgen.devices.lanes import Lane
from reportgen.errors import TraceError
from reportgen.store.files import NotRegularFile, open_regular
from reportgen.traces.events import Trace, TraceEvent
from reportgen.traces.jsonstream import TraceJsonParser
from reportgen.traces.normalise import DEFAULT_MAX_EVENTS, MAX_EVENTS_ENV, EventBuilder

DEFAULT_MAX_BYTES = 2 * 1024**3
"""Largest uncompressed trace read (2 GiB); a gzip that expands past it is refused."""

MAX_BYTES_ENV = "REPORTGEN_MAX_TRACE_BYTES"
CHUNK_BYTES = 1 << 20

STEP_NAME_RE = re.compile(r"ProfilerStep#\d+")


def max_trace_bytes() -> int:
    """The uncompressed size limit: $REPORTGEN_MAX_TRACE_BYTES, else DEFAULT_MAX_BYTES."""
    return _positive_env(MAX_BYTES_ENV, DEFAULT_MAX_BYTES, "bytes")


def max_trace_events() -> int:
    """The event-count limit: $REPORTGEN_MAX_TRACE_EVENTS, else DEFAULT_MAX_EVENTS."""
    return _positive_env(MAX_EVENTS_ENV, DEFAULT_MAX_EVENTS, "events")


def _positive_env(name: str, default: int, unit: str) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if len(raw) <= 30 else 0
    except ValueError:
        value = 0
    if value <= 0:
        raise TraceError(f"environment variable {name}={raw[:30]!r} is not a positive number of {unit}")
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


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a block (restored afterwards, even on error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# Bytes: gzip sniffing, the size limit, UTF-8 decoding in chunks.


def _read_stream(raw: IO[bytes], source: str, limit: int, sink: Callable[[bytes], None] | None) -> Trace:
    head = raw.read(2)
    raw.seek(0)
    binary: IO[bytes] = raw
    if head == b"\x1f\x8b":
        binary = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    chunks = _text_chunks(binary, source, limit, sink, gzipped=head == b"\x1f\x8b")
    events = EventBuilder(source, max_trace_events())
    # The parser makes millions of short-lived dicts and long-lived events with no reference cycles:
    # the cyclic collector would only rescan them (about 20% of the read time), so it is paused.
    with gc_paused():
        return events.build(TraceJsonParser(source, chunks, events.add).parse())


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
