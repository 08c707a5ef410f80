"""Page writers: run pages (in parallel), their charts and published data files, the index, help and assets."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reportgen import __version__
from reportgen.analysis.history import digest
from reportgen.analysis.run_view import RunView, run_view
from reportgen.errors import BundleError, TraceError, UsageError
from reportgen.model.run import Run
from reportgen.render.jinja import TEMPLATES_DIR, render_html, render_md
from reportgen.site.manifest import DATA_DIR, ManifestEntry, PageOrigin, SiteRun
from reportgen.site.workers import pool_map
from reportgen.store.files import read_regular
from reportgen.store.layout import RUN_FILE, safe_component
from reportgen.store.loader import load_run, member_file
from reportgen.store.outputs import NOJEKYLL
from reportgen.store.withdrawn import read_withdrawn

if TYPE_CHECKING:
    from reportgen.analysis.timeline import TimelineLayout

PAGES_PER_RUN = 2
"""A full run folder holds two pages: index.html and report.md (a compact one only index.html)."""
STATIC_FILES = ("style.css", "favicon.svg")
GZIP_MAGIC = b"\x1f\x8b"
ARTIFACT_SUFFIXES = {"neff": ".neff", "ntff": ".ntff", "pb": ".pb", "device-summary": ".json", "pftrace": ".pftrace"}
"""The published suffix of each artifact kind; any other kind is published as ``.bin`` (a download, never a
page a browser would run)."""
OTHER_SUFFIX = ".bin"
RUN_FILE_GZ = RUN_FILE + ".gz"
"""A compact (retired) page's copy of run.json, gzipped."""
BAD_DATA = (BundleError, TraceError)
"""A stored run failing with these (unreadable run.json, missing or broken trace) is left out of a build and
named; any other error fails the build and leaves the old site."""


@dataclass(frozen=True)
class RunPageTask:
    """One run page to render: the bundle, the folder to create, and the renderer's version for the manifest."""

    bundle: Path
    dest: Path
    renderer_version: str
    traces_retired: bool = False
    """Draw the page without the run's traces and artifacts (the site's retention policy)."""


@dataclass(frozen=True)
class RenderedPage:
    """A page rendered now: the run (loaded once, in the worker), its manifest entry and digest, pages written."""

    run: Run
    site_run: SiteRun
    pages: int


@dataclass(frozen=True)
class FailedPage:
    """A bundle whose page could not be made: its folder name and the one-line reason (it names the file)."""

    run_id: str
    reason: str


def render_run_pages(tasks: list[RunPageTask], jobs: int) -> list[RenderedPage | FailedPage]:
    """Render every task's run page, across up to ``jobs`` processes; the bytes are the same as a serial build's.

    Workers are forked (Linux only; elsewhere pages render in this process): they start in
    milliseconds with everything imported, and need no ``__main__`` guard in the caller's script.
    Each page is written by exactly one worker into its own folder.
    """
    return pool_map(render_task, tasks, jobs)


RUN_PAGE_TEMPLATES = ("run.html", "charts/bars.svg", "charts/timeline.svg")


def warm_up(matplotlib: bool = False) -> None:
    """Load what drawing a run page needs before the pages are known: its templates compiled, and with
    ``matplotlib`` (before forking many workers) the sweep and memory charts' matplotlib, which most pages
    (bars and timelines are SVG templates) never import."""
    from reportgen.analysis import timeline  # noqa: F401  with the device registry: what a page with traces needs
    from reportgen.render import bars, timeline_plot  # noqa: F401
    from reportgen.render.jinja import html_env, md_env

    for name in RUN_PAGE_TEMPLATES:
        html_env().get_template(name)
    md_env().get_template("run.md")
    if matplotlib:
        from reportgen.render import memory_plot, sweep_plots  # noqa: F401


def render_task(task: RunPageTask, write: bool = True) -> RenderedPage | FailedPage:
    """Worker entry point: load one bundle, render its page (unless ``write`` is False), and return what the
    index needs of it; a bundle that cannot be read or drawn is a FailedPage (its folder removed)."""
    try:
        run = load_run(task.bundle)
        entry = ManifestEntry(run.run_id, sha256_file(task.bundle / RUN_FILE), task.renderer_version,
                              task.traces_retired)
        view = run_view(run)
    except BAD_DATA as exc:
        return FailedPage(task.bundle.name, exc.message)
    try:
        pages = (write_run_page(run, task.bundle, task.dest, view, task.traces_retired) if write
                 else pages_per_run(task.traces_retired))
    except BAD_DATA as exc:
        shutil.rmtree(task.dest, ignore_errors=True)
        return FailedPage(task.bundle.name, exc.message)
    return RenderedPage(run, SiteRun(entry, run.created_utc, PageOrigin.RENDERED, digest(run, view)), pages)


