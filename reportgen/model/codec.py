"""Typed JSON <-> dataclass conversion with validation that names the file and the field.

Decoding is driven by the dataclasses' type hints, so ``model.py`` is the one schema.
Field names carry units: ``*_us`` and ``*_bytes`` values must be finite and non-negative.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from reportgen.errors import BundleError

T = TypeVar("T")

_NON_NEGATIVE_SUFFIXES = ("_us", "_bytes", "_count", "_per_s")
_NON_NEGATIVE_FIELDS = frozenset({"calls", "profiled_steps", "calls_per_sample", "cpu_count", "torch_threads",
                                  "warmup_iters", "samples", "profile_wait", "profile_warmup", "profile_active",
                                  "bytes_per_call", "flops_per_call"})
"""Counts whose names carry no unit suffix: negative is as impossible for them as for ``*_count``."""
MAX_UNIT_VALUE = 1e18
"""Largest time, size, count or rate accepted (1e18 µs is 31,700 years): sums and squares of such values stay
finite, so nothing derived from a loaded run becomes ``inf``."""
MIN_SAMPLE_US = 1e-6
"""Smallest timing sample accepted other than 0 (1 ps): with ``MAX_UNIT_VALUE`` a ratio of two variants' medians,
or a size per sample, stays finite (a sample of 5e-324 made one ``inf``)."""
MAX_INT = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


def to_jsonable(obj: Any) -> Any:
    """Turn a dataclass tree into plain JSON values (enums by value, tuples as lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"non-finite float {obj!r} cannot be stored")
    return obj


def from_jsonable(cls: type[T], data: Any, source: Path | str, where: str = "") -> T:
    """Build ``cls`` from JSON data, raising BundleError('<file>: field <path>: ...') on any mismatch."""
    return typing.cast(T, _decode(cls, data, _Ctx(str(source)), where or "$"))


@dataclasses.dataclass(frozen=True)
class _Ctx:
    source: str

    def fail(self, where: str, problem: str) -> BundleError:
        return BundleError(f"{self.source}: field '{where}': {problem}")


Decoder = typing.Callable[[Any, _Ctx, str], Any]
"""Decodes a JSON value into one type: ``decoder(value, ctx, where)``."""


def _decode(tp: Any, value: Any, ctx: _Ctx, where: str) -> Any:
    return _decoder(tp)(value, ctx, where)


@functools.cache
def _decoder(tp: Any) -> Decoder:
    """The decoder of ``tp``, made once per type from its hints: a run.json holds hundreds of values, and asking
    each value's type what it is (its origin, whether it is a dataclass, an enum) cost more than decoding it."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(tp)
    if dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum_decoder(tp)
    if origin is tuple:
        return _tuple_decoder(typing.get_args(tp)[0])
    if origin is dict:
        return _dict_decoder(typing.get_args(tp)[1])
    return functools.partial(_decode_scalar, tp)


def _lazy(tp: Any) -> Decoder:
    """``tp``'s decoder, made when first called (a dataclass may hold its own type)."""
    found: list[Decoder] = []

    def decode(value: Any, ctx: _Ctx, where: str) -> Any:
        if not found:
            found.append(_decoder(tp))
        return found[0](value, ctx, where)
    return decode


def _union_decoder(tp: Any) -> Decoder:
    args = typing.get_args(tp)
    optional = type(None) in args
    non_none = [a for a in args if a is not type(None)]
    if len(non_none) != 1:
        raise TypeError(f"unsupported union {tp}")
    inner = _lazy(non_none[0])

    def decode(value: Any, ctx: _Ctx, where: str) -> Any:
        if value is None:
            if optional:
                return None
            raise ctx.fail(where, "must not be null")
        return inner(value, ctx, where)
    return decode


def _enum_decoder(tp: type[Enum]) -> Decoder:
    allowed = [m.value for m in tp]

    def decode(value: Any, ctx: _Ctx, where: str) -> Any:
        if value not in allowed:
            raise ctx.fail(where, f"expected one of {allowed}, got {_show(value)}")
        return tp(value)
    return decode


def _tuple_decoder(item_tp: Any) -> Decoder:
    item = _lazy(item_tp)
    floats = item_tp is float

    def decode(value: Any, ctx: _Ctx, where: str) -> Any:
        if not isinstance(value, list):
            raise ctx.fail(where, f"expected a list, got {_kind(value)}")
        numbers = _finite_floats(value) if floats else None
        if numbers is not None:
            return numbers
        return tuple(item(v, ctx, f"{where}[{i}]") for i, v in enumerate(value))
    return decode


def _dict_decoder(val_tp: Any) -> Decoder:
    item = _lazy(val_tp)

    def decode(value: Any, ctx: _Ctx, where: str) -> Any:
        if not isinstance(value, dict):
            raise ctx.fail(where, f"expected an object, got {_kind(value)}")
        for k in value:
            _check_key(k, ctx, where)
        return {str(k): item(v, ctx, f"{where}.{k}") for k, v in value.items()}
    return decode


