"""The built site in headless Chromium, served under a sub-path as GitHub Pages serves ``/<repo>/``.

The site is built from two real CPU profiles plus every trace in tests/data/traces/ imported, served on
loopback at ``/myrepo/`` and crawled from its front page: every page loads without console errors or
failed requests, every image decodes with a non-zero size, every internal reference answers 200, every
HTML page of the site is reached, and no script runs. Screenshots of the index and of one run page are
kept under test-artifacts/screenshots/.
"""

from __future__ import annotations

import gzip
import html
import json
import shutil
import urllib.parse
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from browser import (
    PageReport,
    ServedRequest,
    broken_fragments,
    chromium_or_skip,
    crawl,
    http_status,
    is_internal,
    open_pages,
    serve,
    serve_site,
)
from conftest import REAL_TRACES_DIR, ROOT, run_cli
from factories import chrome_trace, synthetic_run, write_synthetic

from reportgen.model.run import RunSource
from reportgen.site import build_site
from reportgen.store.loader import list_run_dirs, load_run

pytestmark = pytest.mark.browser

SUBPATH = "myrepo"
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
PWNED = {"pwned": "typeof window.__pwned", "scripts": "document.scripts.length"}
WIDTH = {"page": "document.documentElement.scrollWidth", "window": "window.innerWidth"}
PAYLOAD = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
# Strings a reader's browser must show as text: markup, an event handler, a javascript: URL.
PAYLOAD_OP = "aten::<svg/onload=window.__pwned=1>|javascript:window.__pwned=1"


@dataclass(frozen=True)
class Crawled:
    """One crawl of the real site: its folder, its URL, what each page did and what each link answered."""

    site: Path
    base_url: str
    pages: dict[str, PageReport]
    link_status: dict[str, int]
    served: tuple[ServedRequest, ...]
    newest_run_id: str


def _build_real_site(store: Path, work: Path) -> Path:
    """Copy the real store, import every real trace into it, build with --base-url /myrepo/."""
    mine = work / "store"
    shutil.copytree(store, mine)
    traces = sorted(REAL_TRACES_DIR.glob("*.json.gz"))
    assert traces, f"no traces in {REAL_TRACES_DIR}"
    for trace in traces:
        proc = run_cli("import", str(trace), "--store", str(mine), "--label", f"imported {trace.name}")
        assert proc.returncode == 0, proc.stderr
    site = work / "site"
    proc = run_cli("build", "--runs", str(mine), "--out", str(site), "--base-url", f"/{SUBPATH}/")
    assert proc.returncode == 0, proc.stderr
    return site


def _runs_oldest_first(store: Path) -> list[tuple[str, str]]:
    """(run id, label) of every run in the store, in the site's page order."""
    runs = sorted((load_run(d) for d in list_run_dirs(store)), key=lambda r: (r.created_utc, r.run_id))
    return [(r.run_id, r.label) for r in runs]


