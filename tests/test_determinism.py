"""Determinism: builds of the same runs under SOURCE_DATE_EPOCH are byte-identical, whatever order the runs
were added in, wherever the store and site live, and whether the site was built at once or run by run."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import synthetic_run, write_synthetic
from hostile import hostile_run, tree_hash

from reportgen.model.run import DeviceKind
from reportgen.site import build_site

RUNS = [
    synthetic_run(run_id="20261130T000000Z-cpu-test-aaa111", with_traces=True),
    synthetic_run(run_id="20261201T000000Z-cpu-test-bbb222", created_utc="2026-12-01T00:00:00Z",
                  times_us={"naive": 90.0, "fused": 55.0, "compiled": 31.0}),
    synthetic_run(run_id="20261201T000000Z-cuda-test-ccc333", created_utc="2026-12-01T00:00:00Z",
                  device=DeviceKind.CUDA, with_traces=True),
    hostile_run("20261202T000000Z-cpu-evil-ddd444", "2026-12-02T00:00:00Z"),
]


@pytest.fixture(autouse=True)
def _epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")


def _store(root: Path, order: list[int]) -> Path:
    for i in order:
        write_synthetic(root / "store", RUNS[i])
    return root / "store"


def test_insertion_order_and_location_do_not_change_a_byte(tmp_path: Path) -> None:
    first = _store(tmp_path / "one", [0, 1, 2, 3])
    second = _store(tmp_path / "elsewhere" / "two", [3, 2, 0, 1])
    build_site(first, tmp_path / "one" / "site", "/r/")
    build_site(second, tmp_path / "elsewhere" / "two" / "out", "/r/")
    assert tree_hash(tmp_path / "one" / "site") == tree_hash(tmp_path / "elsewhere" / "two" / "out")


def test_run_by_run_builds_equal_one_build_of_all(tmp_path: Path) -> None:
    at_once = _store(tmp_path / "a", [0, 1, 2, 3])
    build_site(at_once, tmp_path / "a" / "site", "/r/")
    stepwise = tmp_path / "b" / "store"
    for i in [2, 0, 3, 1]:
        write_synthetic(stepwise, RUNS[i])
        build_site(stepwise, tmp_path / "b" / "site", "/r/")
    assert tree_hash(tmp_path / "a" / "site") == tree_hash(tmp_path / "b" / "site")


def test_the_build_time_shown_comes_from_source_date_epoch(tmp_path: Path) -> None:
    build_site(_store(tmp_path, [1]), tmp_path / "site", "/")
    assert "2027-01-15 08:00 UTC" in (tmp_path / "site" / "index.html").read_text()
