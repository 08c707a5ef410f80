"""``reportgen compare``: outcomes and statistics, refusals, the comment's size limit, escaping,
GFM rendering by real renderers, JSON, and the CLI's exit codes, on synthetic and real CPU runs."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from factories import NAIVE_OPS, synthetic_run, variant, write_synthetic
from markdown_it import MarkdownIt

from reportgen.analysis.paired import SessionRounds, pair_stats
from reportgen.analysis.stats import METHOD
from reportgen.cli import main
from reportgen.compare.diff import compare_runs
from reportgen.compare.model import Comparison, Outcome, Pairing, RunRef, VariantChange, Verdict
from reportgen.compare.report import MARKER, MAX_COMMENT_CHARS, comment_length, comparison_json, render_markdown, run_page_url
from reportgen.compare.variants import stored_session_ratios
from reportgen.errors import CompareError, UsageError
from reportgen.model.run import (
    AbInfo,
    AbRound,
    AbRoundSamples,
    DeviceKind,
    Environment,
    OpRow,
    Run,
    VariantResult,
    VariantStatus,
)
from reportgen.store.loader import load_store

REAL_STORE = Path(__file__).resolve().parent / "data" / "compare" / "real-store"
REAL_BASE = "20261130T050311Z-cpu-base-4be6d1"
REAL_PR = "20261130T050319Z-cpu-pr-853380"
HEAD_ID = "20261130T000100Z-cpu-head-def456"
HOSTILE = "<script>alert(1)</script> | `tick` @octocat [x](javascript:alert(1)) **b**"


def v(name: str, samples: tuple[float, ...], status: VariantStatus = VariantStatus.OK,
      ops: tuple[OpRow, ...] = NAIVE_OPS) -> VariantResult:
    """A variant with exactly these per-call samples."""
    return dataclasses.replace(variant(name, 1.0, ops=ops), samples_us=samples, status=status)


def runs(base: tuple[VariantResult, ...], head: tuple[VariantResult, ...], **head_kw: object) -> tuple[Run, Run]:
    """A base and a head run of the same scenario and device holding these variants."""
    b = synthetic_run(variants=base)
    h = synthetic_run(run_id=HEAD_ID, created_utc="2026-11-30T00:01:00Z", label="head", variants=head)
    return b, dataclasses.replace(h, **head_kw) if head_kw else h


def steady_history(base: Run, n: int = 4) -> tuple[Run, ...]:
    """``n`` earlier runs identical to ``base`` (same machine, scenario, parameters and medians): zero drift between
    runs, so a comparison's interval is exactly the one within the runs."""
    return tuple(dataclasses.replace(base, run_id=f"20261129T0{i}0000Z-cpu-hist-{i:06d}",
                                     created_utc=f"2026-11-29T0{i}:00:00Z") for i in range(n))


def compared(base: Run, head: Run, threshold: float = 5.0) -> Comparison:
    """``compare_runs`` with a steady history in the store (known, zero drift): the within-run statistics decide."""
    return compare_runs(base, head, threshold, (*steady_history(base), base, head))


def change(base: tuple[float, ...], head: tuple[float, ...], threshold: float = 5.0) -> VariantChange:
    b, h = runs((v("x", base),), (v("x", head),))
    return compared(b, h, threshold).variants[0]


# --- statistics and outcomes -------------------------------------------------------------------


def test_constant_samples_give_the_exact_change_and_a_point_interval() -> None:
    c = change((100.0,) * 10, (120.0,) * 10)
    assert c.outcome is Outcome.SLOWER and c.is_regression
    assert c.change_pct == pytest.approx(20.0, abs=1e-9)
    assert c.ci_low_pct == pytest.approx(20.0, abs=1e-9) and c.ci_high_pct == pytest.approx(20.0, abs=1e-9)
    assert (c.base_median_us, c.head_median_us, c.base_samples, c.head_samples) == (100.0, 120.0, 10, 10)


def test_faster_is_an_improvement_not_a_regression() -> None:
    c = change((100.0,) * 10, (80.0,) * 10)
    assert c.outcome is Outcome.FASTER and not c.is_regression
    assert c.change_pct == pytest.approx(-20.0, abs=1e-9)


def test_change_below_threshold_is_no_change_even_with_a_tight_interval() -> None:
    c = change((100.0,) * 10, (104.0,) * 10)
    assert c.change_pct == pytest.approx(4.0, abs=1e-9) and c.ci_low_pct == pytest.approx(4.0, abs=1e-9)
    assert c.outcome is Outcome.NO_CHANGE


def test_change_equal_to_threshold_counts() -> None:
    assert change((100.0,) * 10, (110.0,) * 10, threshold=10.0).outcome is Outcome.SLOWER
    assert change((100.0,) * 10, (110.0,) * 10, threshold=10.5).outcome is Outcome.NO_CHANGE


def test_large_change_whose_interval_includes_zero_is_no_change() -> None:
    # base alternates 60 / 140: median 100, but bootstrap medians swing from 60 to 140.
    c = change((60.0, 140.0) * 10, (110.0,) * 20)
    assert c.change_pct == pytest.approx(10.0, abs=1e-9)
    assert c.ci_low_pct is not None and c.ci_high_pct is not None
    assert c.ci_low_pct < 0 < c.ci_high_pct
    assert c.outcome is Outcome.NO_CHANGE


