"""``reportgen build``: pages, numbers, links, reproducibility, append-only versioning, atomicity, escaping."""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

import pytest
from factories import synthetic_run, variant, write_synthetic

from reportgen import site
from reportgen.cli import main
from reportgen.errors import ConflictError, SiteError, UsageError
from reportgen.model.run import OpRow, RunSource, VariantStatus
from reportgen.render import jinja as render
from reportgen.site import build as site_build
from reportgen.site import pages as site_pages
from reportgen.site import plan as site_plan
from reportgen.store.layout import safe_component
from reportgen.store.loader import load_run, load_store
from reportgen.text import formatting

RUN_A = "20261130T000000Z-cpu-test-abc123"
RUN_B = "20261201T000000Z-cpu-test-def456"
EVIL = "<script>alert(1)</script>|x"


@pytest.fixture(autouse=True)
def _fixed_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764460800")


def _store_with(tmp_path: Path, *runs: object) -> Path:
    store = tmp_path / "results"
    for run in runs:
        write_synthetic(store, run)  # type: ignore[arg-type]
    return store


def _run_b() -> object:
    return synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z",
                         times_us={"naive": 90.0, "fused": 45.0, "compiled": 30.0}, with_traces=True)


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


class _Links(HTMLParser):
    """Collect every href/src and the meta-refresh target of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        for key in ("href", "src"):
            if a.get(key):
                self.urls.append(a[key] or "")
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "refresh":
            self.urls.append((a.get("content") or "").split("url=", 1)[1])


_MD_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")


def _assert_links_resolve(root: Path) -> int:
    """Every href/src in every HTML page and every link/image in every Markdown page is a file in the site."""
    checked = 0
    for page in sorted(root.rglob("*.html")) + sorted(root.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        if page.suffix == ".html":
            parser = _Links()
            parser.feed(text)
            assert parser.scripts == 0, page
            urls = parser.urls
        else:
            urls = _MD_LINK.findall(text)
        for url in urls:
            parts = urlsplit(url)
            assert not parts.scheme and not parts.netloc and not url.startswith("/"), f"{page}: non-relative {url}"
            if not parts.path:
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_relative_to(root.resolve()), f"{page}: {url} leaves the site"
            assert target.is_file(), f"{page}: {url} does not resolve"
            checked += 1
    return checked


def test_site_layout_and_every_link_resolves(tmp_path: Path) -> None:
    store = _store_with(tmp_path, synthetic_run(with_traces=True), _run_b())
    out = tmp_path / "myrepo" / "site"
    result = site.build_site(store, out, "/myrepo/")
    assert result.summary() == (f"built {out}: 9 page(s) written, 2 run(s) (2 rendered, 0 unchanged, "
                                "0 kept from earlier builds)")
    for rel in ("index.html", "index.md", "archive/1.html", ".nojekyll", "assets/style.css", "latest/index.html",
                "help/index.html",
                f"runs/{RUN_A}/index.html", f"runs/{RUN_A}/report.md", f"runs/{RUN_A}/data/run.json",
                f"runs/{RUN_A}/data/traces/naive.pt.trace.json.gz", f"runs/{RUN_A}/time-per-variant.svg",
                f"runs/{RUN_A}/timeline-compiled.svg"):
        assert (out / rel).is_file(), rel
    assert _assert_links_resolve(out) > 40
    assert (out / f"runs/{RUN_A}/data/run.json").read_bytes() == (store / RUN_A / "run.json").read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema_version"] == 3 and manifest["base_url"] == "/myrepo/"
    assert manifest["runs"]["run_id"] == [RUN_A, RUN_B]
    expected = hashlib.sha256((store / RUN_A / "run.json").read_bytes()).hexdigest()
    assert manifest["runs"]["run_json_sha256"][0] == expected
    assert not [p for p in out.parent.iterdir() if p.name.startswith((".site-tmp-", ".site-old-"))]


def test_latest_redirects_to_newest_run_with_a_relative_link(tmp_path: Path) -> None:
    out = tmp_path / "site"
    site.build_site(_store_with(tmp_path, synthetic_run(), _run_b()), out, "/")
    page = (out / "latest" / "index.html").read_text()
    assert f'<meta http-equiv="refresh" content="0; url=../runs/{RUN_B}/index.html">' in page
    assert f'<a href="../runs/{RUN_B}/index.html">{RUN_B}</a>' in page


def test_run_page_tables_carry_the_numbers(tmp_path: Path) -> None:
    out = tmp_path / "site"
    site.build_site(_store_with(tmp_path, synthetic_run()), out, "/")
    html = (out / "runs" / RUN_A / "index.html").read_text()
    md = (out / "runs" / RUN_A / "report.md").read_text()
    # the naive op table: aten::mul is the hotspot, 300 of 500 µs self CPU, 3 calls, 100 µs per call
    row = re.search(r'<tr class="hotspot".*?</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    assert "<code>aten::mul</code>" in cells[0]
    assert cells[1:6] == ["300.0", "300.0", "60.0 %", "3", "100.0"]
    assert "| **hotspot:** aten\\:\\:mul | 300.0 | 300.0 | 60.0 % | 3 | 100.0 |" in md
    assert "Self CPU (device) (µs)" in html and "Self CPU (device) (µs)" in md
    # speedups of the synthetic medians 100 / 60 / 30: exact ratios
    assert "<td><strong>1.67×</strong></td>" in html and "<td><strong>3.33×</strong></td>" in html
    assert "<td><strong>2.00×</strong></td>" in html
    assert "| compiled | fused | **2.00×** |" in md
    # roofline: 2 KiB per call at 10 GB/s peak
    assert "10 GB/s (test figure)" in html and "| naive | 2.0 KiB |" in md
    assert "30 timing samples per variant, each 1 call(s);" in html and "30 timing samples per variant, each 1 call(s);" in md
    assert "median of samples; 95 % percentile-bootstrap interval" in html


def test_two_builds_are_byte_identical(tmp_path: Path) -> None:
    store = _store_with(tmp_path, synthetic_run(with_traces=True), _run_b())
    site.build_site(store, tmp_path / "one", "/r/")
    site.build_site(store, tmp_path / "two", "/r/")
    one, two = _hashes(tmp_path / "one"), _hashes(tmp_path / "two")
    assert len(one) == 31  # with the archive page and the history window
    assert one == two


def test_adding_a_run_keeps_older_pages_and_reuses_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store_with(tmp_path, synthetic_run(with_traces=True))
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    before = _hashes(out / "runs" / RUN_A)
    inode = (out / "runs" / RUN_A / "index.html").stat().st_ino
    write_synthetic(store, _run_b())  # type: ignore[arg-type]
    loaded: list[str] = []
    real_load = site_pages.load_run
    for module in (site_pages, site_plan):  # every place a build loads a bundle
        monkeypatch.setattr(module, "load_run", lambda folder: loaded.append(folder.name) or real_load(folder))
    result = site.build_site(store, out, "/")
    assert loaded == [RUN_B]  # the unchanged run is not even parsed: its digest comes from the manifest
    assert (result.rendered, result.reused, result.carried) == (1, 1, 0)
    assert _hashes(out / "runs" / RUN_A) == before
    assert (out / "runs" / RUN_A / "index.html").stat().st_ino == inode  # reused, not re-rendered
    fresh = tmp_path / "fresh"
    site.build_site(store, fresh, "/")
    assert _hashes(fresh) == _hashes(out)  # an incremental build equals a cold one


def test_run_gone_from_store_keeps_its_page(tmp_path: Path) -> None:
    store = _store_with(tmp_path, synthetic_run(with_traces=True), _run_b())
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    before = _hashes(out / "runs" / RUN_A)
    shutil.rmtree(store / RUN_A)
    result = site.build_site(store, out, "/")
    assert (result.rendered, result.reused, result.carried) == (0, 1, 1)
    assert _hashes(out / "runs" / RUN_A) == before
    assert f'href="runs/{RUN_A}/index.html"' in (out / "index.html").read_text()
    _assert_links_resolve(out)


def test_failing_build_leaves_the_old_site_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure that is not one bad bundle (here the disk filling while the index is written) fails the build
    and leaves the old site byte for byte, with no temporary folder left."""
    store = _store_with(tmp_path, synthetic_run(with_traces=True))
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    before = _hashes(out)
    write_synthetic(store, _run_b())  # type: ignore[arg-type]

    def disk_full(*args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device", "index.html")

    monkeypatch.setattr(site_build, "write_index", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        site.build_site(store, out, "/", jobs=1)
    assert _hashes(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".site-tmp-", ".site-old-"))]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_bad_bundle_is_named_and_left_out_while_the_others_build(tmp_path: Path, jobs: int) -> None:
    """One unreadable run.json and one truncated trace: both named on stderr and on the index, the good run built."""
    store = _store_with(tmp_path, synthetic_run(with_traces=True))
    bad_json = store / "20261202T000000Z-cpu-test-bad111"
    bad_json.mkdir()
    (bad_json / "run.json").write_text("{not json")
    folder = write_synthetic(store, _run_b())  # type: ignore[arg-type]
    (folder / "traces" / "fused.pt.trace.json.gz").write_bytes(b"\x1f\x8b truncated")
    warnings: list[str] = []
    out = tmp_path / "site"
    result = site.build_site(store, out, "/", jobs=jobs, warn=warnings.append)
    assert json.loads((out / "manifest.json").read_text())["runs"]["run_id"] == [RUN_A]
    assert sorted(p.name for p in (out / "runs").iterdir()) == [RUN_A]
    assert [f.run_id for f in result.skipped] == [RUN_B, bad_json.name]  # by run id
    assert len(warnings) == 2
    assert "fused.pt.trace.json.gz" in warnings[0] and f"run {RUN_B} left out" in warnings[0]
    assert "run.json: not valid JSON" in warnings[1] and bad_json.name in warnings[1]
    index = (out / "index.html").read_text()
    assert 'id="skipped"' in index and bad_json.name in index and RUN_B in index
    assert "2 unreadable run(s) left out" in result.summary()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".site-tmp-", ".site-old-"))]


