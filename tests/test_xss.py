"""No script from data runs: injection payloads in every field that comes from a trace or a user.

The built site is opened in headless Chromium: no payload executes (``window.__pwned`` stays unset, and
``alert``/``confirm``/``prompt`` are trapped), no request leaves the test server, no link is a
``javascript:`` URL, and template syntax shows literally. The Markdown report, index and PR comment are
rendered with cmark-gfm (GitHub's renderer, raw HTML allowed) and keep every table whole, with no tag,
image, link or live mention made from data.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import urllib.parse
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import markupsafe
import pytest
from factories import write_synthetic
from hostile import CLI_LABEL, LITERAL_TEMPLATE, PAYLOADS, hostile_run, hostile_trace, write_trace

from reportgen.cli import main
from reportgen.site import build_site
from reportgen.store.loader import load_store

RUN_1 = "20261130T000000Z-cpu-evil-abc123"
RUN_2 = "20261201T000000Z-cpu-evil-def456"
TRAPS = """
window.__pwned = undefined;
for (const name of ['alert', 'confirm', 'prompt']) { window[name] = () => { window.__pwned = name; }; }
"""
CMARK = shutil.which("cmark-gfm")
SAFE_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "img", "ul",
             "ol", "li", "strong", "em", "code", "pre", "sub", "sup", "br", "hr", "blockquote", "del", "details",
             "summary"}


@pytest.fixture(scope="module")
def evil_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(store, site, imported run id): two hostile runs, a hostile trace imported with a hostile label, built."""
    root = tmp_path_factory.mktemp("xss")
    store = root / "store"
    write_synthetic(store, hostile_run(RUN_1, "2026-11-30T00:00:00Z"))
    write_synthetic(store, hostile_run(RUN_2, "2026-12-01T00:00:00Z"))
    trace = write_trace(root / "evil.json", hostile_trace())
    assert main(["import", str(trace), "--store", str(store), "--label", CLI_LABEL]) == 0
    (imported,) = [r.run_id for r in load_store(store) if r.run_id not in (RUN_1, RUN_2)]
    mp = pytest.MonkeyPatch()
    mp.setenv("SOURCE_DATE_EPOCH", "1800000000")
    try:
        build_site(store, root / "site", "/myrepo/")
    finally:
        mp.undo()
    return store, root / "site", imported


def test_payloads_reach_the_pages_as_text(evil_site: tuple[Path, Path, str]) -> None:
    """The corpus really is in the site (else the browser test proves nothing), escaped."""
    _store, site, imported = evil_site
    page = (site / "runs" / RUN_1 / "index.html").read_text()
    for p in PAYLOADS:
        assert str(markupsafe.escape(p)) in page, p
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in (site / "runs" / imported / "index.html").read_text()
    for page_path in site.rglob("*.html"):
        text = page_path.read_text()
        assert "<script>window.__pwned" not in text and "<svg onload" not in text and "<svg/onload" not in text


@pytest.mark.browser
def test_no_payload_executes_in_a_browser(evil_site: tuple[Path, Path, str]) -> None:
    from browser import crawl, serve_site

    _store, site, imported = evil_site
    probes = {"pwned": "typeof window.__pwned === 'undefined' ? 'unset' : String(window.__pwned)",
              "literal": f"document.body.innerText.includes({LITERAL_TEMPLATE!r})",
              "handlers": "Array.from(document.querySelectorAll('*')).flatMap(e => Array.from(e.attributes))"
                          ".filter(a => a.name.startsWith('on')).map(a => a.name + '=' + a.value)",
              "scripts": "document.scripts.length"}
    with serve_site(site, "myrepo") as server:
        reports = crawl(server.base_url + "index.html", server.base_url, evaluate=probes, init_script=TRAPS)
        served = list(server.served)
    run_pages = {f"{server.base_url}runs/{r}/index.html" for r in (RUN_1, RUN_2, imported)}
    assert run_pages <= set(reports), sorted(reports)
    host = urllib.parse.urlsplit(server.base_url).netloc
    for url, report in reports.items():
        assert report.evaluated["pwned"] == "unset", url
        assert report.evaluated["handlers"] == [], url
        assert report.evaluated["scripts"] == 0, url
        assert report.page_errors == (), url
        assert [r.url for r in report.failed_requests] == [], url  # nothing went to 127.0.0.1:1 or elsewhere
        for link in report.links:
            assert not link.url.lower().startswith(("javascript:", "data:", "vbscript:")), (url, link)
            assert urllib.parse.urlsplit(link.url).netloc in (host, ""), (url, link)
    for url in run_pages:
        assert reports[url].evaluated["literal"] is True, url
    assert all(r.path.startswith("/myrepo/") for r in served)