def write_pages(tasks: list[RunPageTask]) -> list[FailedPage]:
    """Write the pages of runs already loaded elsewhere (a background child); the ones that failed."""
    failed = []
    for task in tasks:
        try:
            run = load_run(task.bundle)
        except BAD_DATA as exc:  # this build's own process found it too, and keeps the old page in its place
            failed.append(FailedPage(task.bundle.name, exc.message))
            continue
        try:
            write_run_page(run, task.bundle, task.dest, retired=task.traces_retired)
        except BAD_DATA as exc:
            shutil.rmtree(task.dest, ignore_errors=True)
            failed.append(FailedPage(task.bundle.name, exc.message))
    return failed


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file."""
    return hashlib.sha256(read_regular(path)).hexdigest()


def write_run_page(run: Run, bundle: Path, dest: Path, view: RunView | None = None, retired: bool = False) -> int:
    """A run's permanent folder: HTML page, Markdown report, charts, run.json and raw traces (``retired``: a compact
    page, its summary and speedups in HTML with every figure in a gzipped run.json; no traces, timelines, device
    artifacts or Markdown copy, which the site's retention policy retired). Returns the pages written."""
    dest.mkdir(parents=True)
    view = view or run_view(run)
    images = _run_images(view, bundle, dest, retired)
    downloads = copy_data(run, bundle, dest, retired)
    context = {"rv": view, "run": run, "images": images, "downloads": downloads, "root": "../../",
               "withdrawn": read_withdrawn(bundle.parent).get(run.run_id), "traces_retired": retired}
    (dest / "index.html").write_text(render_html("run.html", **context), encoding="utf-8")
    if not retired:  # a compact page has no Markdown copy: a quarter of its bytes, on most pages of a large site
        (dest / "report.md").write_text(render_md("run.md", **context), encoding="utf-8")
    return pages_per_run(retired)


def pages_per_run(compact: bool) -> int:
    """Pages in a run's folder: index.html and report.md; a compact page's index.html alone."""
    return 1 if compact else PAGES_PER_RUN


@dataclass(frozen=True)
class RunImages:
    """File names (relative to the run folder) of a run page's images; None where none could be drawn."""

    bars: str | None
    timelines: dict[str, str]
    timeline_notes: dict[str, str]
    scaling: str | None = None
    roofline: str | None = None
    memory_timelines: dict[str, str] = field(default_factory=dict)
    """Each variant's memory timeline of one call (those with memory figures and a timeline)."""
    sweep_memory: str | None = None


def _run_images(view: RunView, bundle: Path, dest: Path, retired: bool = False) -> RunImages:
    """Draw the bar chart and one timeline snapshot per variant that has a trace."""
    from reportgen.render.bars import bar_chart
    from reportgen.render.timeline_plot import timeline_chart

    if retired:  # a compact page: its figures as tables only
        return RunImages(None, {}, {})
    bars = None
    if view.has_samples:
        bars = "time-per-variant.svg"
        bar_chart(view.variants, dest / bars, f"{view.run.scenario.name}: median time per call")
    timelines: dict[str, str] = {}
    notes: dict[str, str] = {}
    for v in view.variants:
        if v.trace_path is None:
            notes[v.name] = "no trace stored for this variant"
            continue
        name = f"timeline-{safe_component(v.name, 60)}.svg"
        layout = _timeline_for(member_file(bundle, v.trace_path))
        timeline_chart(layout, dest / name, f"{v.name}: {layout.step_name or 'trace'} "
                       f"({layout.event_count} events, {layout.window_us:,.1f} µs)")
        timelines[v.name] = name
    scaling = roofline = sweep_memory = None
    if view.sweep is not None and any(c.timing for r in view.sweep.rows for c in r.cells):
        from reportgen.render.sweep_plots import memory_chart, roofline_chart, scaling_chart  # matplotlib

        scaling, roofline = "sweep-scaling.png", "sweep-roofline.png"
        name = view.run.scenario.name
        scaling_chart(view.sweep, dest / scaling, f"{name}: achieved bandwidth across shapes")
        roofline_chart(view.sweep, dest / roofline, f"{name}: roofline ({view.run.scenario.parameters.get('dtype', '')})")
        if any(c.peak_bytes for r in view.sweep.rows for c in r.cells):
            sweep_memory = "sweep-memory.png"
            memory_chart(view.sweep, dest / sweep_memory, f"{name}: peak memory per call across shapes")
    memory: dict[str, str] = {}
    for i, v in enumerate(view.variants):
        if v.memory is not None and v.memory.timeline:
            from reportgen.render.memory_plot import memory_timeline_chart  # matplotlib

            memory[v.name] = f"memory-{safe_component(v.name, 60)}.png"
            memory_timeline_chart(v.memory, dest / memory[v.name], f"{v.name}: live memory over one call", i)
    return RunImages(bars, timelines, notes, scaling, roofline, memory, sweep_memory)


def _timeline_for(trace_file: Path) -> TimelineLayout:
    """Read a stored trace and lay out its representative iteration (the whole trace if it has no steps)."""
    from reportgen.analysis.timeline import TrackNames, iteration_window, representative_step, timeline_layout
    from reportgen.traces import reader as trace_reader

    tr = trace_reader.read_trace(trace_file)
    step = representative_step(trace_reader.profiler_steps(tr))
    if step is not None:
        start, end = iteration_window(tr.events, step.start_us, step.start_us + step.duration_us)
        label = step.name
    elif tr.events:
        start = min(e.start_us for e in tr.events)
        end = max(e.start_us + e.duration_us for e in tr.events)
        label = ""
    else:
        start, end, label = 0.0, 1.0, ""
    events = trace_reader.events_in_window(tr, start, end)
    return timeline_layout(events, start, end, label, TrackNames(tr.thread_names, tr.process_names))