@pytest.mark.parametrize("status", [VariantStatus.FAILED, VariantStatus.INCORRECT])
def test_variant_broken_in_head_is_a_regression(status: VariantStatus) -> None:
    b, h = runs((v("fused", (50.0,) * 5),), (v("fused", (50.0,) * 5 if status is VariantStatus.INCORRECT else (),
                                                status),))
    comp = compared(b, h, 5.0)
    assert comp.variants[0].outcome is Outcome.BROKEN
    assert comp.verdict is Verdict.REGRESSION and [x.name for x in comp.regressions] == ["fused"]
    assert f"fused broken ({status.value})" in render_markdown(comp)


def test_fixed_and_still_broken_are_not_regressions() -> None:
    b, h = runs((v("a", (), VariantStatus.FAILED), v("b", (), VariantStatus.FAILED)),
                (v("a", (10.0,) * 5), v("b", (), VariantStatus.FAILED)))
    comp = compared(b, h, 5.0)
    assert [x.outcome for x in comp.variants] == [Outcome.FIXED, Outcome.STILL_BROKEN]
    assert comp.verdict is Verdict.IMPROVEMENT and not comp.regressions


def test_added_and_removed_variants_are_listed_not_regressions() -> None:
    b, h = runs((v("naive", (100.0,) * 5), v("old", (10.0,) * 5)), (v("naive", (100.0,) * 5), v("new", (1.0,) * 5)))
    comp = compared(b, h, 5.0)
    assert [(x.name, x.outcome) for x in comp.variants] == [
        ("naive", Outcome.NO_CHANGE), ("old", Outcome.REMOVED), ("new", Outcome.ADDED)]
    assert comp.verdict is Verdict.NO_CHANGE
    md = render_markdown(comp)
    assert "| old | 10.00 | — | — | — | — | removed in head |" in md
    assert "| new | — | 1.00 | — | — | — | added in head |" in md


def test_imported_runs_without_samples_are_not_comparable() -> None:
    b, h = runs((v("naive", ()),), (v("naive", ()),))
    comp = compared(b, h, 5.0)
    assert comp.variants[0].outcome is Outcome.NO_SAMPLES and comp.verdict is Verdict.NO_CHANGE
    assert "| naive | — | — | — | — | — | no timing samples: not comparable |" in render_markdown(comp)


@pytest.mark.parametrize("threshold", [-1.0, float("nan"), float("inf")])
def test_bad_threshold_is_a_usage_error(threshold: float) -> None:
    b, h = runs((v("x", (1.0,)),), (v("x", (1.0,)),))
    with pytest.raises(UsageError, match=r"^threshold .*: must be a finite number of percent >= 0$"):
        compared(b, h, threshold)


# --- refusals and warnings ------------------------------------------------------------------------


def test_runs_on_different_devices_are_refused_naming_both_runs_and_the_field() -> None:
    b, h = runs((v("x", (1.0,)),), (v("x", (1.0,)),), device=DeviceKind.CUDA)
    with pytest.raises(CompareError) as info:
        compared(b, h, 5.0)
    assert info.value.message == (
        "cannot compare 20261130T000000Z-cpu-test-abc123 (base) with 20261130T000100Z-cpu-head-def456 (head): "
        "field 'device' differs ('cpu' vs 'cuda'); compare runs of the same device and scenario parameters")


def test_runs_with_different_shapes_are_refused() -> None:
    b = synthetic_run()
    h = synthetic_run(run_id=HEAD_ID, shape="8,64")
    with pytest.raises(CompareError, match=r"field 'scenario\.parameters\.shape' differs \('4,64' vs '8,64'\)"):
        compared(b, h, 5.0)


def test_parameter_present_on_one_side_only_is_refused() -> None:
    b = synthetic_run()
    h = synthetic_run(run_id=HEAD_ID)
    h = dataclasses.replace(h, scenario=dataclasses.replace(h.scenario, parameters={**h.scenario.parameters,
                                                                                     "eps": "1e-5"}))
    with pytest.raises(CompareError, match=r"field 'scenario\.parameters\.eps' differs \(absent vs '1e-5'\)"):
        compared(b, h, 5.0)


def test_different_scenarios_are_refused() -> None:
    b = synthetic_run()
    h = synthetic_run(run_id=HEAD_ID)
    h = dataclasses.replace(h, scenario=dataclasses.replace(h.scenario, name="layernorm"))
    with pytest.raises(CompareError, match=r"field 'scenario\.name' differs \('rmsnorm' vs 'layernorm'\)"):
        compared(b, h, 5.0)


