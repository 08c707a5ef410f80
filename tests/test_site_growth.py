"""A site whose cost does not grow with its store: bounded index, archive pages and history charts drawn only when
they change, run folders carried over without copies, and a retention policy for traces."""

from __future__ import annotations

import collections
import gzip
import json
import os
import random
import shutil
import sys
from pathlib import Path

import pytest
from factories import synthetic_run, write_synthetic
from test_site import _assert_links_resolve

import reportgen
from reportgen import site
from reportgen.cli import main
from reportgen.errors import UsageError
from reportgen.render.jinja import TEMPLATES_DIR
from reportgen.site import lists, plan


def _run(i: int, shape: str = "4,64"):  # type: ignore[no-untyped-def]
    return synthetic_run(run_id=f"20261130T{i:02d}0000Z-cpu-grow-{i:06d}", created_utc=f"2026-11-30T{i:02d}:00:00Z",
                         times_us={"naive": 100.0 + i, "fused": 60.0, "compiled": 30.0}, shape=shape,
                         with_traces=True)


def _store(tmp_path: Path, n: int, shapes: tuple[str, ...] = ("4,64",)) -> Path:
    store = tmp_path / "results"
    for i in range(n):
        write_synthetic(store, _run(i, shapes[i % len(shapes)]))
    return store


@pytest.fixture()
def small_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lists, "ARCHIVE_PAGE_RUNS", 3)
    monkeypatch.setattr("reportgen.site.build.INDEX_RUNS", 3)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764460800")


def test_the_index_shows_the_newest_runs_and_the_archive_every_run(tmp_path: Path, small_lists: None) -> None:
    store, out = _store(tmp_path, 7), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    index = (out / "index.html").read_text()
    shown = [i for i in range(7) if _run(i).run_id in index]
    assert shown == [4, 5, 6]  # the three newest (the newest also as the latest run)
    assert "The 3 newest of 7 run(s)" in index
    pages = sorted((out / "archive").iterdir())
    assert [p.name for p in pages] == ["1.html", "2.html", "3.html"]
    listed = [[i for i in range(7) if f"runs/{_run(i).run_id}/index.html" in p.read_text()] for p in pages]
    assert listed == [[0, 1, 2], [3, 4, 5], [6]]
    assert all(f'href="archive/{k}.html"' in index for k in (1, 2, 3))


def test_adding_a_run_redraws_only_the_last_archive_page_and_its_own_history(tmp_path: Path, small_lists: None) -> None:
    store, out = _store(tmp_path, 7, shapes=("4,64", "8,128")), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    inodes = {p.relative_to(out).as_posix(): p.stat().st_ino for p in [*(out / "archive").iterdir(),
                                                                      *(out / "history").iterdir()]}
    charts = sorted(p.name for p in (out / "history").iterdir() if p.suffix == ".svg")
    assert len(charts) == 2 and len(list((out / "history").glob("*.window.json"))) == 2  # a window beside each
    write_synthetic(store, _run(7, "4,64"))  # joins the first shape's history and the archive's third page
    result = site.build_site(store, out, "/", jobs=1)
    assert (result.rendered, result.reused) == (1, 7)
    after = {p.relative_to(out).as_posix(): p.stat().st_ino for p in [*(out / "archive").iterdir(),
                                                                     *(out / "history").iterdir()]}
    unchanged = {k for k in inodes if after.get(k) == inodes[k]}
    other = next(c for c in charts if "shape-8-128" in c)
    window = other.removesuffix(".svg") + ".window.json"
    assert unchanged == {"archive/1.html", "archive/2.html", f"history/{other}", f"history/{window}"}, sorted(after)
    assert "archive/3.html" in after


