"""History windows kept in the site: a build that only adds runs draws the history from them, not from every run's
points in the catalog, and makes the bytes a build of the whole store makes; anything else reads the catalog."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from factories import synthetic_run, write_synthetic

from reportgen import site
from reportgen.catalog.sync import Catalog
from reportgen.cli import main
from reportgen.site import lists, windows

SHAPES = ("4,64", "8,128")


def _run(i: int, created: str | None = None):  # type: ignore[no-untyped-def]
    return synthetic_run(run_id=f"20261201T{i:02d}0000Z-cpu-win-{i:06d}",
                         created_utc=created or f"2026-12-01T{i:02d}:00:00Z",
                         times_us={"naive": 100.0 + i, "fused": 60.0 + i % 3, "compiled": 30.0}, shape=SHAPES[i % 2],
                         with_traces=False)


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Windows of 2 runs (cut and counted at this size), and a count of the builds that read the catalog's."""
    monkeypatch.setattr(lists, "HISTORY_WINDOW", 2)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764460800")
    reads = [0]
    inner: Callable[..., Any] = Catalog.latest_points

    def counted(self: Catalog, *args: Any, **kwargs: Any) -> Any:
        reads[0] += 1
        return inner(self, *args, **kwargs)
    monkeypatch.setattr(Catalog, "latest_points", counted)
    return reads


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _fresh(store: Path, tmp_path: Path, name: str = "fresh") -> dict[str, bytes]:
    site.build_site(store, tmp_path / name, "/", jobs=1)
    return _files(tmp_path / name)


def _store(tmp_path: Path, n: int) -> Path:
    store = tmp_path / "results"
    for i in range(n):
        write_synthetic(store, _run(i))
    return store


def test_adding_runs_reads_no_catalog_points_and_builds_what_a_whole_build_builds(tmp_path: Path,
                                                                                    small_window: list[int]) -> None:
    store, out = _store(tmp_path, 5), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)  # draws every page: it holds every digest and reads no points
    for i in range(5, 8):
        write_synthetic(store, _run(i))
        site.build_site(store, out, "/", jobs=1)
    write_synthetic(store, _run(9, created="2026-11-01T00:00:00Z"))  # older than every window: counted, not shown
    site.build_site(store, out, "/", jobs=1)
    assert small_window == [0]  # four adds, each from the old windows and the new runs (else 4 catalog reads)
    index = (out / "index.html").read_text()
    assert "the latest 2 of 5 runs" in index and "the latest 2 of 4 runs" in index
    assert _files(out) == _fresh(store, tmp_path)


def test_a_withdrawal_reads_the_catalog_again(tmp_path: Path, small_window: list[int]) -> None:
    store, out = _store(tmp_path, 6), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    assert main(["rm", _run(5).run_id, "--store", str(store), "--reason", "bad machine"]) == 0
    site.build_site(store, out, "/", jobs=1)
    assert small_window == [1]
    assert _files(out) == _fresh(store, tmp_path)


@pytest.mark.parametrize("damage", ["not json", "another group", "a run the site does not list",
                                    "a run the old site did not list", "a string median",
                                    "a count below its runs", "missing", "a link"])
def test_a_window_file_that_is_not_what_it_should_be_is_not_used(tmp_path: Path, small_window: list[int],
                                                                 damage: str) -> None:
    store, out = _store(tmp_path, 6), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    path = sorted((out / "history").glob(f"*{windows.WINDOW_SUFFIX}"))[0]
    data = json.loads(path.read_text())
    columns = data["columns"]
    if damage == "not json":
        path.write_text("{")
    elif damage == "another group":
        data["key"] = "cpu|elsewhere"
    elif damage == "a run the site does not list":
        columns["run_id"][0] = "20261201T230000Z-cpu-win-invented"
    elif damage == "a run the old site did not list":
        columns["run_id"][0] = _run(6).run_id  # the run this build adds: its points would count twice
    elif damage == "a string median":
        columns["median_us"][0] = "fast"
    elif damage == "a count below its runs":
        data["runs_total"] = 1
    elif damage == "a link":
        (tmp_path / "elsewhere.json").write_text(path.read_text())
        path.unlink()
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.unlink()
    if damage not in ("not json", "missing", "a link"):
        path.write_text(json.dumps(data))
    write_synthetic(store, _run(6))
    site.build_site(store, out, "/", jobs=1)
    assert small_window == [1]  # the damaged window was not used: the catalog was read
    assert _files(out) == _fresh(store, tmp_path)
    assert "invented" not in (out / "index.html").read_text()


def test_a_site_without_windows_reads_the_catalog_once_then_keeps_them(tmp_path: Path,
                                                                      small_window: list[int]) -> None:
    """A site an older reportgen built (no window files, no state in its manifest): the first build reads the
    catalog and writes the windows, the next one uses them."""
    store, out = _store(tmp_path, 4), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["lists"][windows.STATE_KEY]
    (out / "manifest.json").write_text(json.dumps(manifest))
    for p in (out / "history").glob(f"*{windows.WINDOW_SUFFIX}"):
        p.unlink()
    for i in (4, 5):
        write_synthetic(store, _run(i))
        site.build_site(store, out, "/", jobs=1)
    assert small_window == [1]
    assert _files(out) == _fresh(store, tmp_path)


def test_verify_draws_the_history_from_the_catalog_not_from_a_window_edited_by_hand(tmp_path: Path,
                                                                                   small_window: list[int]) -> None:
    """A window is checked, not proven: a median edited by hand into another plausible number is drawn by a
    build; ``--verify`` reads the catalog instead, as it checks every page the old site kept."""
    store, out = _store(tmp_path, 6), tmp_path / "site"
    site.build_site(store, out, "/", jobs=1)
    path = sorted((out / "history").glob(f"*{windows.WINDOW_SUFFIX}"))[0]
    data = json.loads(path.read_text())
    data["columns"]["median_us"] = [m * 3 if m is not None else None for m in data["columns"]["median_us"]]
    path.write_text(json.dumps(data))
    write_synthetic(store, _run(6))
    edited = tmp_path / "edited"
    shutil.copytree(out, edited, symlinks=True)
    site.build_site(store, edited, "/", jobs=1)
    assert small_window == [0] and _files(edited) != _fresh(store, tmp_path)  # the edit was drawn
    site.build_site(store, out, "/", jobs=1, verify=True)
    assert small_window == [1]
    assert _files(out) == _fresh(store, tmp_path, "fresh-2")
