"""The site build at scale: parallel run pages (same bytes as serial), hard-linked old pages, fast manifest reads."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from factories import synthetic_run, variant, write_synthetic

from reportgen import site
from reportgen.analysis import digest_json
from reportgen.analysis.history import RunDigest, digest
from reportgen.analysis.run_view import run_view
from reportgen.errors import SiteError, UsageError
from reportgen.model.codec import from_jsonable, to_jsonable
from reportgen.model.run import VariantStatus
from reportgen.render import bars, style
from reportgen.site import fs, manifest, pages, workers


@pytest.fixture(autouse=True)
def _fixed_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764460800")
    monkeypatch.delenv("REPORTGEN_JOBS", raising=False)


def _run(i: int, with_traces: bool = True) -> object:
    return synthetic_run(run_id=f"202612{i + 1:02d}T000000Z-cpu-scale-{i:03d}",
                         created_utc=f"2026-12-{i + 1:02d}T00:00:00Z", with_traces=with_traces,
                         times_us={"naive": 100.0 + i, "fused": 60.0, "compiled": 30.0 + i / 2})


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_parallel_build_writes_the_same_bytes_as_a_serial_build(tmp_path: Path) -> None:
    store = tmp_path / "results"
    for i in range(8):
        write_synthetic(store, _run(i, with_traces=i % 2 == 0))  # type: ignore[arg-type]
    serial = site.build_site(store, tmp_path / "serial", "/", jobs=1)
    parallel = site.build_site(store, tmp_path / "parallel", "/", jobs=2)
    counts = (serial.runs_total, serial.rendered, serial.reused, serial.pages_written)
    assert counts == (parallel.runs_total, parallel.rendered, parallel.reused, parallel.pages_written) == (8, 8, 0, 21)
    hashes = _hashes(tmp_path / "serial")
    assert len([p for p in hashes if p.endswith(".svg") and "/runs/" in f"/{p}"]) == 8 + 4 * 3  # bars, timelines
    assert len([p for p in hashes if p.startswith("history/") and p.endswith(".svg")]) == 1  # one history chart
    assert hashes == _hashes(tmp_path / "parallel")


def test_a_broken_bundle_read_by_a_worker_is_named_and_left_out_as_by_a_serial_build(tmp_path: Path) -> None:
    """A first build reads the bundles for its catalog across its workers: a broken one is the same one warning,
    and the site the same bytes, as when one process reads them."""
    store = tmp_path / "results"
    for i in range(9):
        write_synthetic(store, _run(i, with_traces=False))  # type: ignore[arg-type]
    (store / _run(4).run_id / "run.json").write_text('{"schema_version": 1, "run_id": 4}')  # type: ignore[attr-defined]
    sites, warnings = {}, {}
    for jobs in (1, 2):
        shutil.rmtree(store / ".catalog", ignore_errors=True)  # each build reads every bundle
        said: list[str] = []
        result = site.build_site(store, tmp_path / f"site-{jobs}", "/", jobs=jobs, warn=said.append)
        assert (result.runs_total, result.rendered) == (8, 8)
        sites[jobs], warnings[jobs] = _hashes(tmp_path / f"site-{jobs}"), said
    assert sites[1] == sites[2]
    assert warnings[1] == warnings[2] and len(warnings[1]) == 1
    assert warnings[1][0].startswith(f"{store / _run(4).run_id / 'run.json'}: field 'run_id'")  # type: ignore[attr-defined]


def _record_pid(task: pages.RunPageTask) -> pages.RenderedPage:
    """Stands in for rendering: notes which process got the task."""
    task.dest.mkdir(parents=True)
    (task.dest / "pid").write_text(str(os.getpid()))
    run = synthetic_run(run_id=task.dest.name)
    entry = manifest.ManifestEntry(run.run_id, "0" * 64, task.renderer_version)
    return pages.RenderedPage(run, manifest.SiteRun(entry, digest(run), manifest.PageOrigin.RENDERED), 2)


def _tasks(tmp_path: Path, n: int) -> list[pages.RunPageTask]:
    return [pages.RunPageTask(tmp_path, tmp_path / "out" / f"r{i}", "v") for i in range(n)]


def test_run_pages_are_spread_over_worker_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "render_task", _record_pid)
    tasks = _tasks(tmp_path, 12)
    rendered = pages.render_run_pages(tasks, jobs=2)
    assert [r.site_run.entry.run_id for r in rendered] == [f"r{i}" for i in range(12)]  # in task order
    pids = {(t.dest / "pid").read_text() for t in tasks}
    assert str(os.getpid()) not in pids and len(pids) == 2


def test_few_pages_are_rendered_in_the_build_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "render_task", _record_pid)
    tasks = _tasks(tmp_path, workers.MIN_PAGES_PER_WORKER * 2 - 1)
    pages.render_run_pages(tasks, jobs=8)
    assert {(t.dest / "pid").read_text() for t in tasks} == {str(os.getpid())}


def _fail_on_r5(task: pages.RunPageTask) -> pages.RenderedPage:
    if task.dest.name in ("r5", "20261206T000000Z-cpu-scale-005"):
        raise SiteError(f"{task.dest.name}: broken on purpose")
    return _record_pid(task)


def test_a_worker_error_reaches_the_build_with_its_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "render_task", _fail_on_r5)
    with pytest.raises(SiteError) as err:
        pages.render_run_pages(_tasks(tmp_path, 12), jobs=2)
    assert str(err.value) == "r5: broken on purpose"


def test_a_failing_parallel_build_leaves_the_old_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "results"
    write_synthetic(store, _run(0, with_traces=False))  # type: ignore[arg-type]
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    before = _hashes(out)
    for i in range(1, 10):
        write_synthetic(store, _run(i, with_traces=False))  # type: ignore[arg-type]
    monkeypatch.setattr(pages, "render_task", _fail_on_r5)
    with pytest.raises(SiteError, match="^20261206T000000Z-cpu-scale-005: broken on purpose$"):
        site.build_site(store, out, "/", jobs=2)
    assert _hashes(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site-")] == []


def test_reportgen_jobs_must_be_a_positive_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPORTGEN_JOBS", "0")
    with pytest.raises(UsageError) as err:
        site.build_site(tmp_path, tmp_path / "site", "/")
    assert str(err.value) == "REPORTGEN_JOBS='0': expected a whole number of processes, 1 or more"
    monkeypatch.setenv("REPORTGEN_JOBS", "3")
    assert workers.default_jobs() == 3


def test_unchanged_run_pages_are_hard_links_to_the_old_ones(tmp_path: Path) -> None:
    store = tmp_path / "results"
    write_synthetic(store, _run(0))  # type: ignore[arg-type]
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    page = out / "runs" / _run(0).run_id  # type: ignore[attr-defined]
    inodes = {p.relative_to(page): p.stat().st_ino for p in page.rglob("*") if p.is_file()}
    write_synthetic(store, _run(1))  # type: ignore[arg-type]
    result = site.build_site(store, out, "/")
    assert (result.rendered, result.reused) == (1, 1)
    assert {p.relative_to(page): p.stat().st_ino for p in page.rglob("*") if p.is_file()} == inodes
    assert len(inodes) == 10  # page, report, bar chart, 3 timelines, run.json, 3 traces
    assert {p.name for p in (page / "data" / "traces").iterdir()} == {f"{n}.pt.trace.json.gz"
                                                                     for n in ("naive", "fused", "compiled")}


def _digests() -> list[RunDigest]:
    odd = synthetic_run(run_id="odd", variants=(
        variant("naive", 10.0), variant("boom", 1.0, status=VariantStatus.FAILED, error="x"),
        variant("wrong", 5.0, status=VariantStatus.INCORRECT)))
    return [digest(odd), digest(synthetic_run(label="a|b"))]


def test_fast_manifest_digest_decodes_exactly_as_the_codec() -> None:
    for d in _digests():
        data = json.loads(json.dumps(to_jsonable(d)))
        assert digest_json.digest_from_manifest(data) == from_jsonable(RunDigest, data, "m") == d


@pytest.mark.parametrize("change", [
    lambda d: d.update(extra=1),
    lambda d: d.pop("label"),
    lambda d: d.update(label="a\x00b"),
    lambda d: d.update(device="gpu"),
    lambda d: d.update(parameters={"shape": 4}),
    lambda d: d["variants"][0].update(median_us=True),
    lambda d: d["variants"][0].update(ci_low_us=-1.0),
    lambda d: d["variants"][0].update(speedup="2"),
    lambda d: d["variants"][0].update(status="OK"),
    lambda d: d.update(variants={}),
])
def test_fast_manifest_digest_leaves_anything_unusual_to_the_codec(change: object) -> None:
    data = json.loads(json.dumps(to_jsonable(_digests()[0])))
    change(data)  # type: ignore[operator]
    assert digest_json.digest_from_manifest(data) is None


@pytest.mark.parametrize("created", ["2026-12-01T00:00:00Z", 'a "quoted" time', "caf\u00e9 \\ \x01"])
def test_the_manifest_columns_are_written_one_value_per_line_and_read_back(tmp_path: Path, created: str) -> None:
    """Columns of plain strings are joined directly, a column holding a string JSON escapes goes to the encoder: either
    way the file's JSON holds exactly the runs (retired and carried ones included), one value per line, and reading
    it back gives what was written."""
    d = _digests()[0]
    runs = manifest.SiteRuns()
    runs.add_reused({"r-1", "r-2"}, {"r-1": "ab" * 32, "r-2": "cd" * 32},
                    {"r-1": created, "r-2": "2026-12-02T00:00:00Z"}, "0.1+abc", {"r-2"})
    runs.add(manifest.SiteRun(manifest.ManifestEntry("r-0", "ef" * 32, "0.1+abc"), d.created_utc,
                              manifest.PageOrigin.CARRIED, d))
    runs.add(manifest.SiteRun(manifest.ManifestEntry("r-3", "01" * 32, "0.1+abc", True), "2026-12-03T00:00:00Z",
                              manifest.PageOrigin.RENDERED, d))
    manifest.write_manifest(runs, tmp_path, "/", {"archive": ["sig"]})
    text = (tmp_path / "manifest.json").read_text()
    data = json.loads(text)
    assert data["runs"] == {"created_utc": [d.created_utc, created, "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"],
                            "digests": {"r-0": to_jsonable(d)}, "renderer_version": ["0.1+abc"] * 4,
                            "run_id": ["r-0", "r-1", "r-2", "r-3"], "run_json_sha256": ["ef" * 32, "ab" * 32,
                                                                                         "cd" * 32, "01" * 32],
                            "traces_retired": ["r-2", "r-3"]}
    assert json.dumps(data["runs"]["run_id"], indent=0) in text  # one value per line
    assert json.dumps(data["runs"]["created_utc"], indent=0) in text
    old = manifest.read_old_site(tmp_path)
    assert old.lists == {"archive": ["sig"]} and old.runs.ids() == {"r-0", "r-1", "r-2", "r-3"}
    assert old.runs.created_utc["r-1"] == created and old.runs.retired == {"r-2", "r-3"}
    assert old.runs.get("r-0") == manifest.OldEntry(manifest.ManifestEntry("r-0", "ef" * 32, "0.1+abc"), d,
                                                    d.created_utc)
    assert old.runs.get("r-3") == manifest.OldEntry(manifest.ManifestEntry("r-3", "01" * 32, "0.1+abc", True), None,
                                                    "2026-12-03T00:00:00Z")


def test_long_variant_names_are_shortened_on_the_bar_chart(tmp_path: Path) -> None:
    assert style.clip_label("x" * 32) == "x" * 32
    assert style.clip_label("y" * 33) == "y" * 31 + "…"
    views = run_view(synthetic_run(variants=(variant("v" * 200, 10.0), variant("fused", 5.0)))).variants
    chart = bars.bar_layout(views, "long names")
    assert [b.label for b in chart.bars] == ["v" * 31 + "…", "fused"]
    assert chart.plot_left_px < chart.plot_right_px / 2  # the clipped label leaves the bars room


def _three_then_one(tmp_path: Path, out: Path, jobs: int) -> site.BuildResult:
    """A site of three runs, then a fourth run added: the case of adding runs to a published site."""
    store = tmp_path / f"results-{out.name}"
    for i in range(3):
        write_synthetic(store, _run(i))  # type: ignore[arg-type]
    site.build_site(store, out, "/", jobs=1)
    write_synthetic(store, _run(3))  # type: ignore[arg-type]
    return site.build_site(store, out, "/", jobs=jobs)


def test_adding_a_run_beside_the_index_writes_the_same_bytes_as_a_serial_build(tmp_path: Path) -> None:
    """jobs > 1 and few new pages: a child writes them (and another links the old ones) while the index is written."""
    child = _three_then_one(tmp_path, tmp_path / "child", jobs=2)
    serial = _three_then_one(tmp_path, tmp_path / "serial", jobs=1)
    assert (child.rendered, child.reused, child.pages_written) == (serial.rendered, serial.reused,
                                                                  serial.pages_written) == (1, 3, 6)
    assert _hashes(tmp_path / "child") == _hashes(tmp_path / "serial")


def _page_fails(run: object, bundle: Path, dest: Path, view: object = None, retired: bool = False) -> int:
    raise SiteError(f"{dest.name}: page broken on purpose")


def _built_then_one_more(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A site built from three runs, the hashes of its files, and a fourth run stored since."""
    store, out = tmp_path / "results", tmp_path / "site"
    for i in range(3):
        write_synthetic(store, _run(i))  # type: ignore[arg-type]
    site.build_site(store, out, "/", jobs=1)
    before = _hashes(out)
    write_synthetic(store, _run(3))  # type: ignore[arg-type]
    return store, out, before


