"""Choosing runs: latest~N within a scenario and machine (imported and withdrawn runs skipped), runs by
label or git sha, `reportgen runs` filters, `reportgen rm` withdrawing a run, and machine-keyed history."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from factories import synthetic_run, write_synthetic

from reportgen.analysis.history import digest, history
from reportgen.cli import main
from reportgen.errors import BundleError, CompareError
from reportgen.model.run import Run, RunSource, ScenarioInfo
from reportgen.store.loader import resolve_run_dir
from reportgen.store.withdrawn import read_withdrawn


def make(run_id: str, minute: int, scenario: str = "rmsnorm", machine: str | None = None,
         source: RunSource = RunSource.PROFILE, label: str = "test", sha: str | None = None) -> Run:
    run = synthetic_run(run_id=run_id, created_utc=f"2026-11-30T00:{minute:02d}:00Z", label=label)
    return dataclasses.replace(
        run, source=source, scenario=ScenarioInfo(scenario, "x", dict(run.scenario.parameters)),
        environment=dataclasses.replace(run.environment, machine=machine),
        git=dataclasses.replace(run.git, sha=sha or run.git.sha))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    s = tmp_path / "store"
    for r in (make("a1", 1, "rmsnorm", "box"), make("b1", 2, "softmax", "box"), make("a2", 3, "rmsnorm", "box"),
              make("c1", 4, "rmsnorm", "laptop"), make("imp", 5, "rmsnorm", "box", RunSource.IMPORT),
              make("b2", 6, "softmax", "box", label="my change", sha="feedface" + "0" * 32)):
        write_synthetic(s, r)
    return s


def test_latest_n_counts_within_the_newest_runs_scenario_and_machine(store: Path) -> None:
    assert resolve_run_dir(store, "latest").name == "b2"
    assert resolve_run_dir(store, "latest~1").name == "b1"  # softmax on box; rmsnorm and the import skipped
    with pytest.raises(BundleError, match=r"has 2 run\(s\) of scenario 'softmax' on machine box; 'latest~2'"):
        resolve_run_dir(store, "latest~2")


def test_latest_n_with_explicit_filters(store: Path) -> None:
    assert resolve_run_dir(store, "latest", scenario="rmsnorm").name == "c1"  # newest rmsnorm: laptop's
    assert resolve_run_dir(store, "latest~1", scenario="rmsnorm", machine="box").name == "a1"
    assert resolve_run_dir(store, "latest", scenario="rmsnorm", machine="box").name == "a2"  # not the import


def test_runs_by_label_and_git_sha(store: Path) -> None:
    assert resolve_run_dir(store, "my change").name == "b2"
    assert resolve_run_dir(store, "feedfac").name == "b2"
    assert resolve_run_dir(store, "test", scenario="rmsnorm", machine="laptop").name == "c1"
    with pytest.raises(BundleError, match="no such run in .* label or git sha"):
        resolve_run_dir(store, "deadbee")


def test_runs_command_filters(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--store", str(store), "--scenario", "rmsnorm", "--machine", "box"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t")[:5] == ["run_id", "time_utc", "device", "machine", "scenario"]
    assert [ln.split("\t")[0] for ln in lines[1:]] == ["a1", "a2", "imp"]
    assert main(["runs", "--store", str(store), "--machine", "nowhere"]) == 0
    assert capsys.readouterr().out.startswith("no runs matching the filters in ")


def test_rm_withdraws_without_deleting(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (store / "b2" / "run.json").read_bytes()
    assert main(["rm", "latest", "--store", str(store), "--reason", "noisy neighbour"]) == 0
    assert capsys.readouterr().out.startswith("withdrew b2: noisy neighbour (kept in ")
    assert (store / "b2" / "run.json").read_bytes() == before
    doc = json.loads((store / "withdrawn.json").read_text())
    assert doc["schema_version"] == 1 and doc["withdrawals"][0]["run_id"] == "b2"
    assert read_withdrawn(store)["b2"].reason == "noisy neighbour"
    assert resolve_run_dir(store, "latest").name == "c1"  # b2 withdrawn, imp imported
    assert resolve_run_dir(store, "latest", scenario="softmax").name == "b1"
    assert main(["runs", "--store", str(store), "--scenario", "softmax"]) == 0
    assert [ln.split("\t")[0] for ln in capsys.readouterr().out.splitlines()[1:]] == ["b1"]
    assert main(["runs", "--store", str(store), "--scenario", "softmax", "--all"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("WITHDRAWN (noisy neighbour)")


def test_rm_needs_a_printable_reason(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rm", "a1", "--store", str(store), "--reason", "bad\x1b[31m"]) == 2
    assert "give one line of printable text" in capsys.readouterr().err
    assert not (store / "withdrawn.json").exists()


def test_a_withdrawn_run_leaves_the_history_and_its_page_says_why(store: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert main(["build", "--runs", str(store), "--out", str(site)]) == 0
    assert 'id="withdrawn"' not in (site / "runs" / "a2" / "index.html").read_text()
    assert main(["rm", "a2", "--store", str(store), "--reason", "thermal <throttling>"]) == 0
    assert main(["build", "--runs", str(store), "--out", str(site)]) == 0
    page = (site / "runs" / "a2" / "index.html").read_text()
    assert 'id="withdrawn"' in page and "thermal &lt;throttling&gt;" in page
    assert "<dt>machine</dt><dd>box</dd>" in page and "Test CPU" in page  # the name, and the model still shown
    assert "Withdrawn" in (site / "runs" / "a2" / "report.md").read_text()
    index = (site / "index.html").read_text()
    assert "runs/a2/" not in index and "runs/a1/" in index
    assert (site / "runs" / "a2" / "index.html").is_file()


def test_history_and_comparisons_are_keyed_by_machine() -> None:
    from reportgen.compare.diff import compare_runs

    a = make("x1", 1, machine="ci")
    b = dataclasses.replace(make("x2", 2, machine="ci"),
                            environment=dataclasses.replace(make("x2", 2, machine="ci").environment,
                                                            cpu_model="Other CPU", device_name="Other CPU"))
    c = make("x3", 3, machine="laptop")
    groups = history([digest(r) for r in (a, b, c)])
    assert sorted(g.run_ids for g in groups) == [("x1", "x2"), ("x3",)]  # one line per machine, CPU changes ignored
    assert {g.title for g in groups} == {"rmsnorm on cpu (machine ci) — dtype=float32, shape=4,64",
                                         "rmsnorm on cpu (machine laptop) — dtype=float32, shape=4,64"}
    unnamed = [digest(make("u1", 1)), digest(b)]
    assert len(history(unnamed)) == 2
    with pytest.raises(CompareError, match="field 'environment.machine' differs \\('ci' vs 'laptop'\\)"):
        compare_runs(a, c, 5.0)
