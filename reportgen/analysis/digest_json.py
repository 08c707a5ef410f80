"""A run digest as JSON: written by ``to_jsonable``, read back fast (the site manifest and the catalog hold many).

:func:`digest_from_json` decodes a digest exactly as this reportgen writes it without the generic codec (about
2 ms per digest, which made reading thousands slow); anything it does not accept goes to the codec, which accepts
it or names the bad field.
"""

from __future__ import annotations

import math
from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import TypeVar

from reportgen.analysis.history import RunDigest, ShapeDigest, VariantDigest
from reportgen.model.codec import from_jsonable
from reportgen.model.run import DeviceKind, RunSource, VariantStatus

E = TypeVar("E", bound=Enum)


def digest_from_json(data: object, path: Path, where: str) -> RunDigest:
    """The digest in ``data`` (parsed JSON); BundleError naming ``path`` and the field ``where`` when it is not one."""
    fast = digest_from_manifest(data)
    return fast if fast is not None else from_jsonable(RunDigest, data, path, where)


_DIGEST_FIELDS = frozenset(f.name for f in fields(RunDigest))
_VARIANT_DIGEST_FIELDS = frozenset(f.name for f in fields(VariantDigest))


def digest_from_manifest(data: object) -> RunDigest | None:
    """A digest exactly as this reportgen writes it, decoded directly; None for anything else.

    The generic codec costs about 2 ms per digest, which made adding one run to a 1,000-run site
    slow; anything this does not accept goes to the codec, which accepts or names the bad field.
    """
    if type(data) is not dict or data.keys() != _DIGEST_FIELDS:
        return None
    if not all(_is_text(data[k]) for k in ("run_id", "created_utc", "label", "device_name", "scenario")):
        return None
    sha, base, params, variants = data["git_sha"], data["baseline"], data["parameters"], data["variants"]
    if not (sha is None or _is_text(sha)) or not (base is None or _is_text(base)):
        return None
    if type(params) is not dict or not all(_is_text(v) for v in params.values()) or type(variants) is not list:
        return None
    source, device = _enum_or_none(RunSource, data["source"]), _enum_or_none(DeviceKind, data["device"])
    decoded = [_variant_digest_from_manifest(v) for v in variants]
    if source is None or device is None or any(v is None for v in decoded) or not (
            data["machine"] is None or _is_text(data["machine"])):
        return None
    shapes = _shape_digests_from_manifest(data["shapes"])
    if shapes is None:
        return None
    return RunDigest(data["run_id"], data["created_utc"], data["label"], source, device,
                     data["device_name"], data["scenario"], dict(params), sha, base,
                     tuple(v for v in decoded if v is not None), data["machine"], shapes)


def _shape_digests_from_manifest(data: object) -> tuple[ShapeDigest, ...] | None:
    """A digest's sweep shapes as written by this reportgen; None for anything else."""
    if type(data) is not list:
        return None
    out = []
    for item in data:
        if type(item) is not dict or item.keys() != {"shape", "variants", "params"} or not _is_text(item["shape"]) \
                or type(item["variants"]) is not list or type(item["params"]) is not dict \
                or not all(_is_text(k) and _is_text(v) for k, v in item["params"].items()):
            return None
        decoded = [_variant_digest_from_manifest(v) for v in item["variants"]]
        if any(v is None for v in decoded):
            return None
        out.append(ShapeDigest(item["shape"], tuple(v for v in decoded if v is not None), dict(item["params"])))
    return tuple(out)


def _variant_digest_from_manifest(data: object) -> VariantDigest | None:
    """One variant of a digest as written by this reportgen; None for anything else."""
    if type(data) is not dict or data.keys() != _VARIANT_DIGEST_FIELDS or not _is_text(data["name"]):
        return None
    status = _enum_or_none(VariantStatus, data["status"])
    times = [data["median_us"], data["ci_low_us"], data["ci_high_us"]]
    speedup = data["speedup"]
    if status is None or not all(t is None or (_is_number(t) and t >= 0) for t in times):
        return None
    if not (speedup is None or _is_number(speedup)):
        return None
    median, low, high = (None if t is None else float(t) for t in times)
    return VariantDigest(data["name"], status, median, low, high,
                         None if speedup is None else float(speedup))


def _is_text(value: object) -> bool:
    return type(value) is str and "\x00" not in value


def _is_number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _enum_or_none(cls: type[E], value: object) -> E | None:
    if type(value) is not str:
        return None
    try:
        return cls(value)
    except ValueError:
        return None