def test_software_version_differences_are_warnings_not_refusals() -> None:
    b = synthetic_run()
    h = synthetic_run(run_id=HEAD_ID)
    env: Environment = dataclasses.replace(h.environment, torch_version="2.14.0",
                                           device_extras={"neuronx_cc_version": HOSTILE})
    comp = compared(b, dataclasses.replace(h, environment=env), 5.0)
    assert [(w.field, w.base, w.head) for w in comp.warnings] == [
        ("torch_version", "2.13.0", "2.14.0"), ("neuronx_cc_version", None, HOSTILE)]
    md = render_markdown(comp)
    assert "> torch\\_version: 2\\.13\\.0 (base) vs 2\\.14\\.0 (head)" in md
    assert "> neuronx\\_cc\\_version: absent (base) vs \\<script\\>" in md


# --- op tables -------------------------------------------------------------------------------------


def test_op_diff_per_step_added_gone_calls_and_largest_self_changes() -> None:
    base_ops = (OpRow("aten::mul", 6, 300.0, 300.0, 0, 0), OpRow("aten::add", 2, 40.0, 40.0, 0, 0),
                OpRow("aten::mean", 2, 100.0, 100.0, 0, 0))
    head_ops = (OpRow("aten::mul", 2, 100.0, 100.0, 0, 0), OpRow("aten::mean", 2, 100.0, 100.0, 0, 0),
                OpRow("aten::_fused_rms_norm", 2, 60.0, 60.0, 0, 0))
    b, h = runs((v("naive", (1.0,), ops=base_ops),), (v("naive", (1.0,), ops=head_ops),))
    (d,) = compared(b, h, 5.0).op_diffs  # profiled_steps = 2: everything is halved
    assert [(o.name, o.head_calls_per_step) for o in d.added] == [("aten::_fused_rms_norm", 1.0)]
    assert [(o.name, o.base_calls_per_step) for o in d.removed] == [("aten::add", 1.0)]
    assert [(o.name, o.base_calls_per_step, o.head_calls_per_step) for o in d.calls_changed] == [("aten::mul", 3, 1)]
    assert [(o.name, o.delta_self_us) for o in d.largest_self_changes] == [
        ("aten::mul", -100.0), ("aten::_fused_rms_norm", 30.0), ("aten::add", -20.0)]
    md = render_markdown(compared(b, h, 5.0))
    assert "| aten\\:\\:mul | 150.0 | 50.00 | -100.0 |" in md
    assert "Ops added (1): aten\\:\\:\\_fused\\_rms\\_norm (calls: 1)" in md


def test_identical_op_tables_give_no_section() -> None:
    b, h = runs((v("naive", (1.0,)),), (v("naive", (1.0,)),))
    comp = compared(b, h, 5.0)
    assert comp.op_diffs == () and "<details>" not in render_markdown(comp)


# --- the comment -----------------------------------------------------------------------------------


def test_comment_has_marker_verdict_table_links_and_method() -> None:
    b, h = runs((v("naive", (100.0,) * 5), v("fused", (50.0,) * 5)),
                (v("naive", (130.0,) * 5), v("fused", (50.0,) * 5)))
    md = render_markdown(compared(b, h, 5.0), site_url="https://user.github.io/my repo/")
    lines = md.splitlines()
    assert lines[0] == MARKER
    assert lines[1] == "### :x: reportgen: time regression in 1 of 2 variants: naive +30.0 %" and lines[2] == ""
    assert ("| naive | 100.0 | 130.0 | +30.0 % (+30.0 % to +30.0 %) | +30.0 % to +30.0 % | sd 0.0 % over 5 runs "
            "up to base | :red_circle: slower |") in lines
    assert ("| fused | 50.00 | 50.00 | +0.0 % (+0.0 % to +0.0 %) | +0.0 % to +0.0 % | sd 0.0 % over 5 runs up to base "
            "| no significant change |") in lines
    assert ("Run pages: [base](https://user.github.io/my%20repo/runs/20261130T000000Z-cpu-test-abc123/) · "
            f"[head](https://user.github.io/my%20repo/runs/{HEAD_ID}/)") in lines
    assert "95 \\% percentile\\-bootstrap interval" in lines[-1] and "excludes 0" in lines[-1]


def test_mixed_verdict_names_the_regression_and_counts_the_faster() -> None:
    b, h = runs((v("a", (100.0,) * 5), v("b", (100.0,) * 5)), (v("a", (50.0,) * 5), v("b", (), VariantStatus.FAILED)))
    assert render_markdown(compared(b, h, 5.0)).splitlines()[1] == (
        "### :x: reportgen: time regression in 1 of 2 variants: b broken (failed); faster: 1")


def test_verdicts_for_improvement_and_no_change() -> None:
    b, h = runs((v("naive", (100.0,) * 5),), (v("naive", (50.0,) * 5),))
    assert render_markdown(compared(b, h, 5.0)).splitlines()[1] == (
        "### :white_check_mark: reportgen: faster in 1 of 1 variants: naive -50.0 %")
    b, h = runs((v("naive", (100.0,) * 5),), (v("naive", (101.0,) * 5),))
    assert render_markdown(compared(b, h, 5.0)).splitlines()[1] == (
        "### :white_check_mark: reportgen: no significant change in 1 variants")


