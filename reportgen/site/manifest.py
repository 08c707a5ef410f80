"""The site's manifest: ``manifest.json``, what a build published, and the constants of the site layout.

The format (version 2): an object with ``schema_version``, ``generator``, ``base_url``, ``lists`` (what the
index's archive pages and history charts were drawn from: :mod:`reportgen.site.lists`) and ``runs``, a list of
``{run_id, run_json_sha256, renderer_version, created_utc}`` sorted by run id, one run per line; a run whose page
is carried over (its bundle left the store, or can no longer be drawn) keeps its ``digest`` there, the others'
come from the store's catalog. Version 1 (a ``digest`` for every run, no ``created_utc``) is still read. ``publish``
reads it through :func:`manifest_pages` and the constants here; nothing else declares them, but for the two
marker files (``manifest.json``, ``.nojekyll``), named in :mod:`reportgen.store.outputs`, whose output guard
recognises a site by them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from reportgen import __version__
from reportgen.analysis.digest_json import digest_from_json
from reportgen.analysis.history import RunDigest
from reportgen.errors import BundleError, SiteError
from reportgen.model.codec import to_jsonable
from reportgen.store.files import NotRegularFile, read_regular
from reportgen.store.layout import is_valid_run_id
from reportgen.store.outputs import MANIFEST_FILE
from reportgen.text.documents import Limits, load_json

SITE_SCHEMA_VERSION = 2
RUNS_DIR = "runs"
DATA_DIR = "data"
RUN_PAGE = "index.html"
MANIFEST_LIMITS = Limits(max_bytes=256 * 1024 * 1024)


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
    traces_retired: bool = False
    """The page was drawn without the run's traces and artifacts (the site's retention policy)."""


@dataclass(frozen=True)
class OldEntry:
    """A run the old site's manifest lists: its time, and its digest where the manifest kept one."""

    entry: ManifestEntry
    digest: RunDigest | None
    created_utc: str | None = None


@dataclass(frozen=True)
class SiteRun:
    """One published run of the new site: its manifest entry, time, where its page came from, and its digest
    (None: read from the store's catalog when a list shows the run)."""

    entry: ManifestEntry
    created_utc: str
    origin: PageOrigin
    digest: RunDigest | None = None


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


@dataclass(frozen=True)
class OldSite:
    """What the old site's manifest says: its runs by id, and what its lists were drawn from."""

    runs: dict[str, OldEntry]
    lists: dict[str, object]


def read_manifest(out: Path) -> dict[str, OldEntry]:
    """The old site's published runs by id; {} for no site or an empty folder; refuse anything else."""
    return read_old_site(out).runs


def manifest_stamp(out: Path) -> tuple[int, int, int, int] | None:
    """What changes when the site's manifest does (device, inode, size, mtime): a build reads the manifest
    before taking the lock and again under it only if this changed. None: no manifest."""
    try:
        st = os.lstat(out / MANIFEST_FILE)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def read_old_site(out: Path) -> OldSite:
    """The old site's manifest; empty for no site or an empty folder; refuse anything else."""
    if not out.exists():
        return OldSite({}, {})
    if not out.is_dir():
        raise SiteError(f"{out}: is a file, not a site folder; pass --out a folder")
    path = out / MANIFEST_FILE
    if not path.is_file() and not (path.exists() or path.is_symlink()):
        if any(out.iterdir()):
            raise SiteError(f"{out}: not empty and has no {MANIFEST_FILE}, so it is not a reportgen site; "
                            "pass --out an empty or new folder (nothing was changed)")
        return OldSite({}, {})
    try:
        raw = read_regular(path)
    except NotRegularFile as exc:
        raise SiteError(f"{exc}; delete it, or restore the site (nothing was changed)") from None
    except OSError as exc:
        raise SiteError(f"{path}: unreadable ({exc.strerror}); restore it or build into a new folder") from None
    data = load_json(raw, path, MANIFEST_LIMITS, fix="restore it or build into a new folder", error=SiteError)
    return _parse_manifest(data, path)


def _parse_manifest(data: object, path: Path) -> OldSite:
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
        entry = ManifestEntry(item["run_id"], item["run_json_sha256"], item["renderer_version"],
                              item.get("traces_retired") is True)
        digest = _parse_digest(item.get("digest"), path, i)
        created = item.get("created_utc")
        created = created if isinstance(created, str) else digest.created_utc if digest is not None else None
        out[entry.run_id] = OldEntry(entry, digest, created)
    lists = data.get("lists")
    return OldSite(out, lists if isinstance(lists, dict) else {})


def _parse_digest(data: object, path: Path, i: int) -> RunDigest | None:
    """A run's stored digest; None when absent (the run is then loaded from its run.json)."""
    if data is None:
        return None
    try:
        return digest_from_json(data, path, f"runs[{i}].digest")
    except BundleError as exc:
        raise SiteError(f"{exc}; restore the manifest or build into a new folder") from None


def write_manifest(runs: list[SiteRun], root: Path, base_url: str, lists: dict[str, object] | None = None) -> None:
    """manifest.json: what is published, from which run.json, rendered by which reportgen, when it ran, the
    digest of a carried page, and what the lists were drawn from."""
    head = {"schema_version": SITE_SCHEMA_VERSION, "generator": f"reportgen {__version__}", "base_url": base_url,
            "lists": lists or {}}
    lines = [json.dumps(_manifest_line(p), sort_keys=True, allow_nan=False)
             for p in sorted(runs, key=lambda p: p.entry.run_id)]
    # One run per line: json's C encoder (an indented dump runs the pure-Python one, ~0.3 s at 1,000 runs),
    # and a diff of two builds' manifests still shows which runs changed.
    fields_json = "".join(f"{json.dumps(k, sort_keys=True)}: {json.dumps(v, sort_keys=True)},\n"
                          for k, v in sorted(head.items()))
    text = "{\n" + fields_json + '"runs": [\n' + ",\n".join(lines) + "\n]\n}\n"
    (root / MANIFEST_FILE).write_text(text, encoding="utf-8")


def _manifest_line(p: SiteRun) -> dict[str, object]:
    line: dict[str, object] = {"run_id": p.entry.run_id, "run_json_sha256": p.entry.run_json_sha256,
                               "renderer_version": p.entry.renderer_version, "created_utc": p.created_utc}
    if p.entry.traces_retired:
        line["traces_retired"] = True
    if p.origin is PageOrigin.CARRIED and p.digest is not None:
        line["digest"] = to_jsonable(p.digest)
    return line
