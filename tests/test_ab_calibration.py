"""``reportgen ab --calibrate``: the A/A pair it runs, what it stores, the figures derived from the stored runs, and the
lines a later pair's comment states; the flags refused. Fake workers and a fake clock (test_ab_coordinator's)."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from test_ab_coordinator import COMMITS, TWO_ROUNDS, Pair, pair

from reportgen.ab import calibration
from reportgen.ab.bundles import store_pair
from reportgen.ab.calibration_report import comment_calibration, render_calibration
from reportgen.ab.report import render_ab_markdown
from reportgen.ab.settings import AbSettings
from reportgen.store.loader import load_run

OFFSETS = (1.03, 0.97, 1.01, 0.99, 1.02, 0.98, 1.0, 1.04, 0.96, 1.01)
"""Each fake session's process offset of the head side: identical code, a few % apart between processes."""


def calibrate(settings: AbSettings = TWO_ROUNDS) -> Pair:
    return pair({"naive": 100.0, "fused": 50.0}, {"naive": 100.0, "fused": 50.0}, calibration.run_settings(settings),
                process=lambda s: OFFSETS[s % len(OFFSETS)])


def test_a_calibration_runs_twenty_sessions_and_stores_them_marked_with_their_times(tmp_path: Path) -> None:
    p = calibrate()
    result = p.result
    assert result.sessions == calibration.CALIBRATION_SESSIONS == 20  # not stopped when the A/A is decided at 6
    assert len(result.session_s) == 20 and all(s > 0 for s in result.session_s)
    assert sum(result.session_s) == pytest.approx(sum(w.block_s * w.blocks for ws in p.workers for w in ws.values()))
    ids = store_pair(result, COMMITS, tmp_path)
    for run_id in ids.values():
        run = load_run(tmp_path / run_id)
        assert run.ab is not None and run.ab.calibration and run.ab.session_s == result.session_s
    plain = store_pair(pair({"naive": 1.0}, {"naive": 1.0}).result, COMMITS, tmp_path)
    assert not any(load_run(tmp_path / r).ab.calibration for r in plain.values())  # type: ignore[union-attr]


def test_the_stored_runs_give_the_figures_the_measured_pair_gave(tmp_path: Path) -> None:
    p = calibrate()
    gate = AbSettings(threshold_pct=5.0)
    measured = calibration.from_result(p.result, gate)
    ids = store_pair(p.result, COMMITS, tmp_path)
    stored = calibration.from_runs(load_run(tmp_path / ids["base"]), load_run(tmp_path / ids["head"]), gate)
    assert measured is not None and stored == measured
    (naive, fused) = measured.variants
    assert naive.session_ratios == pytest.approx(OFFSETS * 2)  # the head's process offsets, session by session
    assert measured.gate.budget_sessions >= 6 and measured.first_session_s == p.result.session_s[0]
    assert naive.false_alarm_pct == 0.0 and naive.resolution_pct is not None and naive.resolution_pct < 5.0


def test_a_later_pair_finds_the_calibration_of_the_same_measurement_only(tmp_path: Path) -> None:
    store_pair(calibrate().result, COMMITS, tmp_path)
    later = store_pair(pair({"naive": 100.0, "fused": 50.0}, {"naive": 100.0, "fused": 55.0}).result, COMMITS, tmp_path)
    base = load_run(tmp_path / later["base"])
    found = calibration.find_calibration(tmp_path, base, AbSettings(threshold_pct=5.0, max_seconds=300.0))
    assert found is not None and found.sessions == 20 and found.calibration.budget_s == 300.0
    assert load_run(tmp_path / found.base_run_id).ab.calibration  # type: ignore[union-attr]
    other = store_pair(pair({"naive": 1.0}, {"naive": 1.0}, replace(TWO_ROUNDS, samples_per_block=4)).result, COMMITS,
                       tmp_path)  # another method (block size): the calibration does not speak for it
    assert calibration.find_calibration(tmp_path, load_run(tmp_path / other["base"]), AbSettings()) is None
    assert calibration.find_calibration(tmp_path / "none", base, AbSettings()) is None


