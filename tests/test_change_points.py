"""Steps on main: change points of each history series, ``reportgen history``, the Action's push gate, the index."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from factories import synthetic_run, variant, write_synthetic
from hostile import snapshot

from reportgen.analysis import change_points as cp
from reportgen.analysis.history import HistoryGroup, HistoryPoint, HistorySeries
from reportgen.cli import main
from reportgen.model.run import GitInfo

ACTION_SCRIPT = ROOT / "reportgen" / "ci" / "action.sh"
HOSTILE_SHA = "<b>x</b>&\"'|`$(id)"


def noisy(n: int, sd: float, seed: int, steps: dict[int, float] | None = None) -> list[float]:
    """``n`` per-run medians around 100 µs with log-normal noise ``sd``, times each ``steps`` factor from its index."""
    rng = np.random.default_rng(seed)
    level = np.ones(n)
    for index, factor in (steps or {}).items():
        level[index:] *= factor
    return list(100.0 * level * np.exp(rng.normal(0.0, sd, n)))


def test_a_known_step_is_found_at_its_run_with_its_size() -> None:
    found = cp.detect_steps(noisy(60, 0.01, seed=1, steps={30: 1.10}))
    assert [s.index for s in found] == [30]
    step = found[0]
    assert 1.09 < step.ratio < 1.11 and step.ci_low < 1.10 < step.ci_high
    assert (step.runs_before, step.runs_after) == (30, 30)


def test_steps_up_and_down_are_each_found() -> None:
    found = cp.detect_steps(noisy(120, 0.02, seed=2, steps={40: 1.25, 80: 1 / 1.25}))
    assert [s.index for s in found] == [40, 80]
    assert found[0].ratio > 1.2 and found[1].ratio < 0.85


def test_flat_noise_has_no_step() -> None:
    for seed in range(5):
        assert cp.detect_steps(noisy(200, 0.03, seed=seed)) == ()


def test_a_step_under_the_minimum_relative_size_is_not_reported() -> None:
    """1 % is hundreds of standard errors at 0.05 % noise, but below MIN_RELATIVE (2 %)."""
    values = noisy(60, 0.0005, seed=3, steps={30: 1.01})
    assert cp.detect_steps(values, min_relative=0.0)[0].index == 30
    assert cp.detect_steps(values) == ()


def group_of(values: list[float]) -> HistoryGroup:
    """A history group of one variant, ``fused``, whose runs are ``r0``, ``r1``, ... at commits ``c0``, ``c1``, ..."""
    points = tuple(HistoryPoint(f"r{i}", f"t{i}", v, v, v, None) for i, v in enumerate(values))
    return HistoryGroup("k", "title", "cpu", "s", (), tuple(p.run_id for p in points),
                        tuple(p.created_utc for p in points), (HistorySeries("fused", points),),
                        tuple(f"c{i}" for i in range(len(values))))


def first_showing(values: list[float]) -> int:
    """How many runs of ``values`` it takes for a new step to be reported."""
    return next(n for n in range(2, len(values) + 1) if any(s.new for s in cp.series_steps(group_of(values[:n]))[0].steps))


def test_a_new_step_is_reported_once_by_the_first_run_that_shows_it() -> None:
    values = noisy(40, 0.01, seed=4, steps={30: 1.2})
    new_at = [n for n in range(2, 41) if any(s.new for s in cp.series_steps(group_of(values[:n]))[0].steps)]
    assert len(new_at) == 1 and 30 < new_at[0] <= 30 + cp.MIN_SEGMENT
    [final] = cp.series_steps(group_of(values))[0].steps
    assert final.step.index == 30 and not final.new
    assert (final.before.run_id, final.after.run_id, final.commit_range) == ("r29", "r30", "c29..c30")


@pytest.mark.parametrize("seed", [0, 6])
def test_a_step_that_flickers_while_its_runs_arrive_is_reported_once(seed: int) -> None:
    """A 6 % step in 2.5 % noise: seed 6 shows, loses and shows it again in its first runs (the lookback holds
    the alarm to one); seed 0 shows it again 20 runs later as an old step regains significance (so does the
    window)."""
    values = noisy(70, 0.025, seed=seed, steps={40: 1.06})
    new_at = [n for n in range(8, 71) if any(s.new for s in cp.series_steps(group_of(values[:n]))[0].steps)]
    assert len(new_at) == 1 and 40 < new_at[0] <= 40 + cp.NEW_STEP_MAX_RUNS_AFTER


def test_one_slow_newest_run_is_not_a_step() -> None:
    """The last segment PELT closes on one slow run among four: its median, not its mean, judges it."""
    values = noisy(40, 0.01, seed=9)
    values[-1] *= 1.3
    assert cp.detect_steps(values) == ()


def test_pelt_finds_the_same_segments_as_ruptures() -> None:
    rpt = pytest.importorskip("ruptures")
    for seed in range(5):
        values = np.log(noisy(150, 0.03, seed=seed, steps={50: 1.08, 100: 1.15}))
        scaled = values / cp.noise_sigma(values)
        penalty = cp.PENALTY_PER_LOG_N * np.log(len(values))
        ours = cp.pelt(list(scaled), penalty, cp.MIN_SEGMENT)
        theirs = rpt.Pelt(model="l2", min_size=cp.MIN_SEGMENT, jump=1).fit(scaled).predict(pen=penalty)[:-1]
        assert ours == theirs


def make_store(store: Path, medians: list[float], shas: dict[int, str] | None = None) -> list[str]:
    """One run per median (``fused`` takes it; ``naive`` stays at 100 µs), git commit ``c<i>...`` or ``shas[i]``."""
    ids = []
    for i, m in enumerate(medians):
        run = synthetic_run(run_id=f"20261201T{i // 60:02d}{i % 60:02d}00Z-cpu-test-{i:06x}",
                            created_utc=f"2026-12-01T{i // 60:02d}:{i % 60:02d}:00Z",
                            variants=(variant("naive", 100.0), variant("fused", m)))
        sha = (shas or {}).get(i, f"{i:04d}" + "c" * 36)
        write_synthetic(store, dataclasses.replace(run, git=GitInfo(sha, False)))
        ids.append(run.run_id)
    return ids


def history(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["history", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_history_json_lists_each_series_and_its_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "results"
    ids = make_store(store, noisy(24, 0.01, seed=6, steps={12: 1.2}))
    before = snapshot(store)
    code, out, _ = history(capsys, "--store", str(store), "--json")
    assert code == 0 and snapshot(store) == before
    doc = json.loads(out)
    assert doc["schema_version"] == 1 and doc["new_steps"] == 0
    series = {s["variant"]: s for s in doc["series"]}
    assert set(series) == {"naive", "fused"} and series["naive"]["steps"] == []
    assert series["fused"]["runs"] == 24
    [step] = series["fused"]["steps"]
    assert step["index"] == 12 and step["before_run"] == ids[11] and step["after_run"] == ids[12]
    assert step["before_commit"] == "0011" + "c" * 36 and step["after_commit"] == "0012" + "c" * 36
    assert step["commit_range"] == "0011cccccccc..0012cccccccc"
    assert 1.17 < step["ratio"] < 1.23 and step["ci_low"] < step["ratio"] < step["ci_high"] and not step["new"]


def test_fail_on_step_exits_1_on_a_new_step_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the run that first shows the step as the newest, it is new; once older runs show it too, it is not."""
    values = noisy(30, 0.01, seed=7, steps={20: 1.2})
    shown = first_showing(values)
    old, new = tmp_path / "old", tmp_path / "new"
    make_store(new, values[:shown])
    make_store(old, values)
    before = snapshot(new)
    code, out, err = history(capsys, "--store", str(new), "--fail-on-step")
    assert code == 1 and "NEW step at run" in out and "1 new step(s)" in err and snapshot(new) == before
    assert history(capsys, "--store", str(new))[0] == 0
    code, out, _ = history(capsys, "--store", str(old), "--fail-on-step")
    assert code == 0 and "step at run 21: +" in out and "NEW" not in out


