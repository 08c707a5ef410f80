"""``reportgen build``: the stages of a build, from the lock to the swap.

1. check ``--out`` (refusals change nothing: no lock file, no folder), lock the site, read the old manifest;
2. plan (:mod:`reportgen.site.plan`): reuse, render or carry each run's page;
3. write into a temporary folder next to the site (:mod:`reportgen.site.pages`, in background processes
   from :mod:`reportgen.site.workers`); a bundle that cannot be read or drawn is left out and named;
4. swap the folder into place (:mod:`reportgen.site.fs`); a failure at any stage leaves the old site as it was.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import filterfalse
from pathlib import Path

from reportgen.errors import SiteError, UsageError
from reportgen.site import fs, windows
from reportgen.site.lists import (
    ARCHIVE_DIR,
    HISTORY_DIR,
    INDEX_RUNS,
    digests_of,
    history_charts,
    write_archive,
    write_help,
)
from reportgen.site.manifest import (
    RUNS_DIR,
    PageOrigin,
    SiteRun,
    SiteRuns,
    manifest_stamp,
    read_old_site,
    write_manifest,
)
from reportgen.site.pages import (
    FailedPage,
    RenderedPage,
    RunPageTask,
    render_run_pages,
    render_task,
    warm_up,
    write_index,
    write_pages,
    write_static,
)
from reportgen.site.plan import SitePlan, carried_site_run, gather, load_latest
from reportgen.site.workers import (
    BackgroundChild,
    HereChild,
    background_child,
    collector_paused,
    default_jobs,
    render_workers,
)
from reportgen.store.atomic import make_folders
from reportgen.store.loader import check_store_has_runs
from reportgen.store.outputs import MANIFEST_FILE, NOJEKYLL, SITE_MARKERS
from reportgen.store.writer import make_temp_dir


@dataclass(frozen=True)
class BuildResult:
    """What a build did, for the CLI's one-line summary."""

    out: Path
    runs_total: int
    rendered: int
    reused: int
    carried: int
    pages_written: int
    skipped: tuple[FailedPage, ...] = ()

    def summary(self) -> str:
        """One line: pages written, runs, output folder."""
        left_out = f"; {len(self.skipped)} unreadable run(s) left out" if self.skipped else ""
        return (f"built {self.out}: {self.pages_written} page(s) written, {self.runs_total} run(s) "
                f"({self.rendered} rendered, {self.reused} unchanged, {self.carried} kept from earlier builds)"
                f"{left_out}")


def warn_on_stderr(message: str) -> None:
    """The default warning sink of a build: one line on stderr."""
    print(f"reportgen: warning: {message}", file=sys.stderr)


