"""What lists the runs: the index (the latest runs), the archive pages (every run), the history charts.

Their cost must not grow with the store: the index shows the newest ``INDEX_RUNS`` runs; the archive holds
``ARCHIVE_PAGE_RUNS`` runs per page, oldest first, each page linking its neighbours (the index lists them all), so a
new run changes only the last page (and the one before, when it starts a page); each history chart
shows a group's latest ``HISTORY_WINDOW`` runs. An archive page or a chart whose inputs are unchanged (same
runs, same renderer: their *signature*, kept in the manifest's ``lists``) is linked from the old site, not drawn
again; a group's steps are kept there too. Digests and history points come from the digests the build holds
(pages drawn now, carried pages), else from the store's catalog; a build that only adds runs takes the other runs'
history points from the old site's windows (:mod:`reportgen.site.windows`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.analysis.change_points import SeriesSteps, series_steps
from reportgen.analysis.history import (
    GroupPoint,
    HistoryGroup,
    RunDigest,
    group_points,
    groups_from_points,
    run_counts,
)
from reportgen.errors import BundleError
from reportgen.model.codec import from_jsonable, to_jsonable
from reportgen.render.jinja import TEMPLATES_DIR, markdown_to_html, render_html
from reportgen.site import windows
from reportgen.site.manifest import SiteRuns
from reportgen.site.plan import SitePlan
from reportgen.store.layout import slug

INDEX_RUNS = 50
ARCHIVE_PAGE_RUNS = 1000
HISTORY_WINDOW = 500
ARCHIVE_DIR = "archive"
HISTORY_DIR = "history"


@dataclass(frozen=True)
class ArchivePage:
    """One archive page: its number (from 1), the positions of its first and last run (from 1), its link."""

    number: int
    first: int
    last: int

    @property
    def href(self) -> str:
        return f"{ARCHIVE_DIR}/{self.number}.html"


@dataclass(frozen=True)
class HistoryCharts:
    """The groups the index shows, their chart files (by key) and steps, and what to keep in the manifest."""

    groups: tuple[HistoryGroup, ...]
    charts: dict[str, str]
    steps: dict[str, tuple[SeriesSteps, ...]]
    kept: dict[str, object]


def digests_of(run_ids: Sequence[str], runs: SiteRuns, plan: SitePlan) -> list[RunDigest]:
    """The digests of ``run_ids`` in their order: those the build holds (drawn now, carried), else the catalog's."""
    missing = [i for i in run_ids if i not in runs.digests]
    found = {d.run_id: d for d in plan.catalog.digests(missing)} if missing and plan.catalog else {}
    out = []
    for i in run_ids:
        d = runs.digests.get(i) or found.get(i)
        if d is None:
            raise BundleError(f"run {i}: in neither the store's catalog nor the site's manifest")
        out.append(d)
    return out


def history_points(run_ids: Sequence[str], runs: SiteRuns, plan: SitePlan, old_site: Path, window: int
                   ) -> tuple[list[GroupPoint], dict[str, int]]:
    """The history points of ``run_ids`` in each group's latest ``window`` runs, and each group's number of runs:
    the old site's windows (:mod:`reportgen.site.windows`, when this build only adds runs) or else the catalog
    (which reads no more than the window) for the runs whose digest the build does not hold, and the digests the
    build holds (pages drawn now, carried) for the others."""
    kept = windows.old_windows(run_ids, runs, plan, plan.old_lists.get("history"), old_site / HISTORY_DIR)
    if kept is not None:
        points, totals, covered = kept
    else:
        covered = set(run_ids).difference(runs.digests)
        points, totals = plan.catalog.latest_points(covered, window) if covered and plan.catalog else ([], {})
    held = runs.digests.keys() - covered  # the few drawn now or carried: no step per listed run
    held.intersection_update(run_ids)
    own = [p for i in sorted(held, key=lambda i: (runs.created_utc[i], i)) for p in group_points(runs.digests[i])]
    for key, count in run_counts(own).items():
        totals[key] = totals.get(key, 0) + count
    return points + own, totals


