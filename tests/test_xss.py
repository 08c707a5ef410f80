"""No script from data runs: injection payloads in every field that comes from a trace or a user.

The built site is opened in headless Chromium: no payload executes (``window.__pwned`` stays unset, and
``alert``/``confirm``/``prompt``/``eval`` are trapped), no request leaves the test server, no link is a
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
from pathlib import Path

import markupsafe
import pytest
from factories import synthetic_run, write_synthetic
from hostile import ALL_PAYLOADS, LITERAL_TEMPLATE, PAYLOADS, hostile_run, hostile_trace, write_trace

from reportgen.bundle import load_store
from reportgen.cli import main
from reportgen.site import build_site

RUN_1 = "20261130T000000Z-cpu-evil-abc123"
RUN_2 = "20261201T000000Z-cpu-evil-def456"
TRAPS = """
window.__pwned = undefined;
for (const name of ['alert', 'confirm', 'prompt']) { window[name] = () => { window.__pwned = name; }; }
const realEval = window.eval; window.eval = (s) => { window.__pwned = 'eval'; return realEval(s); };
"""
CMARK = shutil.which("cmark-gfm")
FORBIDDEN_HTML = ("<script", "<img", "<svg", "<iframe", "<style", "onerror=", "onload=", 'href="javascript')


@pytest.fixture(scope="module")
def evil_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(store, site, imported run id): two hostile runs, a hostile trace imported with a hostile label, built."""
    root = tmp_path_factory.mktemp("xss")
    store = root / "store"
    write_synthetic(store, hostile_run(RUN_1, "2026-11-30T00:00:00Z"))
    write_synthetic(store, hostile_run(RUN_2, "2026-12-01T00:00:00Z"))
    trace = write_trace(root / "evil.json", hostile_trace())
    assert main(["import", str(trace), "--store", str(store), "--label", ALL_PAYLOADS]) == 0
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
    run_pages = {f"{server.base_url}runs/{r}/" for r in (RUN_1, RUN_2, imported)}
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


def assert_markdown_is_inert(md: str) -> str:
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
    lower = rendered.lower()
    for bad in FORBIDDEN_HTML:
        assert bad not in lower, bad
    hrefs = re.findall(r'<a href="([^"]*)"', rendered)
    assert not [h for h in hrefs if "127.0.0.1:1" in h or h.lower().startswith("javascript")], hrefs
    text = html.unescape(re.sub(r"<[^>]+>", "", rendered))
    assert "@octocat" not in text and "@\u2060octocat" in text
    assert LITERAL_TEMPLATE in text
    assert tables >= 1
    return text


def test_run_report_markdown_is_inert(evil_site: tuple[Path, Path, str]) -> None:
    _store, site, imported = evil_site
    for run_id in (RUN_1, imported):
        text = assert_markdown_is_inert((site / "runs" / run_id / "report.md").read_text())
        assert "a|b" in text


def test_index_markdown_is_inert(evil_site: tuple[Path, Path, str]) -> None:
    _store, site, _imported = evil_site
    md = (site / "index.md").read_text()
    lines = md.splitlines()
    assert any(line.startswith("|") for line in lines)
    rendered = _cmark(md)
    for bad in FORBIDDEN_HTML:
        assert bad not in rendered.lower(), bad
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
    assert_markdown_is_inert(out.read_text())


def test_pr_comment_of_runs_with_hostile_variant_names_only(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Variant names are table keys in the comment: a payload there must not split or merge rows."""
    store = tmp_path / "store"
    base = hostile_run(RUN_1, "2026-11-30T00:00:00Z")
    write_synthetic(store, base)
    write_synthetic(store, synthetic_run(run_id=RUN_2, created_utc="2026-12-01T00:00:00Z", variants=base.variants,
                                         label=ALL_PAYLOADS, hostname=base.environment.hostname))
    out = tmp_path / "c.md"
    capsys.readouterr()
    assert main(["compare", RUN_1, RUN_2, "--store", str(store), "--output", str(out)]) == 0
    capsys.readouterr()
    assert_markdown_is_inert(out.read_text())
