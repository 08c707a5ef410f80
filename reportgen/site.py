"""``reportgen build``: the versioned, append-only static report site.

The build runs in stages, gathering everything before it writes anything:

1. lock the site and read the old site's manifest (refusing a folder that is not a site);
2. gather: load every stored run, hash its ``run.json``, decide per run whether its page is
   reused from the old site (same hash, same renderer), rendered afresh, or carried over
   because the run left the store (append-only: a page once published is never removed);
3. render into a temporary folder next to the site: run pages, index, history charts,
   ``latest/``, assets, manifest;
4. swap the temporary folder into place; a failure at any stage leaves the old site as it was.

Layout: ``index.html``, ``index.md``, ``runs/<run_id>/{index.html,report.md,*.svg,data/}``,
``latest/index.html``, ``history/*.png``, ``help/index.html``, ``assets/style.css``,
``.nojekyll``, ``manifest.json``. Every link is relative, so the site works offline and under
any sub-path.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import math
import multiprocessing
import os
import pickle
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from reportgen import __version__, analysis
from reportgen.bundle import (
    RUN_FILE,
    is_valid_run_id,
    list_run_dirs,
    load_run,
    make_temp_dir,
    member_file,
    parse_run_json,
    remove_stale_temp_dirs,
    safe_component,
    slug,
)
from reportgen.codec import from_jsonable, to_jsonable
from reportgen.errors import BundleError, ConflictError, ReportgenError, SiteError, UsageError
from reportgen.model import DeviceKind, Run, RunSource, VariantStatus
from reportgen.render import TEMPLATES_DIR, markdown_to_html, render_html, render_md
from reportgen.withdrawn import read_withdrawn

SITE_SCHEMA_VERSION = 1
MANIFEST_FILE = "manifest.json"
RUNS_DIR = "runs"
DATA_DIR = "data"
TMP_PREFIX = ".site-tmp-"
OLD_PREFIX = ".site-old-"
DOCS_DIR = Path(__file__).resolve().parent.parent / "docs"
HELP_DOC = DOCS_DIR / "reading-a-report.md"
_RENDERER_SOURCES = ("analysis.py", "plots.py", "render.py", "site.py")
E = TypeVar("E", bound=Enum)
T = TypeVar("T")


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
    digest: analysis.RunDigest | None


@dataclass(frozen=True)
class SiteRun:
    """One published run of the new site: its manifest entry, its digest, and where its page came from."""

    entry: ManifestEntry
    digest: analysis.RunDigest
    origin: PageOrigin


@dataclass(frozen=True)
class PlannedRun:
    """One run of the new site and where its page comes from."""

    run_id: str
    origin: PageOrigin
    page_source: Path
    """The bundle (to render), or the old site's run folder (to reuse or carry)."""
    bundle: Path | None
    """The run's bundle in the store; None for a run carried over from an older build."""
    known: SiteRun | None = None
    """Entry and digest of a reused or carried page; None for a page rendered now (known once rendered)."""


@dataclass(frozen=True)
class SitePlan:
    """Everything gathered before writing: the runs to render, reuse or carry, and the renderer's version."""

    runs: tuple[PlannedRun, ...]
    renderer_version: str
    withdrawn: frozenset[str] = frozenset()  # runs `reportgen rm` withdrew: kept in the manifest, out of the index


@dataclass(frozen=True)
class BuildResult:
    """What a build did, for the CLI's one-line summary."""

    out: Path
    runs_total: int
    rendered: int
    reused: int
    carried: int
    pages_written: int

    def summary(self) -> str:
        """One line: pages written, runs, output folder."""
        return (f"built {self.out}: {self.pages_written} page(s) written, {self.runs_total} run(s) "
                f"({self.rendered} rendered, {self.reused} unchanged, {self.carried} kept from earlier builds)")


# ---------------------------------------------------------------------------------------------
# Entry point


