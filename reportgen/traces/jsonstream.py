"""Streaming JSON of a trace: the top-level object walked by hand, each value decoded by ``json``'s C scanner.

The text arrives in chunks (``reportgen.traces.reader`` decodes the bytes), so a large trace is never
one string or one list of dicts: each element of ``traceEvents`` is handed on as soon as it is decoded.
"""

from __future__ import annotations

import json
import json.scanner
import re
from collections.abc import Callable, Iterator
from typing import Any

from reportgen.errors import TraceError

MAX_ELEMENT_CHARS = 64 * 1024 * 1024
"""Largest single JSON value (one event, or one top-level key's value) accepted."""
_WS = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_MAX_TOKEN_TAIL = 16  # a partial literal/escape at the end of the buffer ('-Infinity', '\\ud83d\\ude00')
_KEPT_TOP_KEYS = frozenset({
    "baseTimeNanoseconds", "deviceProperties", "distributedInfo", "cuda_runtime_version",
})


class TraceJsonParser:
    """Walks the top-level object by hand and decodes each event with ``json``'s C scanner.

    Each element of ``traceEvents`` goes to ``add`` as it is decoded; ``parse`` returns the kept top-level keys.
    """

    def __init__(self, source: str, chunks: Iterator[str], add: Callable[[Any], None]) -> None:
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
        self.add = add
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

    def parse(self) -> dict[str, Any]:
        """Parse the whole input; the kept top-level keys (``_KEPT_TOP_KEYS``) with their values."""
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
        return self.top

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
        add = self.add
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


def _is_incomplete(exc: json.JSONDecodeError, buffered: int) -> bool:
    """True when a decode error may only mean that the value continues past the buffered text."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= buffered - _MAX_TOKEN_TAIL