# ---------------------------------------------------------------------------------------------
# Markdown: report.md, index.md and the PR comment through GitHub's renderer


def _cmark(text: str) -> str:
    if CMARK is None:
        pytest.skip("cmark-gfm (GitHub's Markdown renderer) is not installed")
    return subprocess.run([CMARK, "--unsafe", "-e", "table", "-e", "strikethrough", "-e", "autolink"], input=text,
                          capture_output=True, text=True, check=True).stdout


def _unescaped_pipes(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row.replace("\\\\", "")))


def assert_markdown_is_inert(md: str, payloads_shown: bool = True) -> str:
    """Tables keep their column count, and the rendered HTML has no tag, image, link or mention from data."""
    lines = md.splitlines()
    tables = 0
    for i, line in enumerate(lines):
        if re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line.strip()):
            tables += 1
            width = _unescaped_pipes(lines[i - 1])
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert _unescaped_pipes(lines[j]) == width, f"broken table row: {lines[j]!r}"
                j += 1
    rendered = _cmark(md)
    assert_tags_are_ours(rendered)
    text = html.unescape(re.sub(r"<[^>]+>", "", rendered))
    assert "@octocat" not in text
    if payloads_shown:  # the corpus really reached this document
        assert "@\u2060octocat" in text and LITERAL_TEMPLATE in text and "a|b" in text
    assert tables >= 1
    return text


class _Tags(HTMLParser):
    """Collects every start tag with its attributes, as a browser would parse them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def assert_tags_are_ours(rendered: str) -> None:
    """Only Markdown's own tags; no event handler; links and images only to the site's own files or https pages."""
    parser = _Tags()
    parser.feed(rendered)
    assert parser.tags
    for tag, attrs in parser.tags:
        assert tag in SAFE_TAGS, (tag, attrs)
        assert not [a for a, _ in attrs if a.startswith("on")], (tag, attrs)
        for url in [v or "" for a, v in attrs if a in ("href", "src")]:
            assert not re.match(r"(?i)\s*(javascript|data|vbscript):", url) and "127.0.0.1" not in url, url
            if tag == "img":
                assert re.fullmatch(r"[A-Za-z0-9._/-]+\.(png|svg)", url), url


def test_run_report_markdown_is_inert(evil_site: tuple[Path, Path, str]) -> None:
    _store, site, imported = evil_site
    for run_id in (RUN_1, imported):
        assert_markdown_is_inert((site / "runs" / run_id / "report.md").read_text())


def test_index_markdown_is_inert(evil_site: tuple[Path, Path, str]) -> None:
    _store, site, _imported = evil_site
    md = (site / "index.md").read_text()
    lines = md.splitlines()
    assert any(line.startswith("|") for line in lines)
    rendered = _cmark(md)
    assert_tags_are_ours(rendered)
    assert "@octocat" not in html.unescape(re.sub(r"<[^>]+>", "", rendered))


def test_pr_comment_is_inert(evil_site: tuple[Path, Path, str], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    store, _site, _imported = evil_site
    out = tmp_path / "comment.md"
    capsys.readouterr()
    assert main(["compare", RUN_1, RUN_2, "--store", str(store), "--output", str(out),
                 "--site-url", "https://example.github.io/myrepo/"]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "<script>" not in err.replace("'<script>", "")
    assert_markdown_is_inert(out.read_text(), payloads_shown=False)


def test_pr_comment_with_regressions_and_op_diffs_is_inert(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Every variant twice as slow: the comment lists regressions and op tables, all keyed by hostile names."""
    store = tmp_path / "store"
    base = hostile_run(RUN_1, "2026-11-30T00:00:00Z")
    for i in range(4):  # a steady history of the same machine and scenario: the drift between runs is known
        write_synthetic(store, replace(base, run_id=f"2026112{i}T000000Z-cpu-evil-hist{i}",
                                       created_utc=f"2026-11-2{i}T00:00:00Z"))
    write_synthetic(store, base)
    slower = tuple(replace(v, samples_us=tuple(x * 2 for x in v.samples_us),
                           ops=tuple(replace(o, self_cpu_us=o.self_cpu_us * 3, total_cpu_us=o.total_cpu_us * 3)
                                     for o in v.ops)) for v in base.variants)
    write_synthetic(store, replace(base, run_id=RUN_2, created_utc="2026-12-01T00:00:00Z", variants=slower))
    out = tmp_path / "c.md"
    capsys.readouterr()
    assert main(["compare", RUN_1, RUN_2, "--store", str(store), "--output", str(out), "--fail-on-regression"]) == 1
    capsys.readouterr()
    assert_markdown_is_inert(out.read_text())
