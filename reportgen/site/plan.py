"""Planning a build: gather every stored run, decide per run whether its page is reused, rendered or carried,
and the renderer version that says when a reused page would no longer be what this reportgen draws."""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import zlib
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from itertools import compress
from operator import eq
from pathlib import Path

from reportgen import __version__, catalog
from reportgen.analysis.history import digest
from reportgen.catalog.sync import Catalog
from reportgen.errors import BundleError, SiteError
from reportgen.model.run import Run
from reportgen.render.jinja import TEMPLATES_DIR
from reportgen.site.manifest import (
    DATA_DIR,
    NO_RUNS,
    RUN_PAGE,
    RUNS_DIR,
    OldEntry,
    OldSite,
    PageOrigin,
    PublishedRuns,
    SiteRun,
    SiteRuns,
)
from reportgen.site.pages import RUN_FILE_GZ
from reportgen.site.workers import pool_map
from reportgen.store.files import NotRegularFile, read_regular
from reportgen.store.layout import RUN_FILE
from reportgen.store.loader import StoreListing, list_store, load_run
from reportgen.store.outputs import MANIFEST_FILE
from reportgen.store.runjson import parse_run_json
from reportgen.store.withdrawn import read_withdrawn


@dataclass(frozen=True)
class PlannedRun:
    """A run whose page this build draws from its bundle in the store."""

    run_id: str
    store: Path
    fallback: OldEntry | None = None
    """The old site's page of the same run, kept if the bundle can no longer be drawn."""

    @property
    def bundle(self) -> Path:
        return self.store / self.run_id


@dataclass(frozen=True)
class SitePlan:
    """Everything gathered before writing: the pages to draw, reuse or carry, and the renderer's version."""

    render: tuple[PlannedRun, ...]
    reused: SiteRuns
    """The runs whose old page is reused (as columns: most of a large site's runs)."""
    carried: tuple[SiteRun, ...]
    """Pages of runs no longer in the store, kept from the old site."""
    renderer_version: str
    store: Path
    withdrawn: frozenset[str] = frozenset()  # runs `reportgen rm` withdrew: kept in the manifest, out of the index
    catalog: Catalog | None = None
    """The store's catalog: the digests and history points of the runs whose digest the build does not hold."""
    old_lists: dict[str, object] = field(default_factory=dict)
    """What the old site's lists were drawn from (its manifest's ``lists``)."""
    retired: frozenset[str] = frozenset()
    """Stored runs whose pages are drawn without traces and artifacts (``keep_traces``)."""
    keep_traces: int | None = None
    old_runs: PublishedRuns = NO_RUNS
    """The runs the old site's manifest lists (what a build that only adds runs adds to)."""
    verify: bool = False
    """``build --verify``: what the old site kept (its history windows too) is checked against the store."""


def package_dir() -> Path:
    """reportgen's own folder (where its modules are installed)."""
    return Path(str(resources.files("reportgen")))