def test_the_comment_states_the_runners_figures_and_flags_a_threshold_below_them(tmp_path: Path) -> None:
    store_pair(calibrate().result, COMMITS, tmp_path)
    result = pair({"naive": 100.0}, {"naive": 100.0}).result
    base = load_run(tmp_path / store_pair(result, COMMITS, tmp_path)["base"])
    found = calibration.find_calibration(tmp_path, base, AbSettings(threshold_pct=5.0))
    assert found is not None
    text = render_ab_markdown(result, COMMITS, None, comment_calibration(found, True))
    resolution = f"{found.calibration.resolution_pct:.1f}"  # figures reportgen formats are not escaped
    assert f"a change under **{resolution} %** is not detectable in 150 s" in text
    assert "of A/A pairs end in a false alarm" in text and "[!WARNING]" not in text
    tight = calibration.find_calibration(tmp_path, base, AbSettings(threshold_pct=0.5))
    assert tight is not None and tight.calibration.resolution_pct is not None
    assert tight.calibration.resolution_pct > 0.5
    warned = render_ab_markdown(result, COMMITS, None, comment_calibration(tight, True))
    assert "> The threshold ±0.5 % is below what this runner resolves in 150 s" in warned
    hint = "This runner has no calibration for this scenario in the store: `reportgen ab --calibrate"
    assert hint not in render_ab_markdown(result, COMMITS, None, comment_calibration(None, True))  # decided: no hint
    undecided = pair({"naive": 100.0}, {"naive": 100.0}, replace(TWO_ROUNDS, max_seconds=12.0),
                     process=lambda s: 1.12 if s % 2 else 1.0).result
    assert undecided.stop_reason == "time budget"
    assert hint in render_ab_markdown(undecided, COMMITS, None, comment_calibration(None, True))
    assert "calibration" not in render_ab_markdown(undecided, COMMITS, None, comment_calibration(None, False))


def test_the_calibration_report_renders_as_github_markdown(tmp_path: Path) -> None:
    p = calibrate()
    ids = store_pair(p.result, COMMITS, tmp_path)
    text = render_calibration(p.result, calibration.from_result(p.result, AbSettings()), COMMITS, ids, "markdown")
    assert text.startswith("<!-- reportgen-ab-calibration -->\n### reportgen A/B calibration: scenario tiny on cpu")
    assert "**20 sessions**" in text and "| naive | " in text and "| fused | " in text
    html = subprocess.run(["cmark-gfm", "--extension", "table"], input=text, capture_output=True, text=True,
                          check=True).stdout
    assert html.count("<tr>") == 3 and "<table>" in html  # header + two variants
    assert f"base run {ids['base']}".replace("-", "\\-") in text


@pytest.mark.parametrize(("argv", "message"), [
    (["--calibrate", "--head", "{other}"], "--calibrate: measures the base checkout against itself; drop --head"),
    ([], "--head: give the head checkout's folder (or --calibrate to measure the base against itself)"),
])
def test_calibrate_flags_are_checked_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                                message: str) -> None:
    from reportgen.cli import main

    (tmp_path / "other").mkdir()
    argv = [a.replace("{other}", str(tmp_path / "other")) for a in argv]
    code = main(["ab", "--base", str(tmp_path), *argv, "--store", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err
    assert not (tmp_path / "s").exists()


def test_a_real_calibration_of_a_checkout_then_a_pair_that_states_it(tmp_path: Path) -> None:
    """The command as a user runs it: real worker processes, the base against itself, stored; then a pair in the same
    store whose comment states the runner's figures."""
    from conftest import run_cli
    from test_ab_cli import checkout

    checkout(tmp_path / "base", "base")
    checkout(tmp_path / "head", "head")
    store, report = tmp_path / "store", tmp_path / "calibration.md"
    flags = ["--scenario", "tiny", "--variants", "fused", "--rounds", "2", "--store", str(store), "--quiet"]
    proc = run_cli("ab", "--calibrate", "--base", str(tmp_path / "base"), *flags, "--output", str(report), timeout=900)
    assert proc.returncode == 0, proc.stderr
    text = report.read_text()
    assert "### reportgen A/B calibration: scenario tiny on cpu" in text and "**20 sessions**" in text
    (base, head) = (load_run(p) for p in sorted(store.iterdir()) if p.name[0].isdigit())  # ids: ...-base-, ...-head-
    assert base.ab is not None and head.ab is not None and base.ab.calibration and len(base.ab.session_s) == 20
    assert base.git.sha == head.git.sha  # the same checkout on both sides
    comment = tmp_path / "pr.md"
    proc = run_cli("ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), *flags, "--output",
                   str(comment), "--max-seconds", "5", timeout=600)  # 6 sessions: this tiny shape is noisy
    assert proc.returncode in (0, 1, 7), proc.stderr
    assert "On this runner (A/A calibration " in comment.read_text()
