"""The site's manifest: ``manifest.json``, what a build published, and the constants of the site layout.

The format (version 3): an object with ``schema_version``, ``generator``, ``base_url``, ``lists`` (what the
index's archive pages and history charts were drawn from: :mod:`reportgen.site.lists`) and ``runs``, the published
runs as columns: lists ``run_id`` (sorted), ``run_json_sha256``, ``renderer_version`` and ``created_utc`` of one
length, one value per line; ``traces_retired``, the ids of the runs whose pages were drawn without their traces;
``digests``, by run id, the digest of each run whose page is carried over (its bundle left the store, or can no
longer be drawn; the others' come from the store's catalog). Columns, not an object per run: reading and writing
10,000 objects cost each added run more than the rest of what a build does for the runs it does not draw.
Versions 1 (a ``digest`` for every run) and 2 (a list of ``{run_id, run_json_sha256, renderer_version,
created_utc}`` objects) are still read. ``publish`` reads it through :func:`manifest_pages` and the constants here;
nothing else declares them, but for the two marker files (``manifest.json``, ``.nojekyll``), named in
:mod:`reportgen.store.outputs`, whose output guard recognises a site by them.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Collection
from dataclasses import dataclass, field
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

SITE_SCHEMA_VERSION = 3
COLUMNS = ("run_id", "run_json_sha256", "renderer_version", "created_utc")
"""The manifest's columns of every published run (version 3), in the order the reader names them."""
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


@dataclass(frozen=True)
class PublishedRuns:
    """The old site's runs as its manifest lists them, as columns by run id: a build reads 10,000 of them, and
    an object per run would cost more than everything else the build does for a run it does not draw."""

    sha256: dict[str, str]
    renderer: dict[str, str]
    created_utc: dict[str, str]
    """Runs whose entry has a time (version 1 entries: their digest's)."""
    retired: frozenset[str]
    digests: dict[str, RunDigest]
    """The digests the manifest keeps: a carried page's (version 1: every run's)."""

    def __contains__(self, run_id: object) -> bool:
        return run_id in self.sha256

    def __len__(self) -> int:
        return len(self.sha256)

    def ids(self) -> set[str]:
        return set(self.sha256)

    def get(self, run_id: str) -> OldEntry | None:
        """One run's entry (for the few runs a build draws or carries), None when the manifest lacks it."""
        if run_id not in self.sha256:
            return None
        entry = ManifestEntry(run_id, self.sha256[run_id], self.renderer[run_id], run_id in self.retired)
        return OldEntry(entry, self.digests.get(run_id), self.created_utc.get(run_id))


NO_RUNS = PublishedRuns({}, {}, {}, frozenset(), {})


@dataclass
class SiteRuns:
    """The runs a new site publishes, as columns by run id, and where each page came from (see PublishedRuns:
    the runs whose old page is reused are added in bulk, with no object each)."""

    sha256: dict[str, str] = field(default_factory=dict)
    renderer: dict[str, str] = field(default_factory=dict)
    created_utc: dict[str, str] = field(default_factory=dict)
    retired: set[str] = field(default_factory=set)
    origin: dict[str, PageOrigin] = field(default_factory=dict)
    digests: dict[str, RunDigest] = field(default_factory=dict)
    """The digests known without the catalog: drawn now, or kept by the manifest for a carried page."""

    def copy(self) -> SiteRuns:
        """A copy whose columns can be added to without changing these."""
        return SiteRuns(dict(self.sha256), dict(self.renderer), dict(self.created_utc), set(self.retired),
                        dict(self.origin), dict(self.digests))

    def add(self, run: SiteRun) -> None:
        """One rendered or carried run."""
        i = run.entry.run_id
        self.sha256[i], self.renderer[i], self.created_utc[i] = (run.entry.run_json_sha256,
                                                                run.entry.renderer_version, run.created_utc)
        self.origin[i] = run.origin
        if run.entry.traces_retired:
            self.retired.add(i)
        if run.digest is not None:
            self.digests[i] = run.digest

    def add_reused(self, ids: set[str], sha256: dict[str, str], created_utc: dict[str, str], renderer: str,
                   retired: Collection[str]) -> None:
        """Runs whose old page is reused, in bulk: their hash and time (the catalog's) and the renderer."""
        self.sha256.update(zip(ids, map(sha256.__getitem__, ids), strict=True))  # pairs made in C: no step per run
        self.created_utc.update(zip(ids, map(created_utc.__getitem__, ids), strict=True))
        self.renderer.update(dict.fromkeys(ids, renderer))
        self.origin.update(dict.fromkeys(ids, PageOrigin.REUSED))
        self.retired.update(ids.intersection(retired))

    def __contains__(self, run_id: object) -> bool:
        return run_id in self.sha256

    def __len__(self) -> int:
        return len(self.sha256)

    def count(self, origin: PageOrigin) -> int:
        """How many pages came from ``origin`` (counted in C: a build asks three times of 10,000 runs)."""
        return operator.countOf(self.origin.values(), origin)

    def by_time(self) -> list[str]:
        """The run ids, oldest first (by time, then id): sorted by id, then by time (a stable sort of strings, twice
        as fast as one sort of (time, id) pairs; ids that begin with their time come nearly in order)."""
        ids = sorted(self.created_utc)
        ids.sort(key=self.created_utc.__getitem__)
        return ids