def test_a_run_that_starts_an_archive_page_redraws_only_the_page_before(tmp_path: Path, small_lists: None) -> None:
    """Archive pages name only their neighbours (the index lists them all), so a new page does not redraw every
    page: at 10,000 runs that was ten pages of 1,000 runs each, every 1,000th added run."""
    store, out = _store(tmp_path, 6), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    first = (out / "archive" / "1.html").stat().st_ino
    write_synthetic(store, _run(6))
    site.build_site(store, out, "/", jobs=1)
    pages = [(out / "archive" / f"{k}.html").read_text() for k in (1, 2, 3)]
    assert (out / "archive" / "1.html").stat().st_ino == first
    assert 'href="2.html">runs 4 onward →' in pages[0] and "run(s) in all" not in pages[0]
    assert 'href="1.html">← runs 1–3' in pages[1] and 'href="3.html">runs 7 onward →' in pages[1]
    assert 'href="2.html">← runs 4–6' in pages[2] and "7 run(s) in all" in pages[2] and "onward" not in pages[2]
    assert all('href="../index.html">every page: the front page' in page for page in pages)


def test_run_folders_are_carried_over_not_copied(tmp_path: Path) -> None:
    store, out = _store(tmp_path, 2), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    page = out / "runs" / _run(0).run_id / "index.html"
    inode = page.stat().st_ino
    write_synthetic(store, _run(2))
    site.build_site(store, out, "/", jobs=1)
    assert page.stat().st_ino == inode and page.stat().st_nlink == 1  # the same file, not a copy or a link


def test_retention_keeps_traces_of_the_latest_runs_of_each_series(tmp_path: Path) -> None:
    store, out = _store(tmp_path, 7, shapes=("4,64", "4,64", "8,128")), tmp_path / "site"
    # series 4,64: runs 0 1 3 4 6; series 8,128: runs 2 5
    site.build_site(store, out, "/", jobs=1, keep_traces=2)
    kept = {i for i in range(7) if (out / "runs" / _run(i).run_id / "data" / "traces").is_dir()}
    assert kept == {4, 6, 2, 5}
    full = (out / "runs" / _run(6).run_id / "index.html").read_text()
    assert all(f'id="{s}"' in full for s in ("fusion", "variants", "speedups", "roofline", "downloads"))
    retired = out / "runs" / _run(0).run_id
    html = (retired / "index.html").read_text()
    assert "made compact by the site's retention policy" in html and 'id="variants"' not in html
    assert 'href="#' not in html  # no link to a section a compact page leaves out
    assert 'id="roofline"' not in html and 'href="report.md"' not in html  # its inputs are in run.json.gz
    assert sorted(p.name for p in retired.rglob("*") if p.is_file()) == ["index.html", "run.json.gz"]
    stored = (store / _run(0).run_id / "run.json").read_bytes()
    assert gzip.decompress((retired / "data" / "run.json.gz").read_bytes()) == stored  # every figure, as measured
    retired = json.loads((out / "manifest.json").read_text())["runs"]["traces_retired"]
    assert [i for i in range(7) if _run(i).run_id in retired] == [0, 1, 3]
    assert "3 older run page(s) are compact" in (out / "index.html").read_text()
    assert _assert_links_resolve(out) > 20  # a compact page links no section it left out
    shutil.rmtree(store / _run(0).run_id)  # a compact page carried over when its bundle leaves the store
    assert site.build_site(store, out, "/", jobs=1, keep_traces=2).carried == 1
    write_synthetic(store, _run(0, "4,64"))

    write_synthetic(store, _run(7, "4,64"))  # run 4 falls out of its series' window
    result = site.build_site(store, out, "/", jobs=1, keep_traces=2)
    assert (result.rendered, result.reused) == (2, 6)  # the new run, and run 4 drawn again without traces
    assert not (out / "runs" / _run(4).run_id / "data" / "traces").exists()

    result = site.build_site(store, out, "/", jobs=1)  # no policy: every retired page drawn again, with traces
    assert result.rendered == 4
    assert all((out / "runs" / _run(i).run_id / "data" / "traces").is_dir() for i in range(8))


def test_a_negative_retention_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    store, out = _store(tmp_path, 1), tmp_path / "site"
    with pytest.raises(UsageError, match="keep_traces -1: expected 0 or more"):
        site.build_site(store, out, "/", keep_traces=-1)
    assert not out.exists() and not os.path.lexists(tmp_path / ".site.lock")


