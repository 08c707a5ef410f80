"""The presentation layer and the request layer: one Markdown environment, one set of formatters,
one median, one terminal-escaping function, and library functions that take typed requests and
name fields, not command-line flags, in their errors."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from factories import synthetic_run, variant, write_synthetic

from reportgen.analysis import stats
from reportgen.compare import report as compare
from reportgen.compare.command import run_compare
from reportgen.compare.diff import compare_runs
from reportgen.compare.report import render_markdown
from reportgen.compare.request import CompareRequest, OutputFormat
from reportgen.errors import UsageError
from reportgen.model.run import Run, VariantResult, VariantStatus
from reportgen.render import jinja as render
from reportgen.scenario.loader import Scenario, Variant
from reportgen.text import formatting
from reportgen.text.markdown import flatten, html_inline, md_escape
from reportgen.text.terminal import json_safe_escapes, terminal_safe

REPORTGEN = Path(__file__).resolve().parent.parent / "reportgen"
HEAD_ID = "20261130T000100Z-cpu-head-def456"


# --- one set of formatters, one Markdown environment -----------------------------------------------------------


def _constant(name: str, time_us: float) -> VariantResult:
    return dataclasses.replace(variant(name, time_us), samples_us=(time_us,) * 10)


def test_the_comment_and_the_site_print_a_time_the_same_way() -> None:
    base = synthetic_run(variants=(_constant("naive", 1234.5),))
    head = synthetic_run(run_id=HEAD_ID, created_utc="2026-11-30T00:01:00Z", variants=(_constant("naive", 17.049),))
    md = render_markdown(compare_runs(base, head, 5.0))
    assert formatting.fmt_us(1234.5) == "1,234.5" and formatting.fmt_us(17.049) == "17.05"
    assert "| naive | 1,234.5 | 17.05 |" in md
    site_md = render.render_md("run.md", **_run_page_context(base))
    assert "| naive | ok | 1,234.5 |" in site_md


def _run_page_context(run: Run) -> dict[str, object]:
    from types import SimpleNamespace

    from reportgen.analysis.run_view import run_view

    images = SimpleNamespace(bars=None, timelines={})
    downloads = SimpleNamespace(run_json="run.json", traces={}, artifacts=())
    return {"run": run, "rv": run_view(run), "images": images, "downloads": downloads, "root": "../../"}


def test_both_environments_register_exactly_the_shared_formatters() -> None:
    for env in (render.html_env(), render.md_env()):
        for name, func in formatting.FILTERS.items():
            assert env.filters[name](1234.5 if name not in ("url", "abs_url") else "a b") == func(
                1234.5 if name not in ("url", "abs_url") else "a b")
    assert not hasattr(compare, "markdown_environment") and not hasattr(compare, "format_us")


def test_the_comment_is_rendered_by_the_escaping_markdown_environment() -> None:
    """A value printed without any filter is still escaped: the finalizer of the one environment does it."""
    template = render.md_env().from_string("{{ name }} {{ 5 | number }}")
    assert template.render(name="*b* [x](y)") == "\\*b\\* \\[x\\]\\(y\\) 5"
    assert render.md_env().get_template(compare.TEMPLATE).environment is render.md_env()


@pytest.mark.parametrize(("func", "value", "text"), [
    (formatting.fmt_delta_us, -100.0, "-100.0"), (formatting.fmt_delta_us, 30.0, "+30.00"),
    (formatting.fmt_change_pct, 30.0, "+30.0 %"), (formatting.fmt_change_pct, float("nan"), "—"),
    (formatting.fmt_calls, 3.0, "3"), (formatting.fmt_calls, 1.5, "1.50"), (formatting.fmt_calls, 12345.0, "12,345"),
    (formatting.fmt_number, 2.5, "2.5"), (formatting.fmt_us, float("inf"), "—"),
    (formatting.url_absolute, "https://x.io/a b)(<", "https://x.io/a%20b%29%28%3C"),
])
def test_formatters(func: object, value: object, text: str) -> None:
    assert func(value) == text  # type: ignore[operator]


# --- one median -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("samples", "expected"), [((3.0,), 3.0), ((4.0, 1.0, 3.0), 3.0),
                                                    ((4.0, 1.0, 3.0, 2.0), 2.5), ((-0.0, 0.0), 0.0)])
def test_one_median(samples: tuple[float, ...], expected: float) -> None:
    assert stats.median(samples) == expected == stats.median_or_none(samples)


def test_the_median_of_nothing_is_an_error_or_none() -> None:
    with pytest.raises(ValueError, match="median of no values"):
        stats.median(())
    assert stats.median_or_none(()) is None


def test_the_comment_uses_the_statistics_median() -> None:
    samples = (4.0, 1.0, 3.0, 2.0, 10.0, 7.0)
    base = synthetic_run(variants=(dataclasses.replace(variant("x", 1.0), samples_us=samples),))
    head = synthetic_run(run_id=HEAD_ID, variants=(dataclasses.replace(variant("x", 1.0), samples_us=samples),))
    change = compare_runs(base, head, 5.0).variants[0]
    summary = stats.summarize(samples)
    assert summary is not None and change.base_median_us == stats.median(samples) == summary.median_us == 3.5


# --- the scenario declares its baseline ---------------------------------------------------------------------------


def _scenario(baseline: str | None) -> Scenario:
    variants = tuple(Variant(n, n, lambda x: x) for n in ("eager", "ref", "fast"))
    return Scenario("s", "d", (2,), "float32", lambda *a: (), lambda x: x, variants, lambda s, b: 0, lambda s: 0,
                    baseline=baseline)


def test_a_scenario_declares_its_baseline_defaulting_to_its_first_variant() -> None:
    assert _scenario("ref").baseline_among(("eager", "ref", "fast")) == "ref"
    assert _scenario(None).baseline_among(("eager", "ref", "fast")) == "eager"
    assert _scenario("ref").baseline_among(("fast", "eager")) == "fast"  # not run: the first chosen


# --- escaping: one Markdown flattening, one terminal function ----------------------------------------------------

BREAKS = "\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def test_flatten_leaves_no_line_break_of_any_kind() -> None:
    flat = flatten("a" + "b".join(BREAKS) + "\x1b[31m\x07\x00\t")
    assert flat.splitlines() == [flat] and not re.search("[\x00-\x1f\x7f-\x9f]", flat)
    assert flat.endswith("\\x1b[31m\\x07\\x00 ")
    for text in (md_escape(BREAKS), html_inline(BREAKS + "<b>@x")):
        assert text.splitlines() == [text] and "<b>" not in text and "@x" not in text


def test_terminal_safe_shows_controls_and_bidi_overrides() -> None:
    assert terminal_safe("a\x1b[2J\x07\x9b\u202e\u2066\r\nb") == "a\\x1b[2J\\x07\\x9b\\u202e\\u2066\\x0d\\x0ab"
    assert terminal_safe("line\nnext\x1b", keep_newlines=True) == "line\nnext\\x1b"
    assert terminal_safe("µs → é 🙂 \ttab") == "µs → é 🙂 \\x09tab"
    assert json_safe_escapes('{"a": "\x9b\u202e"}\n') == '{"a": "\\u009b\\u202e"}\n'


# --- typed requests: library errors name fields, never flags ------------------------------------------------------


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run())
    write_synthetic(store, synthetic_run(run_id=HEAD_ID, created_utc="2026-11-30T00:01:00Z"))
    return store


@pytest.mark.parametrize(("change", "message"), [
    ({"threshold_pct": -1.0}, r"^threshold -1\.0: must be a finite number of percent >= 0$"),
    ({"site_url": "ftp://x"}, r"^site_url 'ftp://x': expected an http\(s\) URL"),
])
def test_run_compare_refuses_bad_requests_naming_the_field(tmp_path: Path, change: dict[str, object],
                                                          message: str) -> None:
    request = dataclasses.replace(CompareRequest("latest~1", "latest", _store(tmp_path)), **change)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message):
        run_compare(request)


def test_run_compare_writes_json_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.json"
    request = CompareRequest("latest~1", "latest", _store(tmp_path), output_format=OutputFormat.JSON, output=out,
                             fail_on_regression=True)
    assert run_compare(request) == 0 and capsys.readouterr().out == ""
    assert '"kind": "reportgen-compare"' in out.read_text()


def test_the_cli_still_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reportgen.cli import main

    store = _store(tmp_path)
    assert main(["compare", "latest~1", "latest", "--store", str(store), "--threshold", "-1"]) == 2
    assert capsys.readouterr().err == "reportgen: error: --threshold -1.0: must be a finite number of percent >= 0\n"
    assert main(["compare", "latest~1", "latest", "--store", str(store), "--site-url", "x.io"]) == 2
    assert capsys.readouterr().err.startswith("reportgen: error: --site-url 'x.io': expected an http(s) URL")


LIBRARY_WITH_FLAGS_ELSEWHERE: set[str] = set()
"""Library modules whose flag-naming messages belong to other work in progress (none left)."""


def test_no_library_error_message_names_a_command_line_flag() -> None:
    """A message built in the library says ``threshold``, not ``--threshold``: argparse stops at cli.py and commands.py."""
    flag_in_message = re.compile(r"""(?:Error|raise [A-Za-z]+)\(\s*f?["']--[a-z]""")
    offenders = []
    for path in sorted(REPORTGEN.rglob("*.py")):
        rel = path.relative_to(REPORTGEN).as_posix()
        if rel in ("cli.py", "commands.py") or rel in LIBRARY_WITH_FLAGS_ELSEWHERE:
            continue
        offenders += [f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
                      if flag_in_message.search(line)]
    assert offenders == []


def test_the_flag_pattern_finds_what_it_should() -> None:
    """The scan above can fail: it finds a flag in the shapes of message this code base writes."""
    pattern = re.compile(r"""(?:Error|raise [A-Za-z]+)\(\s*f?["']--[a-z]""")
    assert pattern.search('raise UsageError(f"--threshold {x!r}: bad")')
    assert pattern.search("        raise ScenarioError('--dtype x')")
    assert not pattern.search('raise UsageError(f"threshold {x!r}: bad")')
    assert pattern.search('raise UsageError(f"--variants: x")')


def test_profile_request_is_built_in_the_cli_not_by_the_library() -> None:
    from reportgen import commands
    from reportgen.profile import command as profile

    assert not hasattr(profile.ProfileRequest, "from_cli") and callable(commands.profile_request)
    # that no library module imports argparse: tests/test_layout.py


def test_failed_variant_in_head_regresses_through_run_compare(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run())
    broken = variant("naive", 1.0, status=VariantStatus.FAILED, error="boom")
    write_synthetic(store, synthetic_run(run_id=HEAD_ID, created_utc="2026-11-30T00:01:00Z",
                                         variants=(broken, variant("fused", 60.0), variant("compiled", 30.0))))
    request = CompareRequest("latest~1", "latest", store, fail_on_regression=True, output=tmp_path / "c.md")
    assert run_compare(request) == 1


def test_a_field_becomes_its_flag_only_at_the_start_of_the_message() -> None:
    from reportgen.errors import SiteError

    assert UsageError("base_url 'x': bad", field="base_url").as_flag_message() == "--base-url 'x': bad"
    assert UsageError("label: too long", field="label").as_flag_message() == "--label: too long"
    assert UsageError("labels: other", field="label").as_flag_message() == "labels: other"  # not a prefix match
    assert SiteError("/x/out: is a file", field="out").as_flag_message() == "/x/out: is a file"
    assert UsageError("out x: bad").as_flag_message() == "out x: bad"  # no field: left as the library wrote it
