"""Property-based tests (hypothesis): arbitrary input never crashes with anything but our own error,
and Markdown escaping always round-trips to the same visible characters."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from reportgen.errors import BundleError
from reportgen.model.run import SCHEMA_VERSION
from reportgen.store.runjson import parse_run_json
from reportgen.text.markdown import md_escape

GFM = MarkdownIt("gfm-like", {"linkify": False})
visible_text = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=80)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=30,
)


def _cells(rendered: str) -> list[str]:
    body = rendered.split("<tbody>", 1)[1]
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", body, re.S)]


def _visible(s: str) -> str:
    return s.replace("\u2060", "")


@given(visible_text)
@settings(max_examples=400, deadline=None)
def test_escaped_text_is_one_table_cell_with_the_same_characters(text: str) -> None:
    table = f"| head | tail |\n|---|---|\n| {md_escape(text)} | end |\n"
    cells = _cells(GFM.render(table))
    assert len(cells) == 2 and cells[1] == "end"
    assert _visible(cells[0]) == _visible(text).strip()


@given(visible_text)
@settings(max_examples=400, deadline=None)
def test_escaped_text_renders_as_plain_text_inline(text: str) -> None:
    rendered = GFM.render(md_escape(text))
    inner = re.sub(r"^<p>|</p>\n$", "", rendered)
    assert "<" not in inner.replace("&lt;", "")  # no tag was created: only <p> around escaped text
    assert _visible(html.unescape(inner)) == _visible(text).strip()


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm (GitHub's renderer) not installed")
def test_hostile_corpus_through_githubs_renderer() -> None:
    corpus = ["<script>alert(1)</script>|x", "@octocat please look", "`code` | *em* _u_", "[x](javascript:alert(1))",
              "![img](http://e/x.png)", "{{ 7*7 }} {% raw %}", "a\\|b", "line1\nline2", "<img src=x onerror=alert(1)>"]
    table = "| name |\n|---|\n" + "".join(f"| {md_escape(t)} |\n" for t in corpus)
    out = subprocess.run(["cmark-gfm", "-e", "table"], input=table, capture_output=True, text=True, check=True).stdout
    assert out.count("<td>") == len(corpus)
    assert "<script" not in out and "<img" not in out and "<a " not in out and "<code>" not in out
    cells = _cells(out)
    assert [_visible(c) for c in cells] == [t.replace("\n", " ") for t in corpus]
    assert not re.search(r"(?<![\w\u2060])@octocat", "".join(cells))  # the mention is broken by U+2060


@given(json_values)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_arbitrary_json_is_refused_with_a_bundle_error_only(value: object) -> None:
    try:
        parse_run_json(json.dumps(value), "x/run.json")
    except BundleError as exc:
        assert str(exc).startswith("x/run.json: ") and "\n" not in str(exc)


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_arbitrary_bytes_are_refused_with_a_bundle_error_only(raw: bytes) -> None:
    with pytest.raises(BundleError):
        parse_run_json(raw.decode("utf-8", "replace"), "x/run.json")


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _valid_run_dict() -> dict:
    from factories import synthetic_run

    from reportgen.store.runjson import run_to_json

    return json.loads(run_to_json(synthetic_run(with_traces=True)))


_VALID = _valid_run_dict()
_PATHS = [p for p in _paths(_VALID) if p]


@given(st.sampled_from(_PATHS), json_values)
@settings(max_examples=500, deadline=None)
def test_a_valid_run_with_any_field_replaced_loads_or_is_refused_cleanly(path: tuple, value: object) -> None:
    data = json.loads(json.dumps(_VALID))
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        run = parse_run_json(json.dumps(data), "x/run.json")
    except BundleError as exc:
        assert str(exc).startswith(("x/run.json: field '", "x/run.json: not valid JSON")) and "\n" not in str(exc)
    else:
        assert run.schema_version == SCHEMA_VERSION