def test_a_bundle_that_breaks_later_keeps_its_published_page(tmp_path: Path) -> None:
    """Append-only: a run whose bundle became unreadable keeps the page an earlier build published. A build trusts
    a bundle it has drawn (bundles are written once); ``verify`` reads it again, warns, and keeps the page."""
    store = _store_with(tmp_path, synthetic_run(with_traces=True), _run_b())
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    page = _hashes(out / "runs" / RUN_B)
    (store / RUN_B / "run.json").write_text("{not json")
    warnings: list[str] = []
    result = site.build_site(store, out, "/", warn=warnings.append)
    assert (result.reused, result.carried, warnings) == (2, 0, [])
    assert _hashes(out / "runs" / RUN_B) == page and RUN_B in (out / "index.html").read_text()
    result = site.build_site(store, out, "/", warn=warnings.append, verify=True)
    assert _hashes(out / "runs" / RUN_B) == page
    assert json.loads((out / "manifest.json").read_text())["runs"]["run_id"] == [RUN_A, RUN_B]
    assert (result.reused, result.carried, len(warnings)) == (1, 1, 1) and RUN_B in warnings[0]


def test_the_cli_warns_on_stderr_and_exits_zero_with_a_bad_bundle(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store = _store_with(tmp_path, synthetic_run())
    (store / "20261202T000000Z-cpu-test-bad111").mkdir()
    (store / "20261202T000000Z-cpu-test-bad111" / "run.json").write_text("[]")
    assert main(["build", "--runs", str(store), "--out", str(tmp_path / "site")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("reportgen: warning: ") and "bad111" in err[0]


def test_refuses_to_build_over_a_folder_that_is_not_a_site(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    with pytest.raises(SiteError) as err:
        site.build_site(_store_with(tmp_path, synthetic_run()), out, "/")
    assert str(err.value) == (f"{out}: not empty and has no manifest.json, so it is not a reportgen site; "
                              "pass --out an empty or new folder (nothing was changed)")
    assert (out / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in out.iterdir()) == ["precious.txt"]


def test_refuses_a_newer_manifest(tmp_path: Path) -> None:
    out = tmp_path / "site"
    out.mkdir()
    (out / "manifest.json").write_text('{"schema_version": 99, "runs": []}')
    with pytest.raises(SiteError) as err:
        site.build_site(_store_with(tmp_path, synthetic_run()), out, "/")
    assert str(err.value) == (f"{out / 'manifest.json'}: field 'schema_version' is 99, newer than this reportgen "
                              "writes (3); upgrade reportgen")


def digest_json(store: Path) -> dict[str, object]:
    """The digest of the store's one run, as the manifest keeps a carried page's."""
    from reportgen.analysis.history import digest
    from reportgen.model.codec import to_jsonable

    (run,) = load_store(store)
    return to_jsonable(digest(run))  # type: ignore[no-any-return]


def test_a_corrupt_manifest_digest_is_refused_with_its_field(tmp_path: Path) -> None:
    store = _store_with(tmp_path, synthetic_run())
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    manifest = json.loads((out / "manifest.json").read_text())
    (run_id,) = manifest["runs"]["run_id"]
    manifest["runs"]["digests"] = {run_id: digest_json(store)}  # as a carried page's is kept
    manifest["runs"]["digests"][run_id]["variants"][0]["median_us"] = -1.0
    (out / "manifest.json").write_text(json.dumps(manifest))
    before = _hashes(out)
    with pytest.raises(SiteError) as err:
        site.build_site(store, out, "/")
    assert str(err.value) == (f"{out / 'manifest.json'}: field 'runs.digests[{run_id!r}].variants[0].median_us': must "
                              "not be negative, got -1.0; restore the manifest or build into a new folder")
    assert _hashes(out) == before


def test_concurrent_build_is_refused(tmp_path: Path) -> None:
    store = _store_with(tmp_path, synthetic_run())
    out = tmp_path / "site"
    with open(tmp_path / ".site.lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConflictError) as err:
            site.build_site(store, out, "/")
    assert str(err.value) == f"another reportgen build or publish is using {out}; wait for it to finish"
    assert not out.exists()


def test_missing_store_and_bad_base_url_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(SiteError) as err:
        site.build_site(tmp_path / "nope", tmp_path / "site", "/")
    assert str(err.value) == (f"{tmp_path / 'nope'}: no such results folder; run 'reportgen profile' first "
                              "or pass --runs FOLDER")
    with pytest.raises(UsageError) as uerr:
        site.build_site(tmp_path, tmp_path / "site", "myrepo")
    assert str(uerr.value) == "base_url 'myrepo': expected a path like /myrepo/ or an http(s) URL"
    assert uerr.value.as_flag_message() == "--base-url 'myrepo': expected a path like /myrepo/ or an http(s) URL"
    assert site.normalise_base_url("/myrepo") == "/myrepo/"


def test_hostile_strings_are_inert_in_html_and_keep_markdown_tables_whole(tmp_path: Path) -> None:
    ops = (OpRow(EVIL, 2, 30.0, 40.0, 0.0, 0.0, EVIL), OpRow("aten::add", 1, 10.0, 10.0, 0.0, 0.0))
    evil_variant = replace(variant("naive", 100.0, trace_path="traces/naive.pt.trace.json.gz"), ops=ops,
                           description=EVIL)
    failing = variant("broken", 1.0, status=VariantStatus.FAILED, error=f"RuntimeError: {EVIL}\nsecond line")
    evil_named = variant(EVIL, 50.0, trace_path="traces/evil.pt.trace.json.gz")
    run = synthetic_run(label=EVIL, variants=(evil_variant, evil_named, failing))
    run = replace(run, notes=(EVIL,))
    out = tmp_path / "site"
    site.build_site(_store_with(tmp_path, run), out, "/")
    for page in (out / "index.html", out / "runs" / RUN_A / "index.html", out / "latest" / "index.html"):
        text = page.read_text()
        assert "<script>" not in text and "alert(1)</script>" not in text
    html = (out / "runs" / RUN_A / "index.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|x" in html
    assert "RuntimeError: &lt;script&gt;alert(1)&lt;/script&gt;|x\nsecond line</pre>" in html
    images = sorted(p.name for p in (out / "runs" / RUN_A).glob("timeline-*.svg"))
    assert images == ["timeline-naive.svg", f"timeline-{safe_component(EVIL, 60)}.svg"]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", name) for name in images)
    for md_page in (out / "index.md", out / "runs" / RUN_A / "report.md"):
        text = md_page.read_text()
        assert "<script>" not in text
        _assert_tables_whole(text)
    _assert_links_resolve(out)


def _assert_tables_whole(md: str) -> None:
    """Every GFM table row has as many unescaped pipes as its header."""
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            assert i > 0 and lines[i - 1] == "", f"table must follow a blank line: {lines[i - 1]!r}"
            width = _pipes(lines[i])
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert _pipes(lines[j]) == width, lines[j]
                j += 1
            i = j
        else:
            i += 1


def _pipes(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


def test_markdown_tables_of_a_normal_run_start_their_own_block(tmp_path: Path) -> None:
    out = tmp_path / "site"
    site.build_site(_store_with(tmp_path, synthetic_run(), _run_b()), out, "/")
    for md_page in (out / "index.md", out / "runs" / RUN_A / "report.md", out / "runs" / RUN_B / "report.md"):
        text = md_page.read_text()
        assert text.count("|---") >= (2 if md_page.name == "index.md" else 9)
        _assert_tables_whole(text)


@pytest.mark.parametrize(("func", "value", "text"), [
    (formatting.fmt_us, 2355.0, "2,355.0"), (formatting.fmt_us, 17.049, "17.05"), (formatting.fmt_us, 0.8012, "0.801"),
    (formatting.fmt_us, None, "—"), (formatting.fmt_pct, 0.495, "49.5 %"), (formatting.fmt_ratio, 2355 / 403.3, "5.84×"),
    (formatting.fmt_ratio, 0.000899, "0.0009×"), (formatting.fmt_rate, 2.9e12, "2.9 TB/s"),
    (formatting.fmt_rate, 13_427_473_098.0, "13.4 GB/s"), (formatting.fmt_bytes, 34816, "34.0 KiB"),
    (formatting.fmt_bytes, 512, "512 B"), (formatting.fmt_int, 12345, "12,345"),
])
def test_number_formats(func: object, value: object, text: str) -> None:
    assert func(value) == text  # type: ignore[operator]


def test_markdown_environment_escapes_every_value_but_not_formatted_numbers() -> None:
    env = render.md_env()
    got = env.from_string("| {{ name }} | {{ x|us }} | [{{ name }}]({{ path|url }}) |").render(
        name=EVIL, x=1234.5, path="runs/a b/report.md")
    escaped = r"\<script\>alert\(1\)\<\/script\>\|x"
    assert got == f"| {escaped} | 1,234.5 | [{escaped}](runs/a%20b/report.md) |"


def test_failed_and_imported_variants_are_shown_as_such(tmp_path: Path) -> None:
    failing = variant("compiled", 1.0, status=VariantStatus.FAILED, error="BackendCompilerFailed: no neuronx-cc")
    imported = replace(variant("trace", 10.0), samples_us=(), correctness=None)
    store = _store_with(tmp_path, synthetic_run(variants=(variant("naive", 100.0), failing)))
    run_b = replace(synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z", variants=(imported,)),
                    source=RunSource.IMPORT, settings=None)
    write_synthetic(store, run_b)
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    html = (out / "runs" / RUN_A / "index.html").read_text()
    assert '<pre class="error">BackendCompilerFailed: no neuronx-cc</pre>' in html
    assert '<span class="badge badge-failed">failed</span>' in html
    assert "compiled: failed" in html
    assert "Each sample is the mean of back-to-back calls" in html  # a profiled run keeps its own description
    imp = (out / "runs" / RUN_B / "index.html").read_text()
    assert "no timing samples (imported trace)" in imp
    assert "imported, nothing re-run: trace: 2 ProfilerStep# spans; times come from the trace's own events" in imp
    imp_md = (out / "runs" / RUN_B / "report.md").read_text()
    assert "| trace | ok | no timing samples (imported trace) | | |  | — |" in imp_md
    assert not (out / "runs" / RUN_B / "time-per-variant.svg").exists()
    _assert_links_resolve(out)


def test_cli_build_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store_with(tmp_path, synthetic_run())
    code = main(["build", "--runs", str(store), "--out", str(tmp_path / "site"), "--base-url", "/x/"])
    assert code == 0
    assert capsys.readouterr().out == (f"built {tmp_path / 'site'}: 7 page(s) written, 1 run(s) "
                                       "(1 rendered, 0 unchanged, 0 kept from earlier builds)\n")
    assert main(["build", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "s2")]) == 3


def test_build_over_real_cpu_profile(real_cpu_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    site.build_site(real_cpu_store, out, "/")
    _assert_links_resolve(out)
    runs = [load_run(p) for p in sorted(real_cpu_store.iterdir()) if (p / "run.json").is_file()]
    assert len(runs) >= 1
    from reportgen.analysis.variant_view import op_breakdown, variant_view
    from reportgen.text.formatting import fmt_us

    for run in runs:
        html = (out / "runs" / run.run_id / "index.html").read_text()
        md = (out / "runs" / run.run_id / "report.md").read_text()
        assert "Self CPU (device)" in html
        for v in run.variants:
            b = op_breakdown(v)
            assert b.hotspot is not None
            assert f"<code>{b.hotspot.name}</code>" in html.replace("&#39;", "'")
            assert f"| {fmt_us(b.hotspot.self_device_us)} |" in md
            summary = variant_view(v, run.peak.bandwidth_bytes_per_s).timing
            assert summary is not None and f"<td>{fmt_us(summary.median_us)}</td>" in html
            timeline = ElementTree.parse(out / "runs" / run.run_id / f"timeline-{v.name}.svg").getroot()
            tips = [t.text or "" for t in timeline.iter("{http://www.w3.org/2000/svg}title")]
            assert len([t for t in tips if " µs, from " in t]) >= 3, tips  # a tooltip per named bar


def test_fusion_evidence_shows_top_level_calls_and_nested_ops(real_cpu_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    site.build_site(real_cpu_store, out, "/")
    run = load_run(sorted(p for p in real_cpu_store.iterdir() if (p / "run.json").is_file())[0])
    md = (out / "runs" / run.run_id / "report.md").read_text()
    section = md.split("## Evidence of fusion", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
            for line in section.splitlines() if line.startswith("| ") and not line.startswith("| variant")}
    for v in run.variants:
        assert rows[v.name] == [str(v.op_dispatch_count), str(v.aten_op_count), "no device lane in trace"]
    assert [rows[n][0] for n in ("naive", "fused", "compiled")] == ["6", "1", "0"]


def test_a_link_inside_a_bundle_is_refused_and_nothing_outside_is_published(tmp_path: Path) -> None:
    store = tmp_path / "store"
    folder = write_synthetic(store, synthetic_run(with_traces=True))
    secret = tmp_path / "outside.json.gz"
    secret.write_bytes((folder / "traces" / "naive.pt.trace.json.gz").read_bytes())
    (folder / "traces" / "naive.pt.trace.json.gz").unlink()
    (folder / "traces" / "naive.pt.trace.json.gz").symlink_to(secret)
    warnings: list[str] = []
    site.build_site(store, tmp_path / "site", "/", warn=warnings.append)
    assert len(warnings) == 1
    assert re.search(r"naive.pt.trace.json.gz: is a symbolic link; files of a run bundle must be", warnings[0])
    assert not (tmp_path / "site" / "runs" / folder.name).exists()
    assert not [p for p in (tmp_path / "site").rglob("*") if p.is_file() and p.read_bytes() == secret.read_bytes()]


def test_device_artifacts_are_downloadable_from_the_run_page(tmp_path: Path) -> None:
    import dataclasses
    import gzip
    import json

    from factories import chrome_trace

    from reportgen.model.run import Artifact
    from reportgen.store.writer import write_bundle

    run = synthetic_run(with_traces=True)
    neff = Artifact("artifacts/naive/neff_0123_vnc_0.neff", "neff", 5)
    variants = (dataclasses.replace(run.variants[0], artifacts=(neff,)), *run.variants[1:])
    run = dataclasses.replace(run, variants=variants)
    files: dict[str, Path | bytes] = {v.trace_path: gzip.compress(json.dumps(chrome_trace()).encode(), mtime=0)
                                      for v in run.variants if v.trace_path}
    files[neff.path] = b"NEFF!"
    write_bundle(tmp_path / "store", run, files)
    site.build_site(tmp_path / "store", tmp_path / "site", "/")
    page = tmp_path / "site" / "runs" / run.run_id
    assert (page / "data" / neff.path).read_bytes() == b"NEFF!"
    assert f'<a href="data/{neff.path}">neff_0123_vnc_0.neff</a> — naive device artifact (neff, 5 bytes)' in \
        (page / "index.html").read_text()
    assert f"- [neff\\_0123\\_vnc\\_0\\.neff](data/{neff.path}) (naive device artifact, neff, 5 bytes)" in \
        (page / "report.md").read_text()


def test_each_variant_states_its_own_calls_per_sample(tmp_path: Path) -> None:
    run = synthetic_run()
    run = replace(run, settings=replace(run.settings, calls_per_sample=0),
                  variants=(replace(run.variants[0], calls_per_sample=62), *run.variants[1:]))
    write_synthetic(tmp_path / "store", run)
    site.build_site(tmp_path / "store", tmp_path / "site", "/")
    page = tmp_path / "site" / "runs" / run.run_id
    html, md = (page / "index.html").read_text(), (page / "report.md").read_text()
    assert "(n = 30 samples × 62 call(s)," in html and "(n = 30 samples × 1 call(s)," in html
    assert "(n = 30 samples × 62 call(s)," in md
    assert "each of N calls, N calibrated per variant so a sample lasts ≥ 2 ms" in html


def test_a_flushed_run_says_its_profiled_steps_ran_with_a_warm_cache(tmp_path: Path) -> None:
    run = synthetic_run()
    run = replace(run, settings=replace(run.settings, cache_flush_bytes=256 * 1024 * 1024))
    write_synthetic(tmp_path / "store", run)
    site.build_site(tmp_path / "store", tmp_path / "site", "/")
    page = tmp_path / "site" / "runs" / run.run_id
    for text in ((page / "index.html").read_text(), (page / "report.md").read_text()):
        assert "the device cache flushed before every timed call (256.0 MiB written, outside the timing)" in text
        assert "the profiled steps (op table, timeline) are not flushed: they run with a warm cache" in text
