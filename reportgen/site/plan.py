"""Planning a build: gather every stored run, decide per run whether its page is reused, rendered or carried,
and the renderer version that says when a reused page would no longer be what this reportgen draws."""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from reportgen import __version__, catalog
from reportgen.analysis.history import digest
from reportgen.catalog.sync import Catalog
from reportgen.catalog.table import CatalogRun
from reportgen.errors import SiteError
from reportgen.model.run import Run
from reportgen.render.jinja import TEMPLATES_DIR
from reportgen.site.manifest import (
    DATA_DIR,
    RUN_PAGE,
    RUNS_DIR,
    OldEntry,
    OldSite,
    PageOrigin,
    SiteRun,
)
from reportgen.site.pages import RUN_FILE_GZ
from reportgen.store.files import NotRegularFile, read_regular
from reportgen.store.layout import RUN_FILE
from reportgen.store.loader import StoreListing, list_store, load_run
from reportgen.store.outputs import MANIFEST_FILE
from reportgen.store.runjson import parse_run_json
from reportgen.store.withdrawn import read_withdrawn


@dataclass(frozen=True)
class PlannedRun:
    """One run of the new site and where its page comes from."""

    run_id: str
    origin: PageOrigin
    store: Path | None
    """The store that holds the run's bundle (a page to render is drawn from it); None for a run carried over from
    an older build."""
    known: SiteRun | None = None
    """Entry and digest of a reused or carried page; None for a page rendered now (known once rendered)."""
    fallback: OldEntry | None = None
    """For a page to render: the old site's page of the same run, kept if the bundle can no longer be drawn."""

    @property
    def bundle(self) -> Path | None:
        """The run's bundle in the store (made when asked: a build plans every stored run)."""
        return None if self.store is None else self.store / self.run_id


@dataclass(frozen=True)
class SitePlan:
    """Everything gathered before writing: the runs to render, reuse or carry, and the renderer's version."""

    runs: tuple[PlannedRun, ...]
    renderer_version: str
    withdrawn: frozenset[str] = frozenset()  # runs `reportgen rm` withdrew: kept in the manifest, out of the index
    catalog: Catalog | None = None
    """The store's catalog: the digests and history points of the runs whose SiteRun has no digest."""
    old_lists: dict[str, object] = field(default_factory=dict)
    """What the old site's lists were drawn from (its manifest's ``lists``)."""
    retired: frozenset[str] = frozenset()
    """Stored runs whose pages are drawn without traces and artifacts (``keep_traces``)."""
    keep_traces: int | None = None


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


def retired_runs(rows: Iterable[CatalogRun], keep: int | None) -> frozenset[str]:
    """The runs whose traces the site retires: all but the latest ``keep`` of each history series (None: none)."""
    if keep is None:
        return frozenset()
    by_key: dict[str, list[CatalogRun]] = {}
    for r in rows:
        by_key.setdefault(r.history_key, []).append(r)
    out: set[str] = set()
    for runs in by_key.values():
        runs.sort(key=lambda r: (r.created_utc, r.run_id))
        out.update(r.run_id for r in runs[: max(0, len(runs) - keep)])
    return frozenset(out)


def gather(store: Path, out: Path, old: OldSite, keep_traces: int | None = None,
           listing: StoreListing | None = None) -> SitePlan:
    """Bring the store's catalog up to date and decide, per run, whether to render, reuse or carry its page.

    An unchanged run (the catalog's run.json hash and the renderer as the old manifest has them) is
    neither read nor loaded: a build lists the store, ``lstat``s each run.json (the catalog) and ``stat``s each
    reused page, which keeps adding one run to a large site cheap. A run to render is loaded later, once, by the
    process that renders its page.
    ``listing``: the store's run folders, listed by the caller while it holds the build lock; None: listed here.
    """
    version = renderer_version()
    listing = list_store(store) if listing is None else listing
    cat = catalog.sync(store, listing)
    retired = retired_runs((e.run for e in cat.entries.values()), keep_traces)
    planned: dict[str, PlannedRun] = {}
    withdrawn = frozenset(read_withdrawn(store))
    pages = os.path.join(os.fspath(out), RUNS_DIR)
    for name in listing.names:
        entry = cat.entries.get(name)
        reused = None if name in withdrawn or entry is None else _reuse(
            name, store, entry.run, pages, old, version, name in retired)
        planned[name] = reused or PlannedRun(name, PageOrigin.RENDERED, store, fallback=_fallback(name, out, old))
    for run_id, prev in sorted(old.runs.items()):
        if run_id not in planned:
            d = prev.digest or digest(load_carried(out, run_id))
            planned[run_id] = PlannedRun(run_id, PageOrigin.CARRIED, None,
                                         SiteRun(prev.entry, d.created_utc, PageOrigin.CARRIED, d))
    return SitePlan(tuple(planned.values()), version, withdrawn, cat, old.lists, retired, keep_traces)


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


def _reuse(name: str, store: Path, row: CatalogRun, pages: str, old: OldSite, version: str, retired: bool
           ) -> PlannedRun | None:
    """The old page of an unchanged bundle, or None when the run must be (re)loaded and rendered.

    Run for every stored run of every build, so it does no more than compare the manifest and ``stat`` the page
    (on plain strings). A row of the catalog is a bundle that loaded, not a link, and whose run.json has not
    changed since (:func:`reportgen.catalog.sync`)."""
    prev = old.runs.get(name)
    if prev is None:
        return None
    entry = prev.entry
    if (entry.run_json_sha256, entry.renderer_version, entry.traces_retired) != (row.run_json_sha256, version,
                                                                                 retired):
        return None
    if not os.path.isfile(os.path.join(pages, name, RUN_PAGE)):
        return None
    return PlannedRun(name, PageOrigin.REUSED, store, SiteRun(entry, row.created_utc, PageOrigin.REUSED))


def load_latest(newest: PlannedRun, published: SiteRun, out: Path) -> Run:
    """The newest run in full, for the index's summary: from the store, or from the old site when its page is
    carried over (the run left the store, or its bundle can no longer be drawn)."""
    if newest.bundle is not None and published.origin is not PageOrigin.CARRIED:
        return load_run(newest.bundle)
    return load_carried(out, newest.run_id)


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