def build_site(store: Path, out: Path, base_url: str, jobs: int | None = None) -> BuildResult:
    """Build the site for every run in ``store`` into ``out``, atomically, keeping older run pages.

    ``jobs``: processes that render run pages (default: $REPORTGEN_JOBS, else the usable CPUs).
    """
    base = normalise_base_url(base_url)
    jobs = default_jobs() if jobs is None else jobs
    if not store.is_dir():
        raise SiteError(f"{store}: no such results folder; run 'reportgen profile' first or pass --runs FOLDER")
    if not list_run_dirs(store):
        raise SiteError(f"{store}: holds no runs; run 'reportgen profile' or 'reportgen import' first "
                        "(the site was not changed)")
    if out.is_symlink():
        raise SiteError(f"{out}: is a symbolic link; pass --out the real site folder (the lock is kept beside it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with _site_lock(out):
        _clear_leftovers(out)
        old_entries = read_manifest(out)
        plan = gather(store, out, old_entries)
        tmp = make_temp_dir(out.parent, out.name, TMP_PREFIX)
        try:
            os.chmod(tmp, 0o755)
            pages = write_site(plan, tmp, base, out, jobs)
            _swap(tmp, out)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    counts = {o: sum(1 for r in plan.runs if r.origin is o) for o in PageOrigin}
    return BuildResult(out, len(plan.runs), counts[PageOrigin.RENDERED], counts[PageOrigin.REUSED],
                       counts[PageOrigin.CARRIED], pages)


def normalise_base_url(base_url: str) -> str:
    """``/myrepo`` -> ``/myrepo/``; an absolute http(s) URL is kept; anything else is a usage error."""
    if not (base_url.startswith("/") or base_url.startswith(("https://", "http://"))) or any(
        c in base_url for c in "\"'<> \t\n\\"
    ):
        raise UsageError(f"--base-url {base_url!r}: expected a path like /myrepo/ or an http(s) URL")
    return base_url if base_url.endswith("/") else base_url + "/"


@contextlib.contextmanager
def _site_lock(out: Path) -> Iterator[None]:
    """Hold an exclusive, non-blocking lock beside the site for the whole build."""
    lock_path = out.parent / f".{out.name}.lock"
    with open(lock_path, "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConflictError(f"another reportgen build or publish is using {out}; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _swap(tmp: Path, out: Path) -> None:
    """Put the new site in place: one atomic exchange of the folders where the system has it, else two renames.

    After an exchange ``tmp`` holds the old site (the caller deletes it). Without one, the old site is moved
    aside first; a kill between the two renames leaves it there, and the next build puts it back.
    """
    if not out.exists():
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        return
    aside = make_temp_dir(out.parent, out.name, OLD_PREFIX)
    os.rmdir(aside)
    os.rename(out, aside)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(aside, out)
        raise
    shutil.rmtree(aside, ignore_errors=True)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step with Linux's renameat2(RENAME_EXCHANGE); False where it is not available."""
    try:
        func = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _clear_leftovers(out: Path) -> None:
    """Under the lock: put back a site that a killed build had moved aside, then delete killed builds' folders."""
    if not out.exists():
        tag = f"-{slug(out.name, 40) or 'x'}-"
        aside = [p for p in remove_stale_temp_dirs(out.parent, OLD_PREFIX, dry_run=True) if tag in p.name]
        if len(aside) == 1 and (aside[0] / MANIFEST_FILE).is_file():
            os.rename(aside[0], out)
    remove_stale_temp_dirs(out.parent, TMP_PREFIX)
    remove_stale_temp_dirs(out.parent, OLD_PREFIX)


# ---------------------------------------------------------------------------------------------
# Stage 1-2: the old manifest and the plan


def read_manifest(out: Path) -> dict[str, OldEntry]:
    """The old site's published runs by id; {} for no site or an empty folder; refuse anything else."""
    if not out.exists():
        return {}
    if not out.is_dir():
        raise SiteError(f"{out}: is a file, not a site folder; pass --out a folder")
    path = out / MANIFEST_FILE
    if not path.is_file():
        if any(out.iterdir()):
            raise SiteError(f"{out}: not empty and has no {MANIFEST_FILE}, so it is not a reportgen site; "
                            "pass --out an empty or new folder (nothing was changed)")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SiteError(f"{path}: unreadable ({exc}); restore it or build into a new folder") from None
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
        fields = ("run_id", "run_json_sha256", "renderer_version")
        if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in fields):
            raise SiteError(f"{path}: field 'runs[{i}]' must have string run_id, run_json_sha256, renderer_version")
        if not is_valid_run_id(item["run_id"]):
            raise SiteError(f"{path}: field 'runs[{i}].run_id' {item['run_id'][:60]!r} is not a safe folder name")
        entry = ManifestEntry(item["run_id"], item["run_json_sha256"], item["renderer_version"])
        digest = _parse_digest(item.get("digest"), path, i)
        out[entry.run_id] = OldEntry(entry, digest)
    return out


def _parse_digest(data: object, path: Path, i: int) -> analysis.RunDigest | None:
    """A run's stored digest; None when absent (the run is then loaded from its run.json)."""
    if data is None:
        return None
    fast = digest_from_manifest(data)
    if fast is not None:
        return fast
    try:
        return from_jsonable(analysis.RunDigest, data, path, f"runs[{i}].digest")
    except BundleError as exc:
        raise SiteError(f"{exc}; restore the manifest or build into a new folder") from None


_DIGEST_FIELDS = frozenset(f.name for f in fields(analysis.RunDigest))
_VARIANT_DIGEST_FIELDS = frozenset(f.name for f in fields(analysis.VariantDigest))


def digest_from_manifest(data: object) -> analysis.RunDigest | None:
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
    return analysis.RunDigest(data["run_id"], data["created_utc"], data["label"], source, device,
                              data["device_name"], data["scenario"], dict(params), sha, base,
                              tuple(v for v in decoded if v is not None), data["machine"])


def _variant_digest_from_manifest(data: object) -> analysis.VariantDigest | None:
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
    return analysis.VariantDigest(data["name"], status, median, low, high,
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


def renderer_version() -> str:
    """reportgen's version plus a digest of the templates and renderer code: a change re-renders pages."""
    h = hashlib.sha256()
    files = sorted(p for p in TEMPLATES_DIR.rglob("*") if p.is_file())
    files += [Path(__file__).resolve().parent / name for name in _RENDERER_SOURCES]
    for p in files:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return f"{__version__}+{h.hexdigest()[:12]}"


def gather(store: Path, out: Path, old: dict[str, OldEntry]) -> SitePlan:
    """Hash every stored run and decide, per run, whether to render, reuse or carry its page.

    An unchanged run (same run.json hash, same renderer) is not even loaded: its digest comes
    from the old manifest, which keeps adding one run to a large site cheap. A run to render is
    loaded later, once, by the process that renders its page.
    """
    version = renderer_version()
    planned: dict[str, PlannedRun] = {}
    withdrawn = frozenset(read_withdrawn(store))
    for bundle in list_run_dirs(store):
        planned[bundle.name] = (None if bundle.name in withdrawn else _reuse(bundle, out, old, version)) or PlannedRun(
            bundle.name, PageOrigin.RENDERED, bundle, bundle)
    for run_id, prev in sorted(old.items()):
        if run_id not in planned:
            d = prev.digest or analysis.digest(_load_carried(out, run_id))
            planned[run_id] = PlannedRun(run_id, PageOrigin.CARRIED, out / RUNS_DIR / run_id, None,
                                         SiteRun(prev.entry, d, PageOrigin.CARRIED))
    return SitePlan(tuple(planned.values()), version, withdrawn)


def _reuse(bundle: Path, out: Path, old: dict[str, OldEntry], version: str) -> PlannedRun | None:
    """The old page of an unchanged bundle, or None when the run must be (re)loaded and rendered."""
    prev = old.get(bundle.name)
    run_json = bundle / RUN_FILE
    if prev is None or prev.digest is None or bundle.is_symlink() or run_json.is_symlink() or not run_json.is_file():
        return None
    entry = ManifestEntry(bundle.name, _sha256(run_json), version)
    page = out / RUNS_DIR / bundle.name
    if prev.entry != entry or not (page / "index.html").is_file():
        return None
    return PlannedRun(bundle.name, PageOrigin.REUSED, page, bundle, SiteRun(entry, prev.digest, PageOrigin.REUSED))


def _load_latest(newest: PlannedRun, out: Path) -> Run:
    """The newest run in full, for the index's summary: from the store, or from the old site."""
    if newest.bundle is not None:
        return load_run(newest.bundle)
    return _load_carried(out, newest.run_id)


def _load_carried(out: Path, run_id: str) -> Run:
    """The run.json copy kept in the old site for a run that is no longer in the store."""
    path = out / RUNS_DIR / run_id / DATA_DIR / RUN_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise SiteError(f"{path}: missing, but {MANIFEST_FILE} lists run {run_id} and the store no longer has it; "
                        "put the bundle back in the store or restore the site") from None
    return parse_run_json(text, path)


def _sha256(path: Path) -> str:
    """Hex SHA-256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Stage 3: writing the new site


def write_site(plan: SitePlan, root: Path, base_url: str, old_site: Path, jobs: int = 1) -> int:
    """Write the whole site under ``root``; returns the number of HTML and Markdown pages written.

    Unchanged run folders are linked from the old site by a child process throughout. New pages
    are rendered by worker processes (many), by a child beside the index (a few, with ``jobs`` > 1)
    or here; then what lists every run: the index, the history charts and the manifest.
    """
    (root / RUNS_DIR).mkdir()
    tasks: list[RunPageTask] = []
    done: list[SiteRun] = []
    links: list[tuple[Path, Path]] = []
    for p in plan.runs:
        dest = root / RUNS_DIR / p.run_id
        if p.known is None:
            tasks.append(RunPageTask(p.page_source, dest, plan.renderer_version))
        else:
            links.append((p.page_source, dest))
            done.append(p.known)
    with _in_background(_link_trees, links) as links_done:
        from reportgen import plots  # noqa: F401  matplotlib, once, after the linker's fork and before the workers'

        if tasks and jobs > 1 and render_workers(len(tasks), jobs) == 1:
            # A few new pages (adding runs to a site): a child writes them while this process writes the index.
            with _in_background(_write_pages, tasks) as pages_done:
                rendered = [_render_task(t, write=False) for t in tasks]
                pages = _write_lists(done, rendered, plan, root, base_url, old_site)
                pages_done()
        else:
            rendered = render_run_pages(tasks, jobs)
            pages = _write_lists(done, rendered, plan, root, base_url, old_site)
        links_done()
    return pages


def _write_lists(done: list[SiteRun], rendered: list[RenderedPage], plan: SitePlan, root: Path, base_url: str,
                 old_site: Path) -> int:
    """What lists every run: the index (with the newest run's summary), history charts, assets, the manifest."""
    every = sorted([*done, *(r.site_run for r in rendered)], key=lambda r: (r.digest.created_utc, r.digest.run_id))
    runs = [r for r in every if r.entry.run_id not in plan.withdrawn]
    latest = None
    if runs:
        newest = runs[-1].entry.run_id
        fresh = next((r.run for r in rendered if r.site_run.entry.run_id == newest), None)
        latest = fresh or _load_latest(next(p for p in plan.runs if p.run_id == newest), old_site)
    pages = sum(r.pages for r in rendered)
    pages += _write_index([r.digest for r in runs], latest, root, base_url)
    _write_static(root)
    _write_manifest(every, root, base_url)
    return pages


@contextlib.contextmanager
def _in_background(target: Callable[[list[T]], None], items: list[T]) -> Iterator[Callable[[], None]]:
    """Run ``target(items)`` in a forked child while this process goes on; yields ``wait`` (joins, re-raises).

    Used for the file-system work of adding runs to a large site: recreating the unchanged run
    folders (ten thousand links at 1,000 runs, about 0.5 s here; a thread would wait for the
    interpreter lock after every call) and writing a few new pages while this process writes
    the index. The child dies with this process and is finished or killed before the caller
    goes on, so a failed build never deletes its folder under a running child. Off Linux, or
    with nothing to do, ``target`` runs here, at once.
    """
    if not items or sys.platform != "linux":
        target(items)
        yield lambda: None
        return
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_main, args=(target, items, send, os.getpid()), daemon=True)
    child.start()
    send.close()

    def wait() -> None:
        # Read before joining: a child blocked writing its error into a full pipe would never exit.
        try:
            error = receive.recv()
        except (EOFError, OSError):  # exited without a word: success, or killed
            error = None
        child.join()
        if isinstance(error, BaseException):
            raise error
        if child.exitcode != 0:
            raise SiteError(f"{items[0]}: a build process died (exit {child.exitcode}); the site was not changed")

    try:
        yield wait
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()


MAX_CHILD_ERROR_BYTES = 16384
"""A child's error larger than this once pickled is sent as its type and the start of its text."""


def _child_main(target: Callable[[list[T]], None], items: list[T], send: Any, parent_pid: int) -> None:
    """A background child: run ``target``, exit 0; on an error, send it (bounded) to the parent and exit 1."""
    _worker_init(parent_pid)
    try:
        target(items)
    except Exception as exc:
        try:
            send.send(_bounded_error(exc))
        finally:
            os._exit(1)
    os._exit(0)


def _bounded_error(exc: Exception) -> Exception:
    """``exc`` itself when it pickles small and whole; else a SiteError with its type and the start of its text.

    Some errors carry whole documents (a UnicodeEncodeError holds the page it failed to encode).
    """
    try:
        data = pickle.dumps(exc)
        if len(data) <= MAX_CHILD_ERROR_BYTES and type(pickle.loads(data)) is type(exc):
            return exc
    except Exception:  # noqa: BLE001  unpicklable: fall through to the text
        pass
    text = str(exc)
    if isinstance(exc, ReportgenError):
        return type(exc)(text[:2000])
    return SiteError(f"{type(exc).__name__}: {text[:300]}")


def _link_trees(pairs: list[tuple[Path, Path]]) -> None:
    for src, dst in pairs:
        _link_tree(src, dst)


def _write_pages(tasks: list[RunPageTask]) -> None:
    for task in tasks:
        write_run_page(load_run(task.bundle), task.bundle, task.dest)


def _link_tree(src: Path, dst: Path) -> None:
    """Recreate an unchanged run folder of the old site by hard links (no bytes copied); copy across devices."""
    os.mkdir(dst)
    with os.scandir(src) as entries:
        for entry in entries:
            target = os.path.join(dst, entry.name)
            if entry.is_dir(follow_symlinks=False):
                _link_tree(Path(entry.path), Path(target))
                continue
            try:
                os.link(entry.path, target, follow_symlinks=False)
            except OSError:
                shutil.copy2(entry.path, target, follow_symlinks=False)


# ---------------------------------------------------------------------------------------------
# Run pages, in parallel


PAGES_PER_RUN = 2
"""A run's folder holds two pages: index.html and report.md."""
MIN_PAGES_PER_WORKER = 4
"""Fewer pages than this per worker are rendered in the build process itself."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class RunPageTask:
    """One run page to render: the bundle, the folder to create, and the renderer's version for the manifest."""

    bundle: Path
    dest: Path
    renderer_version: str


@dataclass(frozen=True)
class RenderedPage:
    """A page rendered now: the run (loaded once, in the worker), its manifest entry and digest, pages written."""

    run: Run
    site_run: SiteRun
    pages: int


def default_jobs() -> int:
    """Worker processes for run pages: $REPORTGEN_JOBS when set, else the CPUs this process may use."""
    value = os.environ.get("REPORTGEN_JOBS")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise UsageError(f"REPORTGEN_JOBS={value[:30]!r}: expected a whole number of processes, 1 or more")
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def render_workers(pages: int, jobs: int) -> int:
    """Worker processes for ``pages`` run pages: 1 (this process) for few pages or off Linux."""
    return max(1, min(jobs, pages // MIN_PAGES_PER_WORKER)) if sys.platform == "linux" else 1


def render_run_pages(tasks: list[RunPageTask], jobs: int) -> list[RenderedPage]:
    """Render every task's run page, across up to ``jobs`` processes; the bytes are the same as a serial build's.

    Workers are forked (Linux only; elsewhere pages render in this process): they start in
    milliseconds with everything imported, and need no ``__main__`` guard in the caller's script.
    Each page is written by exactly one worker into its own folder.
    """
    workers = render_workers(len(tasks), jobs)
    if workers == 1:
        return [_render_task(t) for t in tasks]
    chunk = max(1, min(16, len(tasks) // (workers * 4)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_init, initargs=(os.getpid(),))
    try:
        return list(pool.map(_render_task, tasks, chunksize=chunk))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _worker_init(parent_pid: int) -> None:
    """Make a worker die with the build process: a killed build leaves no worker holding the site lock."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the build died before prctl took effect
        os._exit(1)


def _render_task(task: RunPageTask, write: bool = True) -> RenderedPage:
    """Worker entry point: load one bundle, render its page (unless ``write`` is False), and return what the
    index needs of it."""
    run = load_run(task.bundle)
    entry = ManifestEntry(run.run_id, _sha256(task.bundle / RUN_FILE), task.renderer_version)
    view = analysis.run_view(run)
    pages = write_run_page(run, task.bundle, task.dest, view) if write else PAGES_PER_RUN
    return RenderedPage(run, SiteRun(entry, analysis.digest(run, view), PageOrigin.RENDERED), pages)


def write_run_page(run: Run, bundle: Path, dest: Path, view: analysis.RunView | None = None) -> int:
    """A run's permanent folder: HTML page, Markdown report, charts, run.json and raw traces."""
    dest.mkdir(parents=True)
    view = view or analysis.run_view(run)
    images = _run_images(view, bundle, dest)
    downloads = _copy_data(run, bundle, dest)
    context = {"rv": view, "run": run, "images": images, "downloads": downloads, "root": "../../",
               "withdrawn": read_withdrawn(bundle.parent).get(run.run_id)}
    (dest / "index.html").write_text(render_html("run.html", **context), encoding="utf-8")
    (dest / "report.md").write_text(render_md("run.md", **context), encoding="utf-8")
    return PAGES_PER_RUN


@dataclass(frozen=True)
class RunImages:
    """File names (relative to the run folder) of a run page's images; None where none could be drawn."""

    bars: str | None
    timelines: dict[str, str]
    timeline_notes: dict[str, str]


def _run_images(view: analysis.RunView, bundle: Path, dest: Path) -> RunImages:
    """Draw the bar chart and one timeline snapshot per variant that has a trace."""
    from reportgen import plots

    bars = None
    if view.has_samples:
        bars = "time-per-variant.svg"
        plots.bar_chart(view.variants, dest / bars, f"{view.run.scenario.name}: median time per call")
    timelines: dict[str, str] = {}
    notes: dict[str, str] = {}
    for v in view.variants:
        if v.trace_path is None:
            notes[v.name] = "no trace stored for this variant"
            continue
        name = f"timeline-{safe_component(v.name, 60)}.svg"
        layout = _timeline_for(member_file(bundle, v.trace_path))
        plots.timeline_chart(layout, dest / name, f"{v.name}: {layout.step_name or 'trace'} "
                             f"({layout.event_count} events, {layout.window_us:,.1f} µs)")
        timelines[v.name] = name
    return RunImages(bars, timelines, notes)


def _timeline_for(trace_file: Path) -> analysis.TimelineLayout:
    """Read a stored trace and lay out its representative iteration (the whole trace if it has no steps)."""
    from reportgen import trace as trace_reader

    tr = trace_reader.read_trace(trace_file)
    step = analysis.representative_step(trace_reader.profiler_steps(tr))
    if step is not None:
        start, end = analysis.iteration_window(tr.events, step.start_us, step.start_us + step.duration_us)
        label = step.name
    elif tr.events:
        start = min(e.start_us for e in tr.events)
        end = max(e.start_us + e.duration_us for e in tr.events)
        label = ""
    else:
        start, end, label = 0.0, 1.0, ""
    events = trace_reader.events_in_window(tr, start, end)
    return analysis.timeline_layout(events, start, end, label)


@dataclass(frozen=True)
class Downloads:
    """Relative links of the raw data beside a run page."""

    run_json: str
    traces: dict[str, str]
    artifacts: tuple[tuple[str, str, str, int], ...] = ()
    """(variant, href, kind, size in bytes) of each device artifact (.neff, .ntff, .pb ...)."""


def _copy_data(run: Run, bundle: Path, dest: Path) -> Downloads:
    """Copy run.json byte for byte, every variant's trace and device artifacts under ``data/``."""
    data = dest / DATA_DIR
    data.mkdir()
    shutil.copyfile(bundle / RUN_FILE, data / RUN_FILE)
    traces: dict[str, str] = {}
    artifacts: list[tuple[str, str, str, int]] = []
    for v in run.variants:
        if v.trace_path is not None:
            traces[v.name] = _copy_member(bundle, v.trace_path, data)
        for a in v.artifacts:
            artifacts.append((v.name, _copy_member(bundle, a.path, data), a.kind, a.size_bytes))
    return Downloads(f"{DATA_DIR}/{RUN_FILE}", traces, tuple(artifacts))


def _copy_member(bundle: Path, rel: str, data: Path) -> str:
    """Copy one bundle file (never through a link) under ``data/``; its href relative to the page."""
    target = data / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copyfile(member_file(bundle, rel), target)
    return f"{DATA_DIR}/{rel}"


def _write_index(digests: list[analysis.RunDigest], latest_run: Run | None, root: Path, base_url: str) -> int:
    """index.html, index.md, history charts and the latest/ redirect."""
    from reportgen import plots

    groups = analysis.history(digests)
    history_dir = root / "history"
    history_dir.mkdir()
    charts: dict[str, str] = {}
    for g in groups:
        if not g.series or len(g.run_ids) < 2:  # one point is not a history: the table says it
            continue
        name = f"{slug(g.title, 60) or 'group'}-{hashlib.sha256(g.key.encode()).hexdigest()[:8]}.png"
        plots.history_chart(g, history_dir / name)
        charts[g.key] = f"history/{name}"
    latest = analysis.run_view(latest_run) if latest_run else None
    context = {"runs": list(reversed(digests)), "latest": latest, "groups": groups, "charts": charts,
               "built_at": built_at(), "version": __version__, "base_url": base_url, "root": ""}
    (root / "index.html").write_text(render_html("index.html", **context), encoding="utf-8")
    (root / "index.md").write_text(render_md("index.md", **context), encoding="utf-8")
    (root / "latest").mkdir()
    (root / "latest" / "index.html").write_text(render_html("latest.html", latest=latest, root="../"),
                                                encoding="utf-8")
    help_html = markdown_to_html(HELP_DOC.read_text(encoding="utf-8"))
    (root / "help").mkdir()
    (root / "help" / "index.html").write_text(render_html("help.html", body=help_html, root="../"), encoding="utf-8")
    return 4


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


def _write_static(root: Path) -> None:
    """The stylesheet, the icon (else browsers ask the host root for /favicon.ico) and .nojekyll."""
    (root / "assets").mkdir()
    for name in ("style.css", "favicon.svg"):
        shutil.copyfile(TEMPLATES_DIR / name, root / "assets" / name)
    (root / ".nojekyll").write_bytes(b"")


def _write_manifest(runs: list[SiteRun], root: Path, base_url: str) -> None:
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
