"""The site's manifest: ``manifest.json``, what a build published, and the constants of the site layout.

The format (version 1): an object with ``schema_version``, ``generator``, ``base_url`` and ``runs``, a list
of ``{run_id, run_json_sha256, renderer_version, digest}`` sorted by run id, one run per line. ``publish``
reads it through :func:`manifest_pages` and the constants here; nothing else declares them, but for the two
marker files (``manifest.json``, ``.nojekyll``), named in :mod:`reportgen.store.outputs`, whose output guard
recognises a site by them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import TypeVar

from reportgen import __version__
from reportgen.analysis.history import RunDigest, ShapeDigest, VariantDigest
from reportgen.errors import BundleError, SiteError
from reportgen.model.codec import from_jsonable, to_jsonable
from reportgen.model.run import DeviceKind, RunSource, VariantStatus
from reportgen.store.files import NotRegularFile, read_regular
from reportgen.store.layout import is_valid_run_id
from reportgen.store.outputs import MANIFEST_FILE
from reportgen.text.documents import Limits, load_json

SITE_SCHEMA_VERSION = 1
RUNS_DIR = "runs"
DATA_DIR = "data"
RUN_PAGE = "index.html"
MANIFEST_LIMITS = Limits(max_bytes=256 * 1024 * 1024)
E = TypeVar("E", bound=Enum)


class PageOrigin(str, Enum):
    """Where a run page in the new site comes from."""

    RENDERED = "rendered"
    REUSED = "reused"
    CARRIED = "carried"


@dataclass(frozen=True)
class ManifestEntry:
    """One published run: its id, the hash of the run.json it was rendered from, and the renderer."""

    run_id: str
    run_json_sha256: str
    renderer_version: str


@dataclass(frozen=True)
class OldEntry:
    """A run the old site's manifest lists, with the digest its index was built from."""

    entry: ManifestEntry
    digest: RunDigest | None


@dataclass(frozen=True)
class SiteRun:
    """One published run of the new site: its manifest entry, its digest, and where its page came from."""

    entry: ManifestEntry
    digest: RunDigest
    origin: PageOrigin


def run_page(run_id: str) -> str:
    """A run page's path relative to the site root: ``runs/<id>/index.html``."""
    return f"{RUNS_DIR}/{run_id}/{RUN_PAGE}"


def manifest_pages(data: object) -> list[str]:
    """The run pages a manifest promises (``runs/<id>/index.html``), for publish's check of a built site."""
    runs = data.get("runs") if isinstance(data, dict) else None
    out = []
    for entry in runs if isinstance(runs, list) else []:
        run_id = entry.get("run_id") if isinstance(entry, dict) else entry
        if isinstance(run_id, str):
            out.append(run_page(run_id))
    return out


def read_manifest(out: Path) -> dict[str, OldEntry]:
    """The old site's published runs by id; {} for no site or an empty folder; refuse anything else."""
    if not out.exists():
        return {}
    if not out.is_dir():
        raise SiteError(f"{out}: is a file, not a site folder; pass --out a folder")
    path = out / MANIFEST_FILE
    if not path.is_file() and not (path.exists() or path.is_symlink()):
        if any(out.iterdir()):
            raise SiteError(f"{out}: not empty and has no {MANIFEST_FILE}, so it is not a reportgen site; "
                            "pass --out an empty or new folder (nothing was changed)")
        return {}
    try:
        raw = read_regular(path)
    except NotRegularFile as exc:
        raise SiteError(f"{exc}; delete it, or restore the site (nothing was changed)") from None
    except OSError as exc:
        raise SiteError(f"{path}: unreadable ({exc.strerror}); restore it or build into a new folder") from None
    data = load_json(raw, path, MANIFEST_LIMITS, fix="restore it or build into a new folder", error=SiteError)
    return _parse_manifest(data, path)


def _parse_manifest(data: object, path: Path) -> dict[str, OldEntry]:
    """Validate the manifest JSON: version first, then each run entry."""
    if not isinstance(data, dict) or not isinstance(data.get("schema_version"), int):
        raise SiteError(f"{path}: field 'schema_version' is missing; this is not a reportgen site manifest")
    if data["schema_version"] > SITE_SCHEMA_VERSION:
        raise SiteError(f"{path}: field 'schema_version' is {data['schema_version']}, newer than this reportgen "
                        f"writes ({SITE_SCHEMA_VERSION}); upgrade reportgen")
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise SiteError(f"{path}: field 'runs' must be a list; restore the manifest or build into a new folder")
    out: dict[str, OldEntry] = {}
    for i, item in enumerate(runs):
        names = ("run_id", "run_json_sha256", "renderer_version")
        if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in names):
            raise SiteError(f"{path}: field 'runs[{i}]' must have string run_id, run_json_sha256, renderer_version")
        if not is_valid_run_id(item["run_id"]):
            raise SiteError(f"{path}: field 'runs[{i}].run_id' {item['run_id'][:60]!r} is not a safe folder name")
        entry = ManifestEntry(item["run_id"], item["run_json_sha256"], item["renderer_version"])
        digest = _parse_digest(item.get("digest"), path, i)
        out[entry.run_id] = OldEntry(entry, digest)
    return out


def _parse_digest(data: object, path: Path, i: int) -> RunDigest | None:
    """A run's stored digest; None when absent (the run is then loaded from its run.json)."""
    if data is None:
        return None
    fast = digest_from_manifest(data)
    if fast is not None:
        return fast
    try:
        return from_jsonable(RunDigest, data, path, f"runs[{i}].digest")
    except BundleError as exc:
        raise SiteError(f"{exc}; restore the manifest or build into a new folder") from None


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


def write_manifest(runs: list[SiteRun], root: Path, base_url: str) -> None:
    """manifest.json: what is published, from which run.json, rendered by which reportgen, and its digest."""
    head = {"schema_version": SITE_SCHEMA_VERSION, "generator": f"reportgen {__version__}", "base_url": base_url}
    lines = [json.dumps({"run_id": p.entry.run_id, "run_json_sha256": p.entry.run_json_sha256,
                         "renderer_version": p.entry.renderer_version, "digest": to_jsonable(p.digest)},
                        sort_keys=True, allow_nan=False)
             for p in sorted(runs, key=lambda p: p.entry.run_id)]
    # One run per line: json's C encoder (an indented dump runs the pure-Python one, ~0.3 s at 1,000 runs),
    # and a diff of two builds' manifests still shows which runs changed.
    fields_json = "".join(f"{json.dumps(k)}: {json.dumps(v)},\n" for k, v in sorted(head.items()))
    text = "{\n" + fields_json + '"runs": [\n' + ",\n".join(lines) + "\n]\n}\n"
    (root / MANIFEST_FILE).write_text(text, encoding="utf-8")