@pytest.fixture(scope="module")
def crawled(real_cpu_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    """Build, serve and crawl the real site once for every test in this module."""
    chromium_or_skip()
    work = tmp_path_factory.mktemp("browser")
    site = _build_real_site(real_cpu_store, work)
    runs = _runs_oldest_first(work / "store")
    head_id = next(run_id for run_id, label in runs if label == "head")
    with serve_site(site, SUBPATH) as server:
        base = server.base_url
        shots = {base: SCREENSHOTS / "index.png", f"{base}runs/{head_id}/index.html": SCREENSHOTS / "run.png"}
        pages = crawl(base, base, evaluate={**PWNED, **WIDTH}, screenshots=shots)
        internal = sorted({urllib.parse.urldefrag(link.url).url for page in pages.values()
                           for link in page.links if is_internal(link.url, base)})
        status = {url: http_status(url) for url in internal}
        served = tuple(server.served)
    _write_crawl_summary(pages, status, base)
    return Crawled(site, base, pages, status, served, runs[-1][0])


def _write_crawl_summary(pages: dict[str, PageReport], status: dict[str, int], base: str) -> None:
    """test-artifacts/crawl.json: what the crawl covered, for the record (the tests below do the asserting)."""
    summary = {
        "pages": sorted(url[len(base):] or "/" for url in pages),
        "page_count": len(pages),
        "images": sum(len(p.images) for p in pages.values()),
        "images_svg": sum(1 for p in pages.values() for i in p.images if i.src.endswith(".svg")),
        "internal_links_checked": len(status),
        "problems": [problem for p in pages.values() for problem in p.problems()],
    }
    SCREENSHOTS.parent.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS.parent / "crawl.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def _page_file(url: str, base_url: str) -> str:
    """The site-relative file a page URL serves: a folder URL is its index.html."""
    rel = url[len(base_url):]
    return rel + "index.html" if rel == "" or rel.endswith("/") else rel


# ---------------------------------------------------------------------------------------------
# The real site


def test_every_page_loads_without_console_errors_or_failed_requests(crawled: Crawled) -> None:
    problems = [p for page in crawled.pages.values() for p in page.problems() if "image not shown" not in p]
    assert problems == []
    assert [r for r in crawled.served if r.status >= 400] == []


def test_every_image_is_decoded_with_a_nonzero_size(crawled: Crawled) -> None:
    images = [(url, img) for url, page in crawled.pages.items() for img in page.images]
    assert [f"{url}: {img}" for url, img in images if not img.ok] == []
    # Not vacuous: the front page has history charts and the CPU run pages a bar chart, three timelines and three
    # memory timelines (one call of each variant).
    assert len(crawled.pages[crawled.base_url].images) >= 1
    run_pages = [p for u, p in crawled.pages.items() if "-cpu-head-" in u]
    assert run_pages and len(run_pages[0].images) == 7


def test_every_internal_reference_answers_200_and_stays_under_the_sub_path(crawled: Crawled) -> None:
    assert {url: s for url, s in crawled.link_status.items() if s != 200} == {}
    assert [u for u in crawled.link_status if not u.startswith(crawled.base_url)] == []
    # Downloads are among them: run.json, the traces and the Markdown report of every run.
    paths = [u[len(crawled.base_url):] for u in crawled.link_status]
    assert sum(p.endswith("/data/run.json") for p in paths) == len(list((crawled.site / "runs").iterdir()))
    assert any(p.endswith("/report.md") for p in paths) and any(p.endswith(".pt.trace.json.gz") for p in paths)


def test_every_fragment_link_points_at_an_element_on_its_page(crawled: Crawled) -> None:
    assert broken_fragments(crawled.pages) == []
    assert any("#" in link.raw for page in crawled.pages.values() for link in page.links)  # there are some


def test_the_site_loads_nothing_from_outside(crawled: Crawled) -> None:
    outside = [(u, link.tag, link.raw) for u, page in crawled.pages.items() for link in page.links
               if link.tag != "a" and not is_internal(link.url, crawled.base_url)]
    assert outside == []


def test_every_html_page_of_the_site_is_reached_from_the_front_page(crawled: Crawled) -> None:
    on_disk = {p.relative_to(crawled.site).as_posix() for p in crawled.site.rglob("*.html")}
    reached = {_page_file(u, crawled.base_url) for u in crawled.pages}
    assert on_disk - reached == set()
    archive = len(list((crawled.site / "archive").iterdir()))
    assert len(on_disk) == 3 + archive + len(list((crawled.site / "runs").iterdir()))  # index, latest, help + pages


def test_latest_leads_to_the_newest_run(crawled: Crawled) -> None:
    page = crawled.pages[crawled.base_url + "latest/index.html"]
    assert page.final_url == f"{crawled.base_url}runs/{crawled.newest_run_id}/index.html"


def test_no_page_runs_a_script(crawled: Crawled) -> None:
    ran = {u: p.evaluated for u, p in crawled.pages.items()
           if (p.evaluated["pwned"], p.evaluated["scripts"]) != ("undefined", 0)}
    assert ran == {}


def test_no_page_is_wider_than_the_window(crawled: Crawled) -> None:
    wide = {u: p.evaluated for u, p in crawled.pages.items() if p.evaluated["page"] > p.evaluated["window"]}
    assert wide == {}


def test_screenshots_of_the_index_and_a_run_page_are_kept(crawled: Crawled) -> None:
    for name in ("index.png", "run.png"):
        data = (SCREENSHOTS / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name


# ---------------------------------------------------------------------------------------------
# Hostile strings from a user and from a trace stay text


def test_payloads_in_a_label_and_in_trace_op_names_do_not_execute(tmp_path: Path) -> None:
    chromium_or_skip()
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run(label=PAYLOAD, hostname=PAYLOAD))
    trace = tmp_path / "hostile.pt.trace.json.gz"
    trace.write_bytes(gzip.compress(json.dumps(chrome_trace(ops=(PAYLOAD_OP, PAYLOAD))).encode()))
    proc = run_cli("import", str(trace), "--store", str(store), "--label", PAYLOAD)
    assert proc.returncode == 0, proc.stderr
    site = tmp_path / "site"
    build_site(store, site, f"/{SUBPATH}/")
    pages = ["index.html", "help/index.html"] + [f"runs/{d.name}/index.html" for d in sorted((site / "runs").iterdir())]
    with serve(site, SUBPATH) as base:
        reports = open_pages([base + p for p in pages], evaluate=PWNED, init_script="window.alert = () => {"
                             "window.__pwned = 'alert'; };")
    assert [r.evaluated for r in reports] == [{"pwned": "undefined", "scripts": 0}] * len(pages)
    # The payload is on the pages as text (so the check above looked at pages that carry it).
    texts = (site / "runs").rglob("index.html")
    assert all("&lt;script&gt;window.__pwned=1&lt;/script&gt;" in t.read_text(encoding="utf-8") for t in texts)


# ---------------------------------------------------------------------------------------------
# Long names from a trace wrap: no page is wider than the window

LONG_OP = "aten::" + "very_long_templated_op_name_" * 11  # 314 characters, no space to break at
LONG_KERNEL = "void at::native::" + "elementwise_kernel_" * 15 + "<float>(float*, float const*)"


def test_long_variant_op_and_kernel_names_wrap_inside_the_window(tmp_path: Path) -> None:
    chromium_or_skip()
    store = tmp_path / "store"
    trace = chrome_trace(ops=(LONG_OP, "aten::add"))
    trace["traceEvents"].append({"ph": "X", "cat": "kernel", "name": LONG_KERNEL, "pid": 0, "tid": 7, "ts": 1010.0,
                                 "dur": 5.0, "args": {"correlation": 0}})
    src = tmp_path / ("rank0_" + "x" * 200 + ".pt.trace.json.gz")  # a file-derived variant name, as long as it gets
    src.write_bytes(gzip.compress(json.dumps(trace).encode()))
    assert run_cli("import", str(src), "--store", str(store)).returncode == 0
    long_variant = "v" * 300  # longer than an import makes today (the newest run: the index shows it too)
    timed = synthetic_run().variants[0]
    untimed = replace(timed, name=long_variant, samples_us=())
    write_synthetic(store, replace(synthetic_run(run_id="20300101T000000Z-cpu-long-abc123",
                                                 created_utc="2030-01-01T00:00:00Z", variants=(untimed, timed)),
                                   source=RunSource.IMPORT, settings=None))
    site = tmp_path / "site"
    build_site(store, site, f"/{SUBPATH}/")
    pages = ["index.html"] + [f"runs/{d.name}/index.html" for d in sorted((site / "runs").iterdir())]
    texts = [(site / p).read_text(encoding="utf-8") for p in pages]
    assert long_variant in texts[0] and LONG_OP in "".join(texts) and html.escape(LONG_KERNEL) in "".join(texts)
    with serve(site, SUBPATH) as base:
        reports = open_pages([base + p for p in pages], evaluate=WIDTH,
                             screenshots={base + pages[-1]: SCREENSHOTS / "long-names.png"})
    assert [r.problems() for r in reports] == [[]] * len(pages)
    wide = {p: r.evaluated for p, r in zip(pages, reports, strict=True) if r.evaluated["page"] > r.evaluated["window"]}
    assert wide == {}


# ---------------------------------------------------------------------------------------------
# The harness itself: it must see what it is meant to catch


def test_harness_reports_console_errors_failed_requests_broken_images_and_executed_payloads(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "ok.png").write_bytes(_png_1x1())
    (site / "broken.png").write_bytes(b"not a png")
    (site / "index.html").write_text(
        '<!doctype html><title>t</title><link rel="icon" href="data:,">'
        '<img src="ok.png"><img src="broken.png"><img src="missing.png">'
        '<a href="sub/">sub</a><a href="/escapes.html">abs</a><a id="here" href="#here">ok</a><a href="#nowhere">x</a>'
        '<script>console.error("boom"); window.__pwned = 1;</script>', encoding="utf-8")
    (site / "sub" / "index.html").write_text('<!doctype html><title>s</title><link rel="icon" href="data:,">'
                                             '<a href="../index.html">up</a>', encoding="utf-8")
    with serve_site(site, SUBPATH) as server:
        base = server.base_url
        pages = crawl(base + "index.html", base, evaluate=PWNED)
        origin = base[: -len(f"{SUBPATH}/")]
    index = pages[base + "index.html"]
    # Only the sub-path exists on the server: the link that escapes it is followed and caught as a 404.
    assert list(pages) == [base + "index.html", base + "sub/", origin + "escapes.html"]
    assert pages[origin + "escapes.html"].problems()[0] == f"{origin}escapes.html: loaded with HTTP 404"
    assert index.evaluated == {"pwned": "number", "scripts": 1}
    assert any(m.startswith("boom") for m in index.console_errors)
    assert {(r.url[len(base):], r.status) for r in index.failed_requests} == {("missing.png", 404)}
    assert [(i.src, i.ok) for i in index.images] == [("ok.png", True), ("broken.png", False), ("missing.png", False)]
    assert (index.images[0].natural_width, index.images[0].natural_height) == (1, 1)
    assert [link.url for link in index.links if link.tag == "a"][:2] == [base + "sub/", origin + "escapes.html"]
    assert pages[base + "sub/"].problems() == []
    assert broken_fragments(pages) == [f"{base}index.html -> #nowhere"]


def _png_1x1() -> bytes:
    """A valid 1x1 PNG, written by matplotlib's image writer so the test needs no binary fixture."""
    import io

    import numpy as np
    from matplotlib import image

    buf = io.BytesIO()
    image.imsave(buf, np.zeros((1, 1, 3)), format="png")
    return buf.getvalue()