def run_page(run_id: str) -> str:
    """A run page's path relative to the site root: ``runs/<id>/index.html``."""
    return f"{RUNS_DIR}/{run_id}/{RUN_PAGE}"


def manifest_pages(data: object) -> list[str]:
    """The run pages a manifest promises (``runs/<id>/index.html``), for publish's check of a built site."""
    runs = data.get("runs") if isinstance(data, dict) else None
    if isinstance(runs, dict):  # version 3: columns
        ids = runs.get("run_id")
        return [run_page(i) for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
    out = []
    for entry in runs if isinstance(runs, list) else []:
        run_id = entry.get("run_id") if isinstance(entry, dict) else entry
        if isinstance(run_id, str):
            out.append(run_page(run_id))
    return out


@dataclass(frozen=True)
class OldSite:
    """What the old site's manifest says: its runs, and what its lists were drawn from."""

    runs: PublishedRuns
    lists: dict[str, object]


EMPTY_SITE = OldSite(NO_RUNS, {})


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
        return EMPTY_SITE
    if not out.is_dir():
        raise SiteError(f"{out}: is a file, not a site folder; pass --out a folder")
    path = out / MANIFEST_FILE
    if not path.is_file() and not (path.exists() or path.is_symlink()):
        if any(out.iterdir()):
            raise SiteError(f"{out}: not empty and has no {MANIFEST_FILE}, so it is not a reportgen site; "
                            "pass --out an empty or new folder (nothing was changed)")
        return EMPTY_SITE
    try:
        raw = read_regular(path)
    except NotRegularFile as exc:
        raise SiteError(f"{exc}; delete it, or restore the site (nothing was changed)") from None
    except OSError as exc:
        raise SiteError(f"{path}: unreadable ({exc.strerror}); restore it or build into a new folder") from None
    data = load_json(raw, path, MANIFEST_LIMITS, fix="restore it or build into a new folder", error=SiteError,
                     walk=False)  # 10,000 entries, each field checked below
    return _parse_manifest(data, path)


_FIX = "restore the manifest or build into a new folder"


def _parse_manifest(data: object, path: Path) -> OldSite:
    """Validate the manifest JSON: version first, then the runs (checked column by column: an object per run would
    cost a 10,000-run build more than the rest of its work for the runs it does not draw)."""
    if not isinstance(data, dict) or not isinstance(data.get("schema_version"), int):
        raise SiteError(f"{path}: field 'schema_version' is missing; this is not a reportgen site manifest")
    if data["schema_version"] > SITE_SCHEMA_VERSION:
        raise SiteError(f"{path}: field 'schema_version' is {data['schema_version']}, newer than this reportgen "
                        f"writes ({SITE_SCHEMA_VERSION}); upgrade reportgen")
    parse = _parse_columns if data["schema_version"] >= 3 else _parse_entries
    lists = data.get("lists")
    return OldSite(parse(data.get("runs"), path), lists if isinstance(lists, dict) else {})


def _parse_columns(runs: object, path: Path) -> PublishedRuns:
    """Version 3: the runs' columns, each checked whole, then the first wrong value named."""
    if not isinstance(runs, dict):
        raise SiteError(f"{path}: field 'runs' must be an object of columns ({', '.join(COLUMNS)}); {_FIX}")
    retired = runs.get("traces_retired", [])
    for name, column in (*((n, runs.get(n)) for n in COLUMNS), ("traces_retired", retired)):
        if type(column) is not list or not set(map(type, column)) <= {str}:
            raise SiteError(f"{path}: field 'runs.{name}' must be a list of strings; {_FIX}")
    ids, shas, renderers, created = (runs[name] for name in COLUMNS)
    if not len(ids) == len(shas) == len(renderers) == len(created):
        raise SiteError(f"{path}: fields 'runs.{COLUMNS[0]}', 'runs.{COLUMNS[1]}', 'runs.{COLUMNS[2]}' and "
                        f"'runs.{COLUMNS[3]}' must be lists of one length (a value per run); {_FIX}")
    if not all(map(is_valid_run_id, ids)):
        bad = next(i for i in ids if not is_valid_run_id(i))
        raise SiteError(f"{path}: field 'runs.run_id' holds {bad[:60]!r}, which is not a safe folder name; {_FIX}")
    digests = runs.get("digests", {})
    if not isinstance(digests, dict):
        raise SiteError(f"{path}: field 'runs.digests' must be an object of digests by run id; {_FIX}")
    listed = set(ids)
    parsed = {i: d for i, value in digests.items() if i in listed
              and (d := _parse_digest(value, path, f"runs.digests[{i[:60]!r}]")) is not None}
    return PublishedRuns(dict(zip(ids, shas, strict=True)), dict(zip(ids, renderers, strict=True)),
                         dict(zip(ids, created, strict=True)), frozenset(retired), parsed)


def _parse_entries(runs: object, path: Path) -> PublishedRuns:
    """Versions 1 and 2: a list of one object per run (version 1: each with its digest, no time)."""
    if not isinstance(runs, list):
        raise SiteError(f"{path}: field 'runs' must be a list; {_FIX}")
    names = ("run_id", "run_json_sha256", "renderer_version")
    if not all(type(item) is dict for item in runs):
        _refuse_entry(runs, path)
    ids, shas, renderers = ([item.get(f) for item in runs] for f in names)
    if not all(type(v) is str for column in (ids, shas, renderers) for v in column) or not all(
            map(is_valid_run_id, ids)):
        _refuse_entry(runs, path)
    digests = {item["run_id"]: d for i, item in enumerate(runs) if "digest" in item
               and (d := _parse_digest(item["digest"], path, f"runs[{i}].digest")) is not None}
    created = {item["run_id"]: c for item in runs if isinstance(c := item.get("created_utc"), str)}
    created.update({i: d.created_utc for i, d in digests.items() if i not in created})
    return PublishedRuns(dict(zip(ids, shas, strict=True)), dict(zip(ids, renderers, strict=True)), created,
                         frozenset(item["run_id"] for item in runs if item.get("traces_retired") is True), digests)


def _refuse_entry(runs: list[object], path: Path) -> None:
    """The error naming the first run entry that is not a valid one."""
    names = ("run_id", "run_json_sha256", "renderer_version")
    for i, item in enumerate(runs):
        if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in names):
            raise SiteError(f"{path}: field 'runs[{i}]' must have string run_id, run_json_sha256, renderer_version")
        if not is_valid_run_id(item["run_id"]):
            raise SiteError(f"{path}: field 'runs[{i}].run_id' {item['run_id'][:60]!r} is not a safe folder name")
    raise AssertionError("a run entry was refused but none is invalid")