def _site_files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_site_built_run_by_run_is_the_site_built_at_once(tmp_path: Path, small_lists: None) -> None:
    """Adding runs one build at a time (reused pages, the old manifest's entries written again, lists linked from
    the old site) makes the same files, byte for byte, as one build of the same store into a new folder: with
    retention, a withdrawn run, a run carried after it left the store and one that came back."""
    store, out = _store(tmp_path, 4, shapes=("4,64", "8,128")), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1, keep_traces=2)
    for i in range(4, 9):
        write_synthetic(store, _run(i, ("4,64", "8,128")[i % 2]))
        if i == 6:
            shutil.rmtree(store / _run(1).run_id)  # carried from now on
        if i == 7:
            assert main(["rm", _run(2).run_id, "--store", str(store), "--reason", "bad machine"]) == 0
        if i == 8:
            write_synthetic(store, _run(1, "8,128"))  # back in the store: its page reused again
        site.build_site(store, out, "/", jobs=1, keep_traces=2)
    shutil.copytree(out / "runs" / _run(1).run_id, tmp_path / "carried")
    fresh = tmp_path / "fresh"
    site.build_site(store, fresh, "/", jobs=1, keep_traces=2)
    assert _site_files(out) == _site_files(fresh)
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    assert len(runs["traces_retired"]) == 5 and runs["digests"] == {}


def test_a_build_trusts_published_pages_and_verify_draws_a_missing_one_again(tmp_path: Path) -> None:
    """Pages are written once: a build does not stat each one (its cost must not grow with the site);
    ``--verify`` does, and draws a page deleted by hand again."""
    store, out = _store(tmp_path, 2), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    page = out / "runs" / _run(0).run_id / "index.html"
    text = page.read_text()
    page.unlink()
    assert site.build_site(store, out, "/", jobs=1).reused == 2 and not page.exists()
    assert main(["build", "--runs", str(store), "--out", str(out), "--verify"]) == 0
    assert page.read_text() == text


def test_retired_runs_are_all_but_the_latest_of_each_series() -> None:
    """Retention keeps the latest ``keep`` runs of each series (by time, then id: runs made in the same second) and
    retires the rest, against the rule written out run by run, over random stores."""
    rng = random.Random(33)
    for _ in range(300):
        ids = [f"r{i:03d}" for i in rng.sample(range(100), rng.randint(0, 30))]
        keys = {i: rng.choice("abc") for i in ids}
        created = {i: f"2026-12-0{rng.randint(1, 3)}T00:00:00Z" for i in ids}  # many ties in time
        keep = rng.choice([None, 0, 1, 2, 5])
        expected: set[str] = set()
        for key in set(keys.values()) if keep is not None else ():
            series = sorted((created[i], i) for i in ids if keys[i] == key)
            expected.update(i for _, i in series[: max(0, len(series) - keep)])
        assert plan.retired_runs(keys, created, keep) == expected