@collector_paused()  # the whole build: its forked children collect again (workers.worker_init)
def build_site(store: Path, out: Path, base_url: str, jobs: int | None = None,
               warn: Callable[[str], None] = warn_on_stderr, *, strict: bool = False,
               keep_traces: int | None = None, verify: bool = False,
               fetch: Callable[[Sequence[str]], None] | None = None) -> BuildResult:
    """Build the site for every run in ``store`` into ``out``, atomically, keeping older run pages.

    ``jobs``: processes that render run pages (default: $REPORTGEN_JOBS, else the usable CPUs).
    ``warn``: told one line per stored run left out because it cannot be read or drawn.
    ``strict``: a warning fails the build (SiteError, exit 3) before the swap: the old site stays as it was.
    ``keep_traces``: publish the traces and device artifacts of only the latest N runs of each history series
    (the others' pages are drawn again without them, and say so; run.json is always published); None: all.
    ``verify``: check every stored run.json and reused page too (:func:`reportgen.site.plan.gather`).
    ``fetch``: told, before any page is drawn, the runs whose pages are drawn with their traces (an object store's
    mirror holds only the ``run.json`` of the others: :func:`reportgen.store.session.building_store`).
    """
    if keep_traces is not None and keep_traces < 0:
        raise UsageError(f"keep_traces {keep_traces}: expected 0 or more runs per history series",
                         field="keep_traces")
    base = normalise_base_url(base_url)
    jobs = default_jobs() if jobs is None else jobs
    if not store.is_dir():
        raise SiteError(f"{store}: no such results folder; run 'reportgen profile' first or pass --runs FOLDER")
    # a run bundle or an unrelated folder as --runs: one line, not a warning per folder
    if not check_store_has_runs(store):
        raise SiteError(f"{store}: holds no runs; run 'reportgen profile' or 'reportgen import' first "
                        "(the site was not changed)")
    fs.check_build_target(out, store, SITE_MARKERS)
    stamp = manifest_stamp(out)
    old = read_old_site(out)  # refuse a folder that is not a site before the lock file is made
    make_folders(out.parent)
    with fs.exclusive_lock(out), background_child(write_pages, warm_up, fork=jobs > 1) as drawer:
        fs.clear_leftovers(out, Path(MANIFEST_FILE), RUNS_DIR)
        if stamp is None or manifest_stamp(out) != stamp:  # another build swapped the site in meanwhile
            old = read_old_site(out)
        plan = gather(store, out, old, keep_traces, verify=verify, jobs=jobs)  # lists the store again, under the lock
        if fetch is not None:
            fetch([p.run_id for p in plan.render if p.run_id not in plan.retired])
        tmp = make_temp_dir(out.parent, fs.name_tag(out), fs.TMP_PREFIX)
        try:
            os.chmod(tmp, 0o755)
            pages, published, skipped = write_site(plan, tmp, base, out, jobs, drawer)
            if strict and skipped:
                _fail_strict(skipped, out, warn)
            fs.commit(tmp, out, RUNS_DIR)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    for failure in skipped:
        warn(f"{failure.reason} (run {failure.run_id} left out of this build)")
    return BuildResult(out, len(published), published.count(PageOrigin.RENDERED),
                       published.count(PageOrigin.REUSED), published.count(PageOrigin.CARRIED), pages, tuple(skipped))


def _fail_strict(skipped: list[FailedPage], out: Path, warn: Callable[[str], None]) -> None:
    """``build --strict``: say every warning, then refuse the build (the new site is thrown away unswapped)."""
    for failure in skipped:
        warn(f"{failure.reason} (run {failure.run_id})")
    raise SiteError(f"{out}: not changed: --strict and {len(skipped)} warning(s) above (first: run "
                    f"{skipped[0].run_id}); fix or withdraw the run, or build without --strict")


def normalise_base_url(base_url: str) -> str:
    """``/myrepo`` -> ``/myrepo/``; an absolute http(s) URL is kept; anything else is a usage error."""
    if not (base_url.startswith("/") or base_url.startswith(("https://", "http://"))) or any(
        c in base_url for c in "\"'<> \t\n\\"
    ):
        raise UsageError(f"base_url {base_url!r}: expected a path like /myrepo/ or an http(s) URL", field="base_url")
    return base_url if base_url.endswith("/") else base_url + "/"


def write_site(plan: SitePlan, root: Path, base_url: str, old_site: Path, jobs: int = 1,
               drawer: BackgroundChild | HereChild | None = None) -> tuple[int, SiteRuns, list[FailedPage]]:
    """Write the whole site under ``root``; returns the pages written, the runs published and those left out.

    Only new (and redrawn) run folders are written: the old site's stay where they are and are carried
    over by :func:`fs.commit`. New pages are rendered by worker processes (many), by ``drawer`` (a child forked
    before planning, a few pages, with ``jobs`` > 1) while this process writes the index, or here; then what
    lists the runs: the index, archive, history charts (SVG: no matplotlib in this process) and the manifest.
    """
    (root / RUNS_DIR).mkdir()
    tasks = [RunPageTask(p.bundle, root / RUNS_DIR / p.run_id, plan.renderer_version, p.run_id in plan.retired)
             for p in plan.render]
    if tasks and drawer is not None and jobs > 1 and render_workers(len(tasks), jobs) == 1:
        drawer.submit(tasks)  # a few new pages (adding runs to a site): drawn beside the index
        rendered, failed = _split([render_task(t, write=False) for t in tasks])
        published = _published(plan, _keep_old_pages(failed, plan, old_site), rendered)
        pages = _write_lists(published, failed, plan, root, base_url, old_site, rendered)
        late = [f for f in drawer.wait() or [] if f.run_id not in {x.run_id for x in failed}]
        if late:  # the child could not draw a page the index lists: list the runs again without it
            gone = {f.run_id for f in late}
            rendered = [r for r in rendered if r.site_run.entry.run_id not in gone]
            failed = sorted([*failed, *late], key=lambda f: f.run_id)
            published = _published(plan, _keep_old_pages(failed, plan, old_site), rendered)
            _remove_lists(root)
            pages = _write_lists(published, failed, plan, root, base_url, old_site, rendered)
    else:
        if drawer is not None:
            drawer.close()  # not needed: many pages go to a pool, none or one process draws here
        if tasks:
            warm_up(matplotlib=render_workers(len(tasks), jobs) > 1)  # once, before the workers' fork (if any)
        rendered, failed = _split(render_run_pages(tasks, jobs))
        published = _published(plan, _keep_old_pages(failed, plan, old_site), rendered)
        pages = _write_lists(published, failed, plan, root, base_url, old_site, rendered)
    return pages, published, failed