def renderer_sources(code_dir: Path | None = None, templates_dir: Path | None = None) -> list[Path]:
    """Every file that can change a page: all of reportgen's modules and every template and asset."""
    code_dir = code_dir or package_dir()
    templates_dir = templates_dir or TEMPLATES_DIR
    code = [p for p in code_dir.rglob("*.py") if "__pycache__" not in p.parts]
    assets = [p for p in templates_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted(code) + sorted(assets)


def renderer_version(code_dir: Path | None = None, templates_dir: Path | None = None) -> str:
    """reportgen's version plus a digest of its code, templates and assets: any change re-renders every page."""
    code_dir = code_dir or package_dir()
    templates_dir = templates_dir or TEMPLATES_DIR
    h = hashlib.sha256()
    for p in renderer_sources(code_dir, templates_dir):
        root = code_dir if p.is_relative_to(code_dir) else templates_dir
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return f"{__version__}+{h.hexdigest()[:12]}"


def retired_runs(history_key: dict[str, str], created_utc: dict[str, str], keep: int | None) -> frozenset[str]:
    """The runs whose traces the site retires: all but the latest ``keep`` of each history series (None: none).

    The runs are put in order (series, time, id) by three stable sorts keyed by C-level lookups, then each crowded
    series gives its oldest runs as one slice: no Python step per run."""
    if keep is None:
        return frozenset()
    counts = Counter(history_key.values())
    if all(n <= keep for n in counts.values()):
        return frozenset()
    ids = sorted(history_key)
    ids.sort(key=created_utc.__getitem__)
    ids.sort(key=history_key.__getitem__)
    out: list[str] = []
    start = 0
    for key in sorted(counts):
        n = counts[key]
        if n > keep:
            out += ids[start: start + n - keep]
        start += n
    return frozenset(out)


def gather(store: Path, out: Path, old: OldSite, keep_traces: int | None = None,
           listing: StoreListing | None = None, *, verify: bool = False, jobs: int = 1) -> SitePlan:
    """Bring the store's catalog up to date and decide, per run, whether to render, reuse or carry its page.

    A run whose page is reused (the catalog's run.json hash, the renderer and the retention state as the old
    manifest has them) is neither read nor loaded, nor stat'ed: bundles and published pages are written once and
    never changed, so a build's cost for them is a few set operations over the listing, the catalog and the
    manifest, which keeps adding one run to a large site cheap. ``verify``: also check that each bundle's run.json
    is the file the catalog read and each reused page is there (one ``lstat`` and one ``stat`` per run), for a
    store or site changed by hand. A run to render is loaded later, once, by the process that renders its page.
    ``listing``: the store's run folders, listed by the caller while it holds the build lock; None: listed here.
    ``jobs``: processes that read the bundles the catalog lacks (a first build of a big store).
    """
    version = renderer_version()
    listing = list_store(store) if listing is None else listing
    cat = catalog.sync(store, listing, verify=verify, mapper=functools.partial(pool_map, jobs=jobs))
    sha256, created, keys = cat.columns()
    retired = retired_runs(keys, created, keep_traces)
    withdrawn = frozenset(read_withdrawn(store))
    reused = _reused(listing, sha256, old.runs, version, retired, withdrawn)
    if verify:
        pages = os.path.join(os.fspath(out), RUNS_DIR)
        reused = {i for i in reused if os.path.isfile(os.path.join(pages, i, RUN_PAGE))}
    published = SiteRuns()
    published.add_reused(reused, sha256, created, version, retired)
    drawn = sorted(set(listing.names).difference(reused))  # in C: no step per stored run
    render = tuple(PlannedRun(n, store, _fallback(n, out, old)) for n in drawn)
    carried = tuple(carried_site_run(out, entry) for i in sorted(old.runs.ids().difference(listing.names))
                    if (entry := old.runs.get(i)) is not None)
    return SitePlan(render, published, carried, version, store, withdrawn, cat, old.lists, retired, keep_traces,
                    old.runs, verify)


def _reused(listing: StoreListing, sha256: dict[str, str], old: PublishedRuns, version: str,
            retired: frozenset[str], withdrawn: frozenset[str]) -> set[str]:
    """The stored runs whose old page is still what this build would draw: in the catalog (a bundle that loads,
    or a link it loaded again) with the run.json hash the page was drawn from, drawn by this renderer, with the
    same retention state, and not withdrawn. Set operations and one comparison per run, in C: no Python step per run."""
    same = set(compress(old.sha256, map(eq, map(sha256.get, old.sha256), old.sha256.values())))  # same hash
    same.difference_update(compress(old.renderer, map(version.__ne__, old.renderer.values())))  # same renderer
    same.intersection_update(listing.names)
    same.difference_update(withdrawn)
    return same - retired.symmetric_difference(old.retired)


def carried_site_run(out: Path, prev: OldEntry) -> SiteRun:
    """The old site's page of a run kept as it was, with its digest (from the manifest, else its run.json copy)."""
    d = prev.digest or digest(load_carried(out, prev.entry.run_id))
    return SiteRun(prev.entry, d.created_utc, PageOrigin.CARRIED, d)


def _fallback(run_id: str, out: Path, old: OldSite) -> OldEntry | None:
    """The old site's page of ``run_id``, if it has one (published pages are never removed)."""
    prev = old.runs.get(run_id)
    if prev is None or not (out / RUNS_DIR / run_id / RUN_PAGE).is_file():
        return None
    return prev


def load_latest(plan: SitePlan, run_id: str, origin: PageOrigin, out: Path) -> Run:
    """The newest run in full, for the index's summary: from the store, else from the old site's copy (the run
    left the store, or its bundle can no longer be read: a reused page's bundle is not checked by a build)."""
    if origin is not PageOrigin.CARRIED:
        try:
            return load_run(plan.store / run_id)
        except (BundleError, OSError):
            if origin is not PageOrigin.REUSED:
                raise
    return load_carried(out, run_id)


def load_carried(out: Path, run_id: str) -> Run:
    """The run.json copy kept in the old site for a run that is no longer in the store."""
    path = out / RUNS_DIR / run_id / DATA_DIR / RUN_FILE
    if not os.path.lexists(path) and os.path.lexists(path.with_name(RUN_FILE_GZ)):  # a compact page's copy
        path = path.with_name(RUN_FILE_GZ)
    try:
        text = read_regular(path)
        if path.name == RUN_FILE_GZ:
            text = gzip.decompress(text)
    except NotRegularFile as exc:
        raise SiteError(f"{exc}; restore the site, or put the bundle back in the store") from None
    except (OSError, EOFError, zlib.error):
        raise SiteError(f"{path}: missing or unreadable, but {MANIFEST_FILE} lists run {run_id} and the store no "
                        "longer has it; "
                        "put the bundle back in the store or restore the site") from None
    return parse_run_json(text, path)