def _parse_digest(data: object, path: Path, field: str) -> RunDigest | None:
    """A run's stored digest; None when absent (the run is then loaded from its run.json)."""
    if data is None:
        return None
    try:
        return digest_from_json(data, path, field)
    except BundleError as exc:
        raise SiteError(f"{exc}; {_FIX}") from None


def write_manifest(runs: SiteRuns, root: Path, base_url: str, lists: dict[str, object] | None = None) -> None:
    """manifest.json: what is published, from which run.json, rendered by which reportgen, when it ran, the
    digest of a carried page, and what the lists were drawn from."""
    head = {"schema_version": SITE_SCHEMA_VERSION, "generator": f"reportgen {__version__}", "base_url": base_url,
            "lists": lists or {}}
    fields_json = "".join(f"{json.dumps(k, sort_keys=True)}: {json.dumps(v, sort_keys=True)},\n"
                          for k, v in sorted(head.items()))
    text = "{\n" + fields_json + '"runs": {\n' + _runs_json(runs) + "\n}\n}\n"
    (root / MANIFEST_FILE).write_text(text, encoding="utf-8")


def _runs_json(runs: SiteRuns) -> str:
    """The runs' columns by run id, one value per line (a diff of two builds' manifests shows what changed), and
    the digests of carried pages, as json.dumps(..., sort_keys=True) would have them."""
    ids = sorted(runs.sha256)
    carried = {i: to_jsonable(d) for i, d in sorted(runs.digests.items()) if runs.origin.get(i) is PageOrigin.CARRIED}
    columns = {"created_utc": list(map(runs.created_utc.__getitem__, ids)), "digests": None,
               "renderer_version": list(map(runs.renderer.__getitem__, ids)), "run_id": ids,
               "run_json_sha256": list(map(runs.sha256.__getitem__, ids)),
               "traces_retired": list(filter(runs.retired.__contains__, ids))}
    return ",\n".join(f'"{name}": ' + (json.dumps(carried, sort_keys=True, allow_nan=False) if values is None
                                         else _strings_json(values)) for name, values in columns.items())


_PLAIN = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")
"""The characters JSON writes as they are (printable ASCII but quotes and backslashes)."""


def _strings_json(values: list[str]) -> str:
    """A list of strings as JSON, one per line: joined as they are when every character is one JSON writes as it
    is (reportgen's ids, hashes, versions and times), else each encoded (no Python call per value otherwise). The
    check is one bytes ``translate`` deleting the plain characters: three times faster than ``str.isprintable``."""
    if not values:
        return "[]"
    every = "".join(values)
    if every.isascii() and not every.encode("ascii").translate(None, _PLAIN):
        return '[\n"' + '",\n"'.join(values) + '"\n]'
    return "[\n" + ",\n".join(map(json.dumps, values)) + "\n]"