@dataclass(frozen=True)
class Downloads:
    """Relative links of the raw data beside a run page."""

    run_json: str
    traces: dict[str, str]
    artifacts: tuple[tuple[str, str, str, int], ...] = ()
    """(variant, href, kind, size in bytes) of each device artifact (.neff, .ntff, .pb ...)."""


def copy_data(run: Run, bundle: Path, dest: Path, retired: bool = False) -> Downloads:
    """Copy run.json byte for byte, every variant's trace and device artifacts under ``data/``.

    Each file is published under a name reportgen chooses from its kind (``traces/<variant>.json.gz``,
    ``artifacts/<variant>/<name>.neff`` ...), never under the suffix the bundle gave it: a bundle naming a
    file ``report.html`` or ``a.svg`` must not put a page that runs script on the published site.
    """
    data = dest / DATA_DIR
    data.mkdir()
    if retired:  # a compact page keeps the run's every figure, gzipped (a sixth of the bytes)
        (data / RUN_FILE_GZ).write_bytes(gzip.compress(read_regular(bundle / RUN_FILE), mtime=0))
        return Downloads(f"{DATA_DIR}/{RUN_FILE_GZ}", {})
    shutil.copyfile(bundle / RUN_FILE, data / RUN_FILE)
    published: dict[str, str] = {}
    traces: dict[str, str] = {}
    artifacts: list[tuple[str, str, str, int]] = []
    for v in run.variants:
        if v.trace_path is not None:
            source = member_file(bundle, v.trace_path)
            traces[v.name] = _publish(source, "traces", _trace_suffix(source), v.trace_path, data, published)
        for a in v.artifacts:
            source = member_file(bundle, a.path)
            folder = f"artifacts/{safe_component(v.name, 60)}"
            href = _publish(source, folder, ARTIFACT_SUFFIXES.get(a.kind, OTHER_SUFFIX), a.path, data, published)
            artifacts.append((v.name, href, a.kind, a.size_bytes))
    return Downloads(f"{DATA_DIR}/{RUN_FILE}", traces, tuple(artifacts))


def published_name(member: str, suffix: str) -> str:
    """A member's published file name: its base name made safe, ending in ``suffix`` (chosen by reportgen)."""
    base = member.rsplit("/", 1)[-1]
    stem = base[: -len(suffix)] if base.lower().endswith(suffix) else base
    return f"{safe_component(stem, 80) or 'file'}{suffix}"


def _publish(source: Path, folder: str, suffix: str, member: str, data: Path, published: dict[str, str]) -> str:
    """Copy one bundle file under ``data/<folder>/`` once (a member named twice is copied once); its href."""
    key = f"{member}\0{suffix}"
    if key in published:
        return published[key]
    rel = f"{folder}/{published_name(member, suffix)}"
    taken = set(published.values())
    n = 2
    while f"{DATA_DIR}/{rel}" in taken:
        rel = f"{folder}/{published_name(member, suffix)[: -len(suffix)]}-{n}{suffix}"
        n += 1
    target = data / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    published[key] = f"{DATA_DIR}/{rel}"
    return published[key]


def _trace_suffix(source: Path) -> str:
    """``.json.gz`` for a gzip-compressed trace, ``.json`` for plain JSON, whatever the bundle named it."""
    with open(source, "rb") as fh:
        return ".json.gz" if fh.read(2) == GZIP_MAGIC else ".json"


def write_index(context: dict[str, Any], latest_run: Run | None, root: Path) -> int:
    """index.html and index.md (``context``: what the index shows) and the latest/ redirect."""
    latest = run_view(latest_run) if latest_run else None
    context = {**context, "latest": latest, "built_at": built_at(), "version": __version__, "root": ""}
    (root / "index.html").write_text(render_html("index.html", **context), encoding="utf-8")
    (root / "index.md").write_text(render_md("index.md", **context), encoding="utf-8")
    (root / "latest").mkdir()
    (root / "latest" / "index.html").write_text(render_html("latest.html", latest=latest, root="../"),
                                                encoding="utf-8")
    return 3


def built_at() -> str:
    """The build time shown on the index: SOURCE_DATE_EPOCH when set (reproducible builds), else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        try:
            moment = datetime.fromtimestamp(int(epoch), tz=timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"SOURCE_DATE_EPOCH={epoch[:30]!r}: expected whole seconds since 1970") from None
    else:
        moment = datetime.now(timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def write_static(root: Path) -> None:
    """The stylesheet, the icon (else browsers ask the host root for /favicon.ico) and .nojekyll."""
    (root / "assets").mkdir()
    for name in STATIC_FILES:
        shutil.copyfile(TEMPLATES_DIR / name, root / "assets" / name)
    (root / NOJEKYLL).write_bytes(b"")