def _finite_floats(values: list[Any]) -> tuple[float, ...] | None:
    """A list of finite numbers as floats in one pass (a variant may hold a million samples), else None: then each
    item is decoded on its own, so that the first bad one is named."""
    if not set(map(type, values)) <= {float, int}:
        return None
    try:
        out = tuple(map(float, values))
    except OverflowError:  # an integer too large for a float
        return None
    return out if all(map(math.isfinite, out)) else None


def _dataclass_decoder(tp: Any) -> Decoder:
    fields: list[tuple[str, Decoder, bool, bool]] = []  # name, decoder, required, a unit to check

    def decode(value: Any, ctx: _Ctx, where: str) -> Any:
        if not isinstance(value, dict):
            raise ctx.fail(where, f"expected an object, got {_kind(value)}")
        if not fields:
            fields[:] = [(name, _decoder(hint), required, _has_unit(name)) for name, hint, required in _fields_of(tp)]
        top = where == "$"
        kwargs: dict[str, Any] = {}
        for name, field_decoder, required, unit in fields:
            if name not in value:
                if required:
                    raise ctx.fail(name if top else f"{where}.{name}", "is missing")
                continue
            sub = name if top else f"{where}.{name}"
            kwargs[name] = decoded = field_decoder(value[name], ctx, sub)
            if unit:
                _check_units(name, decoded, ctx, sub)
        return tp(**kwargs)
    return decode


def _has_unit(name: str) -> bool:
    """Whether a field's values must be non-negative (its name carries a unit, or counts)."""
    return name.endswith(_NON_NEGATIVE_SUFFIXES) or name in _NON_NEGATIVE_FIELDS


@functools.cache
def _fields_of(tp: Any) -> tuple[tuple[str, Any, bool], ...]:
    """(name, resolved type, required) of each field: resolving the annotations is most of a decode's cost."""
    hints = typing.get_type_hints(tp)
    return tuple((f.name, hints[f.name],
                  f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
                 for f in dataclasses.fields(tp))


def _decode_scalar(tp: Any, value: Any, ctx: _Ctx, where: str) -> Any:
    if tp is bool:
        if not isinstance(value, bool):
            raise ctx.fail(where, f"expected true/false, got {_show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ctx.fail(where, f"expected an integer, got {_show(value)}")
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise ctx.fail(where, f"expected an integer below 2**63, got {_show(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ctx.fail(where, f"expected a number, got {_show(value)}")
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer too large for a float (hundreds of digits)
            finite = False
        if not finite:
            raise ctx.fail(where, f"expected a finite number, got {_show(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ctx.fail(where, f"expected a string, got {_show(value)}")
        if "\x00" in value:
            raise ctx.fail(where, "contains a NUL character")
        if _SURROGATE.search(value):
            raise ctx.fail(where, "contains a lone surrogate (a \\ud800-\\udfff escape), which is not text; "
                                  "write the character itself or remove it")
        return value
    raise TypeError(f"unsupported field type {tp!r} at {where}")


def _check_units(name: str, value: Any, ctx: _Ctx, where: str) -> None:
    kind = type(value)
    if (kind is float or kind is int) and 0 <= value <= MAX_UNIT_VALUE or value is None:
        return  # most values: one number in range
    values = value if isinstance(value, tuple) else (value,)
    if name == "samples_us":
        _check_samples(values, ctx, where)
    if len(values) > 2 and set(map(type, values)) == {float}:
        values = (min(values), max(values))  # the bounds decide; one pass each, not a check per sample
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            raise ctx.fail(where, f"must not be negative, got {v!r}")
        if name.endswith(_NON_NEGATIVE_SUFFIXES) and isinstance(v, (int, float)) and v > MAX_UNIT_VALUE:
            raise ctx.fail(where, f"must be at most {MAX_UNIT_VALUE:g}, got {_show(v)}")


def _check_samples(values: tuple[Any, ...], ctx: _Ctx, where: str) -> None:
    tiny = [v for v in values if 0 < v < MIN_SAMPLE_US]
    if tiny:
        raise ctx.fail(where, f"must be 0 or at least {MIN_SAMPLE_US:g} µs, got {_show(tiny[0])}")


def _check_key(key: Any, ctx: _Ctx, where: str) -> None:
    """An object key is text like any string value: no NUL, no lone surrogate."""
    problem = None
    if "\x00" in key:
        problem = "contains a NUL character"
    elif _SURROGATE.search(key):
        problem = ("contains a lone surrogate (a \\ud800-\\udfff escape), which is not text; "
                   "write the character itself or remove it")
    if problem:
        raise BundleError(f"{ctx.source}: field '{where}' key {_show(key)}: {problem}")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