def test_a_build_pauses_the_collector_while_it_plans_and_its_workers_collect(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The build process plans and lists with Python's cyclic collector paused, and turns it back on after; the
    workers it forks meanwhile collect (pages make cyclic garbage: a worker without its collector grows)."""
    import gc

    from reportgen.site import build, workers

    store = _store(tmp_path, 2 * workers.MIN_PAGES_PER_WORKER)
    seen: dict[str, object] = {}
    gather = build.gather

    def watched_gather(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen["planning"] = gc.isenabled()
        seen["workers"] = workers.pool_map(_collector_on, list(range(2 * workers.MIN_PAGES_PER_WORKER)), jobs=2)
        return gather(*args, **kwargs)

    monkeypatch.setattr(build, "gather", watched_gather)
    assert gc.isenabled()
    build.build_site(store, tmp_path / "site", "/", jobs=2)
    assert seen == {"planning": False, "workers": [True] * 2 * workers.MIN_PAGES_PER_WORKER}
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that had it off finds it off
        with workers.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _collector_on(_item: int) -> bool:
    import gc

    return gc.isenabled()


def test_counts_of_a_large_site_are_written_with_thousands_separators() -> None:
    """A 100,005-run site's archive says "Runs 100,001 to 100,005", not "100001 to 100005"."""
    from reportgen.render.jinja import render_html

    pages = lists.archive_pages(100_005)
    html = render_html("archive.html", runs=[], page=pages[-1], archive=pages, run_count=100_005, root="../")
    assert "<h1>Runs 100,001 to 100,005</h1>" in html and "100,005 run(s) in all" in html
    assert f"runs {(pages[-2].first):,}–{(pages[-2].last):,}</a>" in html and pages[-2].last == 100_000


PER_RUN_STEPS = {("store/loader.py", "list_store"), ("store/loader.py", "_is_run_folder"),
                 ("store/layout.py", "is_valid_run_id")}
"""The only Python code an add runs once per stored run: reading the store's directory entry by entry (the kernel's
listing costs more than these steps; a listing in bulk filters was slower) and checking the manifest's run ids."""


def _minute_run(i: int, shape: str):  # type: ignore[no-untyped-def]
    return synthetic_run(run_id=f"20261130T{i // 60:02d}{i % 60:02d}00Z-cpu-grow-{i:06d}",
                         created_utc=f"2026-11-30T{i // 60:02d}:{i % 60:02d}:00Z",
                         times_us={"naive": 100.0, "fused": 60.0, "compiled": 30.0}, shape=shape)


def _lines_run_by_an_add(folder: Path, stored: int) -> collections.Counter[tuple[str, str, int]]:
    """How often each line of reportgen (templates too) runs in a build that adds one run to a site of ``stored``
    runs (two series, traces kept for the latest 3 of each), by (file, function, line)."""
    store, out = folder / "results", folder / "site"
    for i in range(stored):
        write_synthetic(store, _minute_run(i, ("4,64", "8,128")[i % 2]))
    site.build_site(store, out, "/", jobs=1, keep_traces=3)
    write_synthetic(store, _minute_run(stored, "4,64"))
    roots = (str(Path(reportgen.__file__).parent) + os.sep, str(TEMPLATES_DIR) + os.sep)  # the templates' folder
    counts: collections.Counter[tuple[str, str, int]] = collections.Counter()  # is outside the package in a checkout

    def lines(frame, event, _arg):  # type: ignore[no-untyped-def]
        if event == "line":
            code = frame.f_code
            root = next(r for r in roots if code.co_filename.startswith(r))
            counts[(code.co_filename.replace(root, "templates/" if root == roots[1] else "", 1), code.co_name,
                    frame.f_lineno)] += 1
        return lines

    def calls(frame, _event, _arg):  # type: ignore[no-untyped-def]
        return lines if frame.f_code.co_filename.startswith(roots) else None

    sys.settrace(calls)
    try:
        result = site.build_site(store, out, "/", jobs=1, keep_traces=3)
    finally:
        sys.settrace(None)
    assert (result.rendered, result.reused, result.runs_total) == (2, stored - 1, stored + 1)  # new + one retired
    return counts


def test_an_add_runs_no_python_step_per_stored_run_but_the_listing_and_id_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding one run to a site of 40 runs and to one of 80 runs: a line that runs once more per stored run (40 more
    times) is a Python step per stored run, which a 100,000-run store pays 100,000 times; only PER_RUN_STEPS may.
    Archive pages of 10 runs: a step per page grows by 4."""
    monkeypatch.setattr(lists, "ARCHIVE_PAGE_RUNS", 10)
    monkeypatch.setattr(lists, "HISTORY_WINDOW", 5)
    monkeypatch.setattr("reportgen.site.build.INDEX_RUNS", 4)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764460800")
    small, big = _lines_run_by_an_add(tmp_path / "40", 40), _lines_run_by_an_add(tmp_path / "80", 80)
    per_run = {(f, fn) for (f, fn, line), n in big.items() if n - small.get((f, fn, line), 0) >= 40}
    assert ("store/loader.py", "list_store") in per_run  # the count sees a step per stored run ...
    assert any(f.startswith("templates/index.html") for f, _, _ in big)  # ... and the templates' lines
    assert per_run <= PER_RUN_STEPS, sorted(per_run - PER_RUN_STEPS)
