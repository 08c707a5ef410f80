"""The one reader of JSON and TOML documents (``run.json``, ``withdrawn.json``, ``manifest.json``, the config).

Every document is parsed within limits and every way it can fail is a refusal naming the file:

- bytes: at most ``max_bytes``; UTF-8 only (a UTF-16 or UTF-8 byte-order mark, or any other byte that is not
  UTF-8, is named with its offset), so that a file saved by another editor is refused, not misread;
- nesting: at most ``max_depth`` levels of arrays/objects (tables), checked on the parsed value without
  recursion; a document nested so deep that the parser itself runs out of stack is refused the same way;
- numbers: integers of at most ``MAX_INT_DIGITS`` digits, whatever ``sys.set_int_max_str_digits`` says; a JSON
  ``NaN``/``Infinity`` literal is refused (``1e400``, infinity in Python, is left to the codec, which names the
  field that must be finite);
- JSON objects with a key twice are refused (``json.loads`` would keep the last one silently).

The callers choose the error class (its exit code) and the fix the message ends with.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reportgen.errors import ReportgenError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_INT_DIGITS = 1000
"""Longest integer accepted (digits), whatever ``sys.set_int_max_str_digits`` allows: converting longer ones costs
time quadratic in their length. Smaller ones too large for a field are refused by the codec, naming the field."""
_MAX_INT = 10**MAX_INT_DIGITS
MAX_DEPTH = 64
"""Deepest nesting accepted by default; reportgen's own documents nest fewer than ten levels."""


@dataclass(frozen=True)
class Limits:
    """What one kind of document may be: its size in bytes and how deep it nests."""

    max_bytes: int
    max_depth: int = MAX_DEPTH


class _Refused(ValueError):
    """A limit of this module, raised inside a parser hook and turned into the caller's error."""


def decode_utf8(raw: bytes, source: object, *, fix: str, error: type[ReportgenError] = ReportgenError) -> str:
    """``raw`` as text, refusing a byte-order mark (UTF-16 or UTF-8) and any byte sequence that is not UTF-8."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise error(f"{source}: starts with a UTF-16 byte-order mark: not UTF-8; {fix}")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise error(f"{source}: starts with a byte-order mark; save it as UTF-8 without one, or {fix}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{source}: not UTF-8 (byte {exc.start}); {fix}") from None


def _check_size(raw: bytes | str, limits: Limits, source: object, fix: str, error: type[ReportgenError]) -> None:
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise error(f"{source}: larger than {limits.max_bytes} bytes; {fix}")


def load_json(raw: bytes | str, source: object, limits: Limits, *, fix: str,
              error: type[ReportgenError] = ReportgenError, walk: bool = True) -> Any:
    """Parse a JSON document within ``limits``; every failure is ``error`` naming ``source`` and ending in ``fix``.

    ``walk=False``: no Python call per object (for a document of thousands of objects whose reader checks every
    field it uses, such as a site's manifest): a key twice in one object keeps its last value, and the depth is
    bounded by the decoder's own recursion limit, not ``max_depth``; size, UTF-8, constants and digits are checked
    as always."""
    def parse(text: str) -> Any:
        if not walk:
            return json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int)
        return json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int, object_pairs_hook=_unique_keys)

    return _load(raw, parse, "JSON", json.JSONDecodeError, source, limits, fix, error, walk)


def load_toml(raw: bytes, source: object, limits: Limits, *, fix: str,
              error: type[ReportgenError] = ReportgenError) -> dict[str, Any]:
    """Parse a TOML document within ``limits``; every failure is ``error`` naming ``source`` and ending in ``fix``."""
    data: dict[str, Any] = _load(raw, tomllib.loads, "TOML", tomllib.TOMLDecodeError, source, limits, fix, error)
    return data


def _load(raw: bytes | str, parse: Callable[[str], Any], kind: str, decode_error: type[ValueError], source: object,
          limits: Limits, fix: str, error: type[ReportgenError], walk: bool = True) -> Any:
    """The checks both readers make around their parser: size, UTF-8, the parser's own errors, depth and digits."""
    _check_size(raw, limits, source, fix, error)
    text = decode_utf8(raw, source, fix=fix, error=error) if isinstance(raw, bytes) else raw
    try:
        data = parse(text)
    except _Refused as exc:
        raise error(f"{source}: {exc}; {fix}") from None
    except decode_error as exc:
        raise error(f"{source}: not valid {kind} ({exc}); {fix}") from None
    except RecursionError:
        raise error(f"{source}: nested deeper than {limits.max_depth} levels; {fix}") from None
    except ValueError:  # the interpreter's own limit on the digits of an int
        raise error(f"{source}: a number with more than {MAX_INT_DIGITS} digits; {fix}") from None
    if walk:
        _check_value(data, limits, source, fix, error)
    return data


def depth_within(value: object, max_depth: int) -> bool:
    """True when ``value`` nests lists/dicts at most ``max_depth`` levels (checked without recursion)."""
    return _first_problem(value, max_depth) != "depth"


def _check_value(data: object, limits: Limits, source: object, fix: str, error: type[ReportgenError]) -> None:
    problem = _first_problem(data, limits.max_depth)
    if problem == "depth":
        raise error(f"{source}: nested deeper than {limits.max_depth} levels; {fix}")
    if problem == "int":
        raise error(f"{source}: a number with more than {MAX_INT_DIGITS} digits; {fix}")


def _first_problem(data: object, max_depth: int) -> str | None:
    """``depth`` or ``int`` for the first limit ``data`` breaks, else None; iterative (no recursion)."""
    stack: list[tuple[object, int]] = [([data], 0)]
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            return "depth"
        for item in (value.values() if isinstance(value, dict) else value):  # type: ignore[attr-defined]
            kind = type(item)
            if kind is int:
                if not -_MAX_INT < item < _MAX_INT:
                    return "int"
            elif kind is list or kind is dict:
                stack.append((item, depth + 1))
    return None


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"a number with more than {MAX_INT_DIGITS} digits")
    return int(text)


def _no_constant(name: str) -> float:
    raise _Refused(f"not valid JSON ({name} is not allowed)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"key {key[:60]!r} appears twice in one object")
            seen.add(key)
    return out