def archive_pages(count: int) -> list[ArchivePage]:
    """The archive's pages for ``count`` runs."""
    return [ArchivePage(k // ARCHIVE_PAGE_RUNS + 1, k + 1, min(count, k + ARCHIVE_PAGE_RUNS))
            for k in range(0, count, ARCHIVE_PAGE_RUNS)]


def write_archive(run_ids: Sequence[str], runs: SiteRuns, plan: SitePlan, root: Path, old_site: Path
                  ) -> tuple[list[ArchivePage], list[str], int]:
    """Every archive page (oldest run first): unchanged ones linked from the old site; pages, signatures, written."""
    pages = archive_pages(len(run_ids))
    old = plan.old_lists.get("archive")
    old_sigs = old if isinstance(old, list) else []
    sigs, written = [], 0
    (root / ARCHIVE_DIR).mkdir()
    for page in pages:
        chunk = run_ids[page.first - 1: page.last]
        last = page.number == len(pages)  # the last page says the total; the others name their neighbours only
        sig = _signature(plan.renderer_version, page.number, last, len(run_ids) if last else "", "\0".join(chunk))
        sigs.append(sig)
        target = root / page.href
        if page.number <= len(old_sigs) and old_sigs[page.number - 1] == sig and _link(old_site / page.href, target):
            continue
        html = render_html("archive.html", runs=digests_of(chunk, runs, plan), page=page, archive=pages,
                           run_count=len(run_ids), root="../")
        target.write_text(html, encoding="utf-8")
        written += 1
    return pages, sigs, written


HELP_DOC = "reading-a-report.md"
"""The help page's Markdown, shipped with the templates (docs/reading-a-report.md in the repository)."""


def write_help(plan: SitePlan, root: Path, old_site: Path) -> tuple[str, int]:
    """help/index.html from HELP_DOC, linked from the old site when the renderer is unchanged (converting the
    Markdown costs about 0.3 s in a fresh process); its signature, for the manifest, and the pages written."""
    sig = _signature(plan.renderer_version, HELP_DOC)
    (root / "help").mkdir()
    target = root / "help" / "index.html"
    if plan.old_lists.get("help") == sig and _link(old_site / "help" / "index.html", target):
        return sig, 0
    body = markdown_to_html((TEMPLATES_DIR / HELP_DOC).read_text(encoding="utf-8"))
    target.write_text(render_html("help.html", body=body, root="../"), encoding="utf-8")
    return sig, 1


def history_charts(run_ids: Sequence[str], runs: SiteRuns, plan: SitePlan, root: Path, old_site: Path
                   ) -> HistoryCharts:
    """The index's history groups (latest ``HISTORY_WINDOW`` runs each), with charts drawn only where they changed."""
    from reportgen.render.history_plot import history_chart

    points, totals = history_points(run_ids, runs, plan, old_site, HISTORY_WINDOW)
    groups = groups_from_points(points, HISTORY_WINDOW, totals)
    by_key: dict[str, list[GroupPoint]] = {}
    for p in points:
        by_key.setdefault(p.key, []).append(p)
    old = plan.old_lists.get("history")
    old_groups = old if isinstance(old, dict) else {}
    (root / HISTORY_DIR).mkdir()
    charts: dict[str, str] = {}
    steps: dict[str, tuple[SeriesSteps, ...]] = {}
    kept: dict[str, object] = {}
    for g in groups:
        sig = _signature(plan.renderer_version, repr(g))
        name = f"{slug(g.title, 60) or 'group'}-{hashlib.sha256(g.key.encode()).hexdigest()[:8]}.svg"
        prev = old_groups.get(g.key)
        charted = bool(g.series) and len(g.run_ids) >= 2  # one point is not a history: the table says it
        reused = _reuse_group(prev, sig, name, old_site, root, charted) if isinstance(prev, dict) else None
        steps[g.key] = reused if reused is not None else series_steps(g)
        if charted:
            charts[g.key] = f"{HISTORY_DIR}/{name}"
            if reused is None:
                history_chart(g, root / HISTORY_DIR / name, steps[g.key])
        window = _window_file(g, name, by_key.get(g.key, []), prev if reused is not None else None, old_site, root)
        kept[g.key] = {"signature": sig, "chart": name, "steps": to_jsonable(steps[g.key]), "window": window}
    return HistoryCharts(groups, charts, steps, kept)


def _window_file(group: HistoryGroup, chart: str, points: list[GroupPoint], unchanged: object, old_site: Path,
                 root: Path) -> str:
    """The group's window file beside its chart (:mod:`reportgen.site.windows`): linked from the old site when the
    group is ``unchanged`` (its old manifest entry), else written; its name."""
    name = windows.window_name(chart)
    target = root / HISTORY_DIR / name
    if not (isinstance(unchanged, dict) and unchanged.get("window") == name
            and _link(old_site / HISTORY_DIR / name, target)):
        windows.write(target, group, points)
    return name


def _reuse_group(prev: dict[str, Any], sig: str, name: str, old_site: Path, root: Path, charted: bool
                 ) -> tuple[SeriesSteps, ...] | None:
    """An unchanged group's steps, its chart linked from the old site; None when it must be drawn again."""
    if prev.get("signature") != sig or prev.get("chart") != name:
        return None
    try:
        found = from_jsonable(tuple[SeriesSteps, ...], prev.get("steps"), "manifest.json", "lists.history")
    except BundleError:
        return None
    if charted and not _link(old_site / HISTORY_DIR / name, root / HISTORY_DIR / name):
        return None
    return found


def _link(src: Path, dst: Path) -> bool:
    """Hard-link an unchanged file from the old site; False when it is not there (then it is drawn again)."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        try:
            dst.write_bytes(src.read_bytes())
        except OSError:
            return False
    return True


def _signature(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode() + b"\0")
    return h.hexdigest()[:24]