def _swap_fails(tmp: Path, out: Path) -> None:
    raise OSError(28, "No space left on device", str(out))


@pytest.mark.parametrize("redraw", [False, True])
def test_a_commit_that_fails_leaves_the_old_site_and_its_run_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   redraw: bool) -> None:
    """New run folders are moved into the live site before the swap; a failed swap takes them out again (and puts
    back the old versions of redrawn ones): the old site byte for byte."""
    store, out, before = _built_then_one_more(tmp_path)
    monkeypatch.setattr(fs, "swap", _swap_fails)
    with pytest.raises(OSError, match="No space left on device"):
        site.build_site(store, out, "/", jobs=1, keep_traces=0 if redraw else None)  # 0: every page drawn again
    assert _hashes(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site-")] == []


@pytest.mark.parametrize(("owner", "name", "fake", "error", "message"), [
    (pages, "write_run_page", _page_fails, SiteError, "20261204T000000Z-cpu-scale-003: page broken on purpose"),
])
def test_a_failing_background_child_fails_the_build_and_leaves_the_old_site(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owner: object, name: str, fake: object, error: type[Exception],
        message: str) -> None:
    store, out, before = _built_then_one_more(tmp_path)
    monkeypatch.setattr(owner, name, fake)  # the forked child inherits the fake
    with pytest.raises(error, match=message):
        site.build_site(store, out, "/", jobs=2)
    assert _hashes(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site-")] == []


def _die(items: list[int]) -> None:
    os._exit(3)


def _sleep_forever(items: list[int]) -> None:
    import time

    time.sleep(60)


def test_a_child_that_dies_without_a_word_is_an_error_and_one_left_running_is_killed() -> None:
    with pytest.raises(SiteError, match=r"a build process died \(exit 3\)"), workers.background_child(_die) as child:
        child.submit([1])
        child.wait()
    with pytest.raises(RuntimeError, match="caller failed"), workers.background_child(_sleep_forever) as child:
        child.submit([1])
        raise RuntimeError("caller failed")  # leaving the block kills the child instead of waiting a minute


class _TwoArgError(Exception):
    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


def _huge_error(items: list[int]) -> None:
    raise SiteError("x" * 200_000)  # bigger than a pipe's buffer once pickled


def _two_arg_error(items: list[int]) -> None:
    raise _TwoArgError("page", "broken")


def _alarm(seconds: int) -> object:
    import signal

    def hang(signum: int, frame: object) -> None:
        raise TimeoutError(f"still waiting after {seconds} s")

    signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    return signal


def test_a_child_error_bigger_than_the_pipe_is_reported_not_waited_on_forever() -> None:
    signal = _alarm(30)
    try:
        with pytest.raises(SiteError) as err, workers.background_child(_huge_error) as child:
            child.submit([1])
            child.wait()
    finally:
        signal.alarm(0)  # type: ignore[attr-defined]
    assert str(err.value) == "x" * 2000  # the type kept, the text cut


def test_a_child_error_that_does_not_unpickle_keeps_its_text() -> None:
    with pytest.raises(SiteError, match="^_TwoArgError: page: broken$"), workers.background_child(_two_arg_error) as child:
        child.submit([1])
        child.wait()


def _no_warm_up() -> None:
    raise ImportError("no module named 'matplotlib' (in the child's warm-up)")


def _block_forever() -> None:
    os.read(os.pipe()[0], 1)  # a pipe whose writing end this process holds open: never returns


def _echo(items: list[int]) -> list[int]:
    return [i * 2 for i in items]


def test_a_childs_warm_up_error_is_reported_when_it_is_given_work_and_an_unused_child_is_killed() -> None:
    with pytest.raises(ImportError, match="in the child's warm-up"), workers.background_child(_echo, _no_warm_up) as child:
        child.submit([1])
        child.wait()
    with workers.background_child(_echo, _block_forever) as child:
        pass  # never given work, still warming up: leaving the block kills it instead of waiting
    with workers.background_child(_echo, lambda: None) as child:
        child.submit([1, 2])
        assert child.wait() == [2, 4]
    with workers.background_child(_echo, fork=False) as here:
        here.submit([3])
        assert here.wait() == [6]


ADD_ONE = """
import sys
from pathlib import Path
from reportgen.site.build import build_site
result = build_site(Path(sys.argv[1]), Path(sys.argv[2]), "/", jobs=int(sys.argv[3]))
print(result.rendered, result.reused, "matplotlib" in sys.modules,
      [m for m in ("pyarrow.compute", "pyarrow.dataset") if m in sys.modules])
"""


def test_adding_a_run_draws_its_page_in_the_child_and_never_imports_matplotlib_here(tmp_path: Path) -> None:
    """matplotlib's import was a third of adding one run: the index, the history charts and a run page's bar chart
    and timelines are SVG laid out by reportgen."""
    import subprocess
    import sys

    store, out = tmp_path / "results", tmp_path / "site"
    for i in range(3):
        write_synthetic(store, _run(i))  # type: ignore[arg-type]
    site.build_site(store, out, "/", jobs=1)
    write_synthetic(store, _run(3))  # type: ignore[arg-type]
    help_inode = (out / "help" / "index.html").stat().st_ino
    for added, jobs in ((3, 2), (4, 1)):  # jobs=1: the page is drawn in this process, which never imports it
        if added == 4:
            write_synthetic(store, _run(4))  # type: ignore[arg-type]
        proc = subprocess.run([sys.executable, "-c", ADD_ONE, str(store), str(out), str(jobs)], capture_output=True,
                              text=True, env={**os.environ, "SOURCE_DATE_EPOCH": "1764460800"}, check=False)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["1", str(added), "False", "[]"]  # nor Arrow's slow-to-import modules
        page = out / "runs" / _run(added).run_id  # type: ignore[attr-defined]
        assert (page / "time-per-variant.svg").is_file() and len(list(page.glob("timeline-*.svg"))) == 3
        assert (out / "help" / "index.html").stat().st_ino == help_inode  # the same file: not converted again
    assert list((out / "history").glob("*.svg")) and "history/" in (out / "index.html").read_text()