def _published(plan: SitePlan, kept: list[SiteRun], rendered: list[RenderedPage]) -> SiteRuns:
    """Every run the new site lists: reused, carried, kept from the old site, rendered now."""
    runs = plan.reused.copy()
    for run in (*plan.carried, *kept, *(r.site_run for r in rendered)):
        runs.add(run)
    return runs


def _split(results: list[RenderedPage | FailedPage]) -> tuple[list[RenderedPage], list[FailedPage]]:
    """Pages made, and bundles left out (by run id)."""
    failed = sorted((r for r in results if isinstance(r, FailedPage)), key=lambda f: f.run_id)
    return [r for r in results if isinstance(r, RenderedPage)], failed


def _keep_old_pages(failed: list[FailedPage], plan: SitePlan, old_site: Path) -> list[SiteRun]:
    """The old site's pages of runs whose bundles can no longer be drawn: kept as they were (append-only)."""
    fallbacks = {p.run_id: p.fallback for p in plan.render if p.fallback is not None}
    return [carried_site_run(old_site, old) for f in failed if (old := fallbacks.get(f.run_id)) is not None]


def _remove_lists(root: Path) -> None:
    """Delete what _write_lists wrote, so that it can write them again."""
    for folder in (HISTORY_DIR, ARCHIVE_DIR, "latest", "help", "assets"):
        shutil.rmtree(root / folder, ignore_errors=True)
    for name in ("index.html", "index.md", NOJEKYLL, MANIFEST_FILE):
        (root / name).unlink(missing_ok=True)


def _write_lists(every: SiteRuns, failed: list[FailedPage], plan: SitePlan, root: Path, base_url: str,
                 old_site: Path, rendered: list[RenderedPage]) -> int:
    """What lists the runs (the index with the newest run's summary, the archive, the history charts), assets and
    the manifest; only what changed is drawn (:mod:`reportgen.site.lists`)."""
    runs = list(filterfalse(plan.withdrawn.__contains__, every.by_time()))  # in C: no step per run
    latest = None
    if runs:
        newest = runs[-1]
        fresh = next((r.run for r in rendered if r.site_run.entry.run_id == newest), None)
        latest = fresh or load_latest(plan, newest, every.origin[newest], old_site)
    archive, archive_sigs, pages = write_archive(runs, every, plan, root, old_site)
    history = history_charts(runs, every, plan, root, old_site)
    shown = list(reversed(digests_of(runs[-INDEX_RUNS:], every, plan)))
    context = {"runs": shown, "run_count": len(runs), "archive": archive, "groups": history.groups,
               "retired": len(every.retired), "keep_traces": plan.keep_traces,
               "latest_compact": bool(runs) and runs[-1] in every.retired,
               "compact_ids": every.retired.intersection(runs[-INDEX_RUNS:]),
               "charts": history.charts, "steps": history.steps, "base_url": base_url, "skipped": failed}
    help_sig, help_pages = write_help(plan, root, old_site)
    pages += sum(r.pages for r in rendered) + write_index(context, latest, root) + help_pages
    write_static(root)
    write_manifest(every, root, base_url, {"archive": archive_sigs, "history": history.kept, "help": help_sig,
                                           windows.STATE_KEY: windows.state(plan)})
    return pages