@pytest.mark.parametrize("url", ["javascript:alert(1)", "user.github.io/repo", "file:///etc/passwd"])
def test_site_url_must_be_http(url: str) -> None:
    with pytest.raises(UsageError, match=r"^site_url .*: expected an http\(s\) URL"):
        run_page_url(url, "r1")


def test_site_url_cannot_break_out_of_the_link() -> None:
    assert run_page_url("https://x.io/a)b<c>[d]", "r1") == "https://x.io/a%29b%3Cc%3E%5Bd%5D/runs/r1/"


def _huge_comparison(n_variants: int, name: str) -> Comparison:
    """A comparison built directly (no bootstrap) with ``n_variants`` slower variants."""
    ref = RunRef("r-base", name, "2026", None, "cpu")
    rows = tuple(VariantChange(f"{name}{i}", Outcome.SLOWER, VariantStatus.OK, VariantStatus.OK, 100.0, 130.0,
                               30.0, 25.0, 35.0, 5, 5) for i in range(n_variants))
    return Comparison(ref, dataclasses.replace(ref, run_id="r-head"), "rmsnorm", 5.0, rows, (), (), METHOD)


def test_ten_thousand_giant_hostile_variants_fit_with_the_verdict_kept() -> None:
    comp = _huge_comparison(10_000, HOSTILE * 50)
    md = render_markdown(comp)
    assert comment_length(md) <= MAX_COMMENT_CHARS < 65_536
    lines = md.splitlines()
    assert lines[0] == MARKER and lines[1].startswith("### :x: reportgen: time regression in 10000 of 10000 variants: ")
    assert lines[1].endswith(" and 9997 more")
    shown = sum(1 for line in lines if line.endswith("| :red_circle: slower |"))
    assert 10 < shown < 10_000
    assert f"*Truncated: {10_000 - shown} more variants not shown; see the site or" in md
    assert "<sub>Method:" in lines[-1]
    assert not re.search(r"(?<!\\)<script", md)  # only escaped ones


def test_huge_op_diffs_are_dropped_from_the_end_first() -> None:
    ops = tuple(OpRow(f"{HOSTILE}{i}", 1, float(i + 1), 0.0, 0, 0) for i in range(40))
    more = tuple(OpRow(f"{HOSTILE}{i + 40}", 2, 2.0 * (i + 1), 0.0, 0, 0) for i in range(40))
    names = [f"v{i}" for i in range(60)]
    b, h = runs(tuple(v(n, (100.0,) * 5, ops=ops) for n in names),
                tuple(v(n, (100.0 + i,) * 5, ops=ops[20:] + more) for i, n in enumerate(names)))
    comp = compared(b, h, 5.0)
    assert len(comp.op_diffs) == 60
    full = render_markdown(comp, limit_chars=10**9)
    assert comment_length(full) > 65_536
    md = render_markdown(comp)
    assert comment_length(md) <= MAX_COMMENT_CHARS
    assert all(f"| v{i} |" in md for i in range(60))  # every variant row kept
    kept = re.findall(r"<summary>Op table changes: (v\d+)</summary>", md)
    assert kept == [f"v{i}" for i in range(len(kept))] and 0 < len(kept) < 60
    assert f"*Truncated: {60 - len(kept)} op-change sections omitted" in md
    assert md.splitlines()[1] == (
        "### :x: reportgen: time regression in 55 of 60 variants: v5 +5.0 %, v6 +6.0 %, v7 +7.0 % and 52 more")


# --- escaping and real GFM renderers ----------------------------------------------------------------------


def _hostile_comparison() -> Comparison:
    ops = (OpRow(HOSTILE, 1, 5.0, 5.0, 0, 0),)
    b, h = runs((v(HOSTILE, (100.0,) * 5, ops=()), v("plain", (10.0,) * 5, ops=())),
                (v(HOSTILE, (150.0,) * 5, ops=ops), v("plain", (10.0,) * 5, ops=())), label=HOSTILE)
    return compared(b, h, 5.0)


def _check_rendered_html(out: str) -> None:
    assert "<table>" in out
    assert "<script" not in out.lower()
    assert "<a " not in out and "<code>" not in out and "<strong>b" not in out  # no link, code span or bold from data
    text = html.unescape(re.sub(r"<[^>]+>", "", out))
    assert not re.search(r"@[A-Za-z0-9]", text), "a live @mention survived"
    assert HOSTILE.replace("@", "@\u2060") in text  # the visible text is unchanged
    variant_table = out.split("<table>")[1]
    for row in re.findall(r"<tr>(.*?)</tr>", variant_table, re.S):
        assert len(re.findall(r"<t[hd]", row)) == 7, row  # pipes in names did not split cells