def test_push_mode_reports_a_new_step_and_fails_only_when_asked(tmp_path: Path) -> None:
    store = tmp_path / "results"
    values = noisy(30, 0.01, seed=7, steps={20: 1.2})
    make_store(store, values[:first_showing(values)])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def report(flag: str) -> subprocess.CompletedProcess[str]:
        script = 'source "$1"; workspace="$2"; report_steps "$3"'
        return subprocess.run(["bash", "-c", script, "_", str(ACTION_SCRIPT), str(tmp_path), str(store)],
                              env={**env, "RG_FAIL_ON_STEP": flag}, capture_output=True, text=True, timeout=120)

    failing = report("true")
    assert failing.returncode == 1, failing.stderr
    assert "NEW step at run" in failing.stdout and "::error::reportgen: a new step" in failing.stdout
    passing = report("false")
    assert passing.returncode == 0 and "::error::reportgen: a new step" in passing.stdout


def test_the_index_marks_a_step_with_its_commit_range_escaped(tmp_path: Path) -> None:
    from reportgen.site import build_site

    store, site = tmp_path / "results", tmp_path / "site"
    make_store(store, noisy(24, 0.01, seed=8, steps={12: 0.8}), shas={12: HOSTILE_SHA})
    build_site(store, site, "/")
    html = (site / "index.html").read_text()
    assert "0011cccccccc..&lt;b&gt;x&lt;/b" in html and "<b>x" not in html
    assert 'class="commit-range"' in html and "-20.0 %" in html or "step in <code>fused</code>" in html
    md = (site / "index.md").read_text()
    assert "step in fused" in md and "<b>x" not in md
    assert len(list((site / "history").glob("*.svg"))) == 1


def test_push_mode_refuses_a_fail_on_step_that_is_neither_true_nor_false(tmp_path: Path) -> None:
    script = 'source "$1"; check_inputs; echo checked'
    for value, code in (("yes", 2), ("true", 0), ("false", 0)):
        proc = subprocess.run(["bash", "-c", script, "_", str(ACTION_SCRIPT)], cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, "RG_FAIL_ON_STEP": value}, timeout=60)
        assert proc.returncode == code, proc.stderr
        assert ("RG_FAIL_ON_STEP: 'yes' is neither true nor false" in proc.stderr) == (code == 2)


def test_push_mode_listing_cannot_issue_workflow_commands(tmp_path: Path) -> None:
    """A series title is the repository's data: a line of the listing that looks like ``::error::`` is printed
    between GitHub's stop-commands markers, so the runner never runs it."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "reportgen").write_text("#!/bin/sh\necho '::error title=x::pwned'\n")
    (fake / "reportgen").chmod(0o755)
    script = 'source "$1"; workspace="$2"; report_steps "$2"'
    proc = subprocess.run(["bash", "-c", script, "_", str(ACTION_SCRIPT), str(tmp_path)], capture_output=True,
                          text=True, env={**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}, timeout=60)
    lines = proc.stdout.splitlines()
    at = lines.index("::error title=x::pwned")
    assert lines[at - 1].startswith("::stop-commands::rg-")
    token = lines[at - 1].removeprefix("::stop-commands::")
    assert len(token) == 19 and lines[at + 1] == f"::{token}::"