def test_markdown_it_gfm_renders_tables_and_neutralises_hostile_names() -> None:
    md = render_markdown(_hostile_comparison())
    out = MarkdownIt("gfm-like", {"html": True}).render(md)
    _check_rendered_html(out)
    assert "<details><summary>Op table changes: &lt;script&gt;" in out


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm (GitHub's renderer) is not installed")
def test_cmark_gfm_renders_tables_and_neutralises_hostile_names() -> None:
    md = render_markdown(_hostile_comparison())
    out = subprocess.run(["cmark-gfm", "--unsafe", "-e", "table", "-e", "autolink", "-e", "tagfilter",
                          "-e", "strikethrough"], input=md, capture_output=True, text=True, check=True).stdout
    _check_rendered_html(out)
    assert out.count("<table>") == 2 and "<details><summary>" in out


# --- real CPU-profiled runs ------------------------------------------------------------------------------


def _real(run_id: str) -> Run:
    return next(r for r in load_store(REAL_STORE) if r.run_id == run_id)


def test_real_cpu_runs_regression_and_its_reverse() -> None:
    comp = compared(_real(REAL_BASE), _real(REAL_PR), 5.0)
    outcomes = {x.name: x.outcome for x in comp.variants}
    assert outcomes == {"naive": Outcome.NO_CHANGE, "fused": Outcome.SLOWER}
    fused = comp.variants[1]
    assert fused.ci_low_pct is not None and fused.ci_low_pct > 100  # the float64 round trip: > 2x slower
    reverse = compared(_real(REAL_PR), _real(REAL_BASE), 5.0)
    assert {x.name: x.outcome for x in reverse.variants} == {"naive": Outcome.NO_CHANGE, "fused": Outcome.FASTER}
    diffs = {d.variant: d for d in comp.op_diffs}
    assert "aten::clone" in [o.name for o in diffs["fused"].added]
    assert "aten::_fused_rms_norm" in [o.name for o in diffs["naive"].added]
    out = MarkdownIt("gfm-like", {"html": True}).render(render_markdown(comp))
    assert out.count("<table>") >= 3


# --- runs measured apart: the drift between runs (issue 14) ---------------------------------------------------


def history_with(medians: tuple[float, ...], base: Run, name: str = "x") -> tuple[Run, ...]:
    """Earlier runs of base's machine, scenario and parameters, one per median (oldest first), of variant ``name``
    with constant samples at that median."""
    return tuple(dataclasses.replace(base, run_id=f"20261129T0{i}0000Z-cpu-hist-{i:06d}",
                                     created_utc=f"2026-11-29T0{i}:00:00Z", variants=(v(name, (m,) * 10),))
                 for i, m in enumerate(medians))


DRIFTING = (100.0, 110.0, 99.0, 109.0, 100.0)  # consecutive runs of unchanged code move by about 10 %
STEADY = (100.0, 100.5, 100.0, 99.5, 100.0)  # ... by about 0.5 %


def test_drifting_history_widens_the_interval_so_8_percent_slower_is_not_a_regression() -> None:
    b, h = runs((v("x", (100.0,) * 10),), (v("x", (108.0,) * 10),))
    within = compare_runs(b, h, 5.0, (*steady_history(b), b, h)).variants[0]
    assert within.outcome is Outcome.SLOWER  # the samples within the runs alone call it a regression
    comp = compare_runs(b, h, 5.0, (*history_with(DRIFTING, b), b, h))
    x = comp.variants[0]
    assert x.outcome is Outcome.NO_CHANGE and comp.verdict is Verdict.NO_CHANGE and not comp.regressions
    assert x.change_pct == pytest.approx(8.0)
    assert x.within_ci_low_pct == pytest.approx(8.0) and x.within_ci_high_pct == pytest.approx(8.0)
    assert x.ci_low_pct is not None and x.ci_high_pct is not None and x.ci_low_pct < 0 < 8.0 < x.ci_high_pct
    assert x.drift_pct is not None and 8 < x.drift_pct < 12 and x.drift_runs == 6  # 5 earlier runs and base
    assert comp.pairing is Pairing.SEPARATE and comp.minutes_apart == pytest.approx(1.0)
    assert comp.drift_note.startswith("not interleaved: taken 1 minute apart; intervals widened by the drift")
    md = render_markdown(comp)
    assert f"| sd {x.drift_pct:.1f} % over 6 runs up to base | no significant change |" in md
    assert "| +8.0 % to +8.0 % |" in md  # the within-run interval is shown beside the widened one


def test_steady_history_keeps_a_20_percent_slowdown_a_regression() -> None:
    b, h = runs((v("x", (100.0,) * 10),), (v("x", (120.0,) * 10),))
    comp = compare_runs(b, h, 5.0, (*history_with(STEADY, b), b, h))
    x = comp.variants[0]
    assert x.outcome is Outcome.SLOWER and comp.verdict is Verdict.REGRESSION
    assert x.drift_pct is not None and 0.2 < x.drift_pct < 1.0 and x.drift_runs == 6
    assert x.ci_low_pct is not None and x.ci_high_pct is not None and 15 < x.ci_low_pct < 20 < x.ci_high_pct < 25
    assert render_markdown(comp).splitlines()[1] == "### :x: reportgen: time regression in 1 of 1 variants: x +20.0 %"


def test_without_history_the_drift_is_unknown_and_a_change_is_inconclusive_never_a_regression() -> None:
    b, h = runs((v("x", (100.0,) * 10), v("y", (50.0,) * 10)), (v("x", (150.0,) * 10), v("y", (50.0,) * 10)))
    comp = compare_runs(b, h, 5.0)  # no history at all
    assert [x.outcome for x in comp.variants] == [Outcome.INCONCLUSIVE, Outcome.NO_CHANGE]
    assert comp.verdict is Verdict.INCONCLUSIVE and not comp.regressions and not comp.improvements
    assert all(x.drift_pct is None and x.drift_runs == 0 for x in comp.variants)
    assert comp.drift_note.startswith("not interleaved: taken 1 minute apart; drift between runs unknown (fewer than 4")
    assert "never a regression" in comp.drift_note and "`reportgen ab`" in comp.drift_note
    lines = render_markdown(comp).splitlines()
    assert lines[1] == ("### :grey_question: reportgen: inconclusive in 1 of 2 variants: x +50.0 %: not interleaved, "
                        "drift between runs unknown; use `reportgen ab`")
    assert "| x | 100.0 | 150.0 | +50.0 % (+50.0 % to +50.0 %) | +50.0 % to +50.0 % | unknown | :grey_question: " \
           "inconclusive: drift unknown |" in lines
    assert any(line.startswith("Timing: not interleaved\\: taken 1 minute apart\\; drift between runs unknown")
               for line in lines)
    # two earlier runs (three with base) are still too few; runs of another machine do not count
    other = tuple(dataclasses.replace(r, environment=dataclasses.replace(r.environment, hostname="elsewhere"))
                  for r in history_with(STEADY, b))
    for history in (history_with(STEADY[:2], b), other):
        assert compare_runs(b, h, 5.0, (*history, b, h)).verdict is Verdict.INCONCLUSIVE


def test_head_and_ab_sides_are_not_history() -> None:
    b, h = runs((v("x", (100.0,) * 10),), (v("x", (120.0,) * 10),))
    ab = AbInfo("p0", "base", "other", "m", 5.0, ())
    sides = tuple(dataclasses.replace(r, ab=ab) for r in history_with(STEADY, b))
    assert compare_runs(b, h, 5.0, (*sides, b, h)).verdict is Verdict.INCONCLUSIVE
    earlier = dataclasses.replace(h, created_utc="2026-11-29T23:00:00Z")  # a head older than base is not history
    assert compare_runs(b, earlier, 5.0, (*history_with(STEADY[:2], b), b, earlier)).verdict is Verdict.INCONCLUSIVE


def _ab_pair(base_us: float, head_us: float, sessions: int, rounds: int = 4) -> tuple[Run, Run]:
    """The two sides of one interleaved A/B pair of variant x: ``sessions`` sessions of ``rounds`` rounds, every
    block at these times."""
    n = sessions * rounds
    b, h = runs((v("x", (base_us,) * 5 * n),), (v("x", (head_us,) * 5 * n),))

    def info(side: str, partner: str, us: float) -> AbInfo:
        return AbInfo("pair42", side, partner, "paired", 5.0,
                      tuple(AbRound(i, "base" if i % 2 == 0 else "head", (AbRoundSamples("x", (us,) * 5),), session)
                            for session in range(sessions) for i in range(rounds)))
    return (dataclasses.replace(b, ab=info("base", h.run_id, base_us)),
            dataclasses.replace(h, ab=info("head", b.run_id, head_us)))


def test_a_stored_pair_is_scored_by_abba_pairs_as_ab_scored_it() -> None:
    """Rounds whose first side is 1.35x faster, r*p and r/p in turn, one block missing: the stored sides give the
    sessions' ratios ``reportgen ab``'s own statistics give (``paired.session_ratio``), not a median of rounds."""
    p, base_us = 1.35, 128.0
    heads = [(1.04 * (p if i % 2 == 0 else 1 / p)) * base_us for i in range(8)]
    b, h = _ab_pair(base_us, base_us, sessions=6, rounds=8)

    def rounds(side: str, times: list[float]) -> tuple[AbRound, ...]:
        return tuple(AbRound(i, "base" if i % 2 == 0 else "head", (AbRoundSamples("x", (t,) * 5),), s)
                     for s in range(6) for i, t in enumerate(times) if not (s == 2 and i == 5))
    b = dataclasses.replace(b, ab=dataclasses.replace(b.ab, rounds=rounds("base", [base_us] * 8)))
    h = dataclasses.replace(h, ab=dataclasses.replace(h.ab, rounds=rounds("head", heads)))
    ratios = stored_session_ratios(b.ab, h.ab, "x")
    expected = pair_stats([SessionRounds(tuple((base_us,) for _ in heads), tuple((t,) for t in heads))] * 6,
                          5.0).session_ratios
    assert ratios == pytest.approx(expected, rel=1e-12) and ratios == pytest.approx([1.04] * 6, rel=1e-12)


def test_an_ab_pair_keeps_its_paired_statistics_unwidened_without_history() -> None:
    b, h = _ab_pair(100.0, 120.0, sessions=6)
    comp = compare_runs(b, h, 5.0, history_with(DRIFTING, b))  # a drifting history does not widen a pair
    x = comp.variants[0]
    assert comp.pairing is Pairing.INTERLEAVED and x.outcome is Outcome.SLOWER and comp.verdict is Verdict.REGRESSION
    assert x.paired_sessions == 6 and x.drift_pct is None and x.ci_low_pct == pytest.approx(20.0)
    assert comp.drift_note.startswith("interleaved A/B pair pair42: paired statistics")
    assert "| +20.0 % to +20.0 % | paired, 6 sessions | :red_circle: slower |" in render_markdown(comp)
    # not partners (another pair's head): compared as separate runs, drift unknown
    other = dataclasses.replace(h, ab=dataclasses.replace(h.ab, pair_id="pair43") if h.ab else None)
    assert compare_runs(b, other, 5.0).verdict is Verdict.INCONCLUSIVE


def test_an_ab_pair_of_too_few_sessions_never_decides_a_change() -> None:
    """Rounds of one pair of processes cannot see the difference between processes (schema-3 pairs had one)."""
    b, h = _ab_pair(100.0, 120.0, sessions=1, rounds=40)
    comp = compare_runs(b, h, 5.0)
    x = comp.variants[0]
    assert x.paired_sessions == 0 and x.outcome is Outcome.INCONCLUSIVE and comp.verdict is Verdict.INCONCLUSIVE
    assert "| interleaved, too few sessions | :grey_question: inconclusive: too few sessions |" in render_markdown(comp)
    same = compare_runs(*_ab_pair(100.0, 100.0, sessions=5), 5.0)
    assert same.variants[0].outcome is Outcome.NO_CHANGE  # within the threshold: nothing to decide


# --- JSON and the command line -------------------------------------------------------------------------


def test_json_holds_the_same_content_as_data() -> None:
    b, h = runs((v("naive", (100.0,) * 5),), (v("naive", (130.0,) * 5),))
    doc = json.loads(comparison_json(compared(b, h, 5.0), site_url="https://x.io/r"))
    assert doc["schema_version"] == 1 and doc["kind"] == "reportgen-compare"
    assert doc["verdict"] == "regression" and doc["regressions"] == ["naive"] and doc["improvements"] == []
    assert doc["variants"][0]["outcome"] == "slower"
    assert doc["variants"][0]["change_pct"] == pytest.approx(30.0, abs=1e-9)
    assert doc["links"]["head"] == f"https://x.io/r/runs/{HEAD_ID}/"
    assert doc["base"]["run_id"] == "20261130T000000Z-cpu-test-abc123" and doc["threshold_pct"] == 5.0


def _store(tmp_path: Path, head_times: dict[str, float], history: int = 4, **head_kw: object) -> Path:
    """A store with ``history`` steady earlier runs, then base and a head with these times."""
    store = tmp_path / "store"
    for run in steady_history(synthetic_run(), history):
        write_synthetic(store, run)
    write_synthetic(store, synthetic_run())
    write_synthetic(store, synthetic_run(run_id=HEAD_ID, created_utc="2026-11-30T00:01:00Z", times_us=head_times,
                                         **head_kw))  # type: ignore[arg-type]
    return store


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {"naive": 150.0, "fused": 60.0, "compiled": 30.0})
    args = ["compare", "latest~1", "latest", "--store", str(store)]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith(MARKER + "\n### :x: reportgen: time regression in 1 of 3 variants: naive +50")
    assert main([*args, "--fail-on-regression"]) == 1
    assert main([*args, "--fail-on-regression", "--threshold", "60"]) == 0
    capsys.readouterr()
    assert main(["compare", "latest", "nope", "--store", str(store)]) == 3
    assert "reportgen: error: nope: no such run in" in capsys.readouterr().err


def test_cli_without_history_does_not_gate_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {"naive": 150.0, "fused": 60.0, "compiled": 30.0}, history=0)
    assert main(["compare", "latest~1", "latest", "--store", str(store), "--fail-on-regression"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(MARKER + "\n### :grey_question: reportgen: inconclusive in 1 of 3 variants: naive +50")
    assert captured.err == ("reportgen: note: not interleaved: taken 1 minute apart; drift between runs unknown (fewer "
                            "than 4 earlier runs of this machine, scenario and parameters in the store), so a change "
                            "within the runs is inconclusive, never a regression; measure both sides interleaved "
                            "with `reportgen ab`\n")
    assert main(["compare", "latest~1", "latest", "--store", str(store), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "inconclusive" and doc["regressions"] == [] and doc["pairing"] == "separate"
    assert doc["variants"][0]["outcome"] == "inconclusive" and doc["variants"][0]["drift_pct"] is None


def test_cli_refuses_across_devices_with_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {"naive": 100.0}, device=DeviceKind.NEURON)
    assert main(["compare", "latest~1", "latest", "--store", str(store)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("reportgen: error: cannot compare 20261130T000000Z-cpu-test-abc123 (base) with ")
    assert "field 'device' differs ('cpu' vs 'neuron')" in err and err.count("\n") == 1


def test_cli_writes_output_file_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {"naive": 100.0, "fused": 60.0, "compiled": 30.0})
    out = tmp_path / "out" / "comment.md"
    assert main(["compare", "latest~1", "latest", "--store", str(store), "--output", str(out)]) == 0
    assert out.read_text().startswith(MARKER) and capsys.readouterr().out == ""
    assert [p.name for p in out.parent.iterdir()] == ["comment.md"]
    assert main(["compare", str(store / HEAD_ID), "latest~1", "--store", str(store), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "no significant change"


def test_cli_warns_on_stderr_when_versions_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run())
    h = synthetic_run(run_id=HEAD_ID, created_utc="2026-11-30T00:01:00Z")
    write_synthetic(store, dataclasses.replace(h, environment=dataclasses.replace(h.environment, torch_version="2.14")))
    assert main(["compare", "latest~1", "latest", "--store", str(store)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "reportgen: warning: environment.torch_version differs: '2.13.0' (base) vs '2.14' (head)\n"
    assert "> [!WARNING]" in captured.out


# --- --output: written through a symlink, never over a device, FIFO or folder (issue 12, item 2) ---------------


def _compare_to(store: Path, out: Path) -> int:
    return main(["compare", "latest~1", "latest", "--store", str(store), "--output", str(out)])


def test_output_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    store = _store(tmp_path, {"naive": 100.0})
    target = tmp_path / "real" / "comment.md"
    target.parent.mkdir()
    target.write_text("old comment\n")
    target.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(target)
    assert _compare_to(store, link) == 0
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert target.read_text().startswith(MARKER)
    assert target.stat().st_mode & 0o777 == 0o640  # the target's permissions are kept
    assert sorted(p.name for p in target.parent.iterdir()) == ["comment.md"]  # no temporary file left


@pytest.mark.parametrize("through_link", [False, True])
def test_output_onto_a_fifo_is_refused_and_left_alone(tmp_path: Path, through_link: bool,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {"naive": 100.0})
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    path = fifo
    if through_link:
        path = tmp_path / "link-to-pipe"
        path.symlink_to(fifo)
    capsys.readouterr()
    assert _compare_to(store, path) == 2
    err = capsys.readouterr().err
    assert err == f"reportgen: error: {path}: is a FIFO, not a regular file; give a new path or a regular file\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not replaced by a regular file
    assert path.is_symlink() == through_link
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_output_onto_a_device_node_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {"naive": 100.0})
    link = tmp_path / "null-link"
    link.symlink_to("/dev/null")
    assert _compare_to(store, link) == 2
    assert "is a character device, not a regular file" in capsys.readouterr().err
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_output_onto_a_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path, {"naive": 100.0})
    folder = tmp_path / "folder"
    folder.mkdir()
    assert _compare_to(store, folder) == 2
    assert capsys.readouterr().err == (f"reportgen: error: {folder}: is a folder, not a regular file; "
                                       "give a new path or a regular file\n")
    assert list(folder.iterdir()) == []


# --- Markdown injection through line breaks in data (issue 12, item 6) ------------------------------------------

LINE_BREAKS = ["\r\r", "\n\n", "\r\n\r\n", "\v", "\f", "\x85", "\u2028", "\u2029", "\x1c", "\x1d", "\x1e"]
INJECTED = "![pwned](https://evil.example/x.png) [click](https://evil.example/)"


def _injection_store(tmp_path: Path, brk: str) -> Path:
    """Two runs whose one variant (slower in head, with a changed op table) and op are named with ``brk``."""
    name = f"v{brk}{INJECTED}"
    base_ops = (OpRow(f"aten::a{brk}{INJECTED}", 2, 10.0, 10.0, 0, 0),)
    head_ops = (OpRow(f"aten::a{brk}{INJECTED}", 4, 30.0, 30.0, 0, 0), OpRow(f"new{brk}{INJECTED}", 2, 5.0, 5.0, 0, 0))
    store = tmp_path / "store"
    b, h = runs((v(name, (100.0,) * 5, ops=base_ops),), (v(name, (200.0,) * 5, ops=head_ops),),
                label=f"head{brk}{INJECTED}")
    write_synthetic(store, b)
    write_synthetic(store, h)
    return store


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm (GitHub's renderer) is not installed")
@pytest.mark.parametrize("brk", LINE_BREAKS, ids=[repr(b) for b in LINE_BREAKS])
def test_line_breaks_in_names_cannot_end_the_details_block_or_inject_markdown(
        brk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _injection_store(tmp_path, brk)
    out = tmp_path / "comment.md"
    assert main(["compare", "latest~1", "latest", "--store", str(store), "--output", str(out)]) == 0
    md = out.read_text()
    assert "<details><summary>Op table changes: v" in md  # the section with the name in raw HTML is there
    for ch in "\r\v\f\x85\u2028\u2029\x1c\x1d\x1e":
        assert ch not in md, f"{ch!r} reached the comment"
    rendered = subprocess.run(["cmark-gfm", "--unsafe", "-e", "table", "-e", "autolink", "-e", "tagfilter",
                               "-e", "strikethrough"], input=md, capture_output=True, text=True, check=True).stdout
    assert "<img" not in rendered and "<a " not in rendered, rendered
    assert "evil.example" in html.unescape(rendered)  # shown as text
    assert rendered.count("<details>") == 1 and rendered.index("</details>") > rendered.index("Ops added")
