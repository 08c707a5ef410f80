"""A small harness for end-to-end tests in headless Chromium: serve a site under a sub-path, open pages, report.

Used by tests/test_browser.py (the site in a real browser) and meant for the hardening tests (a payload
in a trace or label must not execute). Driver: Playwright's Python client pointed at Debian's
``/usr/bin/chromium`` (``playwright install`` is never run; it downloads a browser of its own).

    with serve(site_dir, "myrepo") as base_url:          # http://127.0.0.1:PORT/myrepo/
        (page,) = open_pages([base_url + "index.html"], evaluate={"pwned": "typeof window.__pwned"})
        assert page.problems() == [] and page.evaluated["pwned"] == "undefined"
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("REPORTGEN_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = (
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these Chromium phones home at start-up and the closed network refuses it (console noise).
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT_WIDTH, VIEWPORT_HEIGHT = 1280, 900
PAGE_TIMEOUT_MS = 20_000
IMAGE_WAIT_MS = 10_000

# Lazy images are made eager, then every image's decode() is awaited (bounded), then each is described.
_IMAGES_JS = """async (waitMs) => {
  const imgs = Array.from(document.images);
  imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
  const decoded = imgs.map(i => i.decode().then(() => true, () => false));
  const timeout = new Promise(r => setTimeout(() => r(null), waitMs));
  const flags = await Promise.race([Promise.all(decoded), timeout]);
  return imgs.map((i, k) => ({src: i.getAttribute('src') || '', url: i.currentSrc || i.src,
    naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight, complete: i.complete,
    decoded: flags === null ? false : flags[k]}));
}"""

_LINKS_JS = """() => Array.from(document.querySelectorAll('a[href], img[src], link[href], script[src], iframe[src]'))
  .map(e => { const a = e.hasAttribute('href') ? 'href' : 'src';
              return {tag: e.tagName.toLowerCase(), raw: e.getAttribute(a), url: e[a]}; })"""


@dataclass(frozen=True)
class FailedRequest:
    """A request the page made that failed: an HTTP status >= 400, or a network error (status None)."""

    url: str
    status: int | None
    error: str


@dataclass(frozen=True)
class ImageInfo:
    """One <img> after load: its src attribute, resolved URL and decoded size in pixels."""

    src: str
    url: str
    natural_width: int
    natural_height: int
    complete: bool
    decoded: bool

    @property
    def ok(self) -> bool:
        """Loaded, decoded and of non-zero size."""
        return self.complete and self.decoded and self.natural_width > 0 and self.natural_height > 0


@dataclass(frozen=True)
class Link:
    """A reference in the page: the element, the attribute as written, and the URL the browser resolved."""

    tag: str
    raw: str
    url: str


@dataclass(frozen=True)
class PageReport:
    """What one page did in the browser."""

    url: str
    final_url: str
    status: int | None
    title: str
    console_errors: tuple[str, ...]
    page_errors: tuple[str, ...]
    failed_requests: tuple[FailedRequest, ...]
    images: tuple[ImageInfo, ...]
    links: tuple[Link, ...]
    element_ids: frozenset[str]
    evaluated: Mapping[str, Any] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """Every console error, uncaught exception, failed request, broken image and non-200 load, one line each."""
        out = [f"{self.url}: loaded with HTTP {self.status}"] if self.status != 200 else []
        out += [f"{self.url}: console error: {m}" for m in self.console_errors]
        out += [f"{self.url}: uncaught exception: {m}" for m in self.page_errors]
        out += [f"{self.url}: request failed: {r.url} ({r.status or r.error})" for r in self.failed_requests]
        out += [f"{self.url}: image not shown: {i.src!r} ({i.natural_width}x{i.natural_height}, "
                f"complete={i.complete}, decoded={i.decoded})" for i in self.images if not i.ok]
        return out


# ---------------------------------------------------------------------------------------------
# Chromium presence


def chromium_or_skip() -> Path:
    """The Chromium binary and a working Playwright; in CI (CI=true) their absence fails, elsewhere it skips."""
    missing = []
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"{CHROMIUM} not found (apt-get install -y chromium, as .ci/run does)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package is not installed (pip install -e '.[test]')")
    if missing:
        reason = "; ".join(missing)
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"browser tests need Chromium in CI: {reason}")
        pytest.skip(reason)
    return CHROMIUM


# ---------------------------------------------------------------------------------------------
# Serving


@dataclass
class ServedRequest:
    """One request the test server answered: path and status."""

    path: str
    status: int


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static files, no log lines on stderr; every answered request is appended to ``served``."""

    served: list[ServedRequest]

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Record the request instead of printing it."""
        self.served.append(ServedRequest(self.path, int(code) if str(code).isdigit() else 0))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Silence the default stderr log."""


@dataclass
class Server:
    """A running loopback server: the site's URL and the log of every request it answered."""

    base_url: str
    served: list[ServedRequest]

    def errors(self) -> list[ServedRequest]:
        """Requests answered with a status >= 400."""
        return [r for r in self.served if r.status >= 400]


@contextlib.contextmanager
def serve_site(site_dir: Path, subpath: str = "myrepo") -> Iterator[Server]:
    """Serve ``site_dir`` on 127.0.0.1 (free port) at ``/<subpath>/``, as GitHub Pages serves ``/<repo>/``.

    Only the sub-path exists on the server: a link that escapes it (``/assets/...``) gets a 404.
    """
    root = Path(tempfile.mkdtemp(prefix="reportgen-serve-"))
    try:
        target = root / subpath.strip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(site_dir.resolve(), target_is_directory=True)
        served: list[ServedRequest] = []
        handler = type("Handler", (_QuietHandler,), {"served": served})
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
        thread = threading.Thread(target=httpd.serve_forever, name="site-server", daemon=True)
        thread.start()
        try:
            yield Server(f"http://127.0.0.1:{httpd.server_address[1]}/{subpath.strip('/')}/", served)
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=10)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def serve(site_dir: Path, subpath: str = "myrepo") -> Iterator[str]:
    """Like serve_site, yielding only the base URL (``http://127.0.0.1:PORT/<subpath>/``)."""
    with serve_site(site_dir, subpath) as server:
        yield server.base_url


def http_status(url: str, timeout_s: float = 10.0) -> int:
    """The HTTP status of a GET of ``url`` (fragment dropped), without following the browser."""
    clean = urllib.parse.urldefrag(url).url
    try:
        with urllib.request.urlopen(clean, timeout=timeout_s) as resp:  # noqa: S310 - loopback only
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


# ---------------------------------------------------------------------------------------------
# Browsing


def open_pages(urls: Sequence[str], evaluate: Mapping[str, str] | None = None, init_script: str | None = None,
               screenshots: Mapping[str, Path] | None = None) -> list[PageReport]:
    """Load each URL in one headless Chromium and report what happened, in order.

    ``evaluate`` maps a name to a JavaScript expression evaluated after load (``"typeof window.__pwned"``);
    ``init_script`` runs before any page script (e.g. to turn ``alert`` into a flag); ``screenshots`` maps
    a URL to the PNG path of a full-page screenshot of it.
    """
    with browser(init_script) as context:
        return [_open_one(context, url, evaluate or {}, (screenshots or {}).get(url)) for url in urls]


@contextlib.contextmanager
def browser(init_script: str | None = None) -> Iterator[Any]:
    """A headless Chromium (Playwright BrowserContext) with a new empty profile, closed afterwards."""
    chromium_or_skip()
    from playwright.sync_api import ViewportSize, sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="reportgen-chromium-") as profile:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS),
            viewport=ViewportSize(width=VIEWPORT_WIDTH, height=VIEWPORT_HEIGHT), service_workers="block")
        try:
            if init_script:
                context.add_init_script(init_script)
            yield context
        finally:
            context.close()


def _open_one(context: Any, url: str, evaluate: Mapping[str, str], screenshot: Path | None) -> PageReport:
    """Open one page in a fresh tab, wait for load and images, collect everything, close the tab."""
    console: list[str] = []
    page_errors: list[str] = []
    failed: list[FailedRequest] = []
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.on("console", lambda m: console.append(f"{m.text} ({m.location.get('url', '')})")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("requestfailed", lambda r: failed.append(FailedRequest(r.url, None, r.failure or "failed")))
    page.on("response", lambda r: failed.append(FailedRequest(r.url, r.status, r.status_text))
            if r.status >= 400 else None)
    try:
        response = page.goto(url, wait_until="load")
        page.wait_for_load_state("networkidle")
        page.wait_for_load_state("load")  # a meta refresh (latest/) may have started a second navigation
        images = tuple(ImageInfo(d["src"], d["url"], int(d["naturalWidth"]), int(d["naturalHeight"]),
                                 bool(d["complete"]), bool(d["decoded"]))
                       for d in page.evaluate(_IMAGES_JS, IMAGE_WAIT_MS))
        links = tuple(Link(d["tag"], d["raw"] or "", d["url"] or "") for d in page.evaluate(_LINKS_JS))
        ids = frozenset(page.evaluate("() => Array.from(document.querySelectorAll('[id]'), e => e.id)"))
        evaluated = {name: page.evaluate(expr) for name, expr in evaluate.items()}
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        return PageReport(url, page.url, response.status if response else None, page.title(), tuple(console),
                          tuple(page_errors), tuple(failed), images, links, ids, evaluated)
    finally:
        page.close()


# ---------------------------------------------------------------------------------------------
# Crawling


def is_internal(url: str, base_url: str) -> bool:
    """True for a URL on the test server (same scheme, host and port), wherever its path points."""
    a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(base_url)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


def page_links(report: PageReport, base_url: str) -> list[str]:
    """Internal <a href> targets of a page that are HTML pages (fragment dropped), in order, once each."""
    out: list[str] = []
    for link in report.links:
        url = urllib.parse.urldefrag(link.url).url
        if link.tag == "a" and is_internal(url, base_url) and _is_html(url) and url not in out:
            out.append(url)
    return out


def broken_fragments(pages: Mapping[str, PageReport]) -> list[str]:
    """Links ``page#frag`` to a crawled page that has no element with id ``frag``, as 'from -> to'."""
    out = []
    for url, report in pages.items():
        for link in report.links:
            target, frag = urllib.parse.urldefrag(link.url)
            if link.tag == "a" and frag and target in pages and urllib.parse.unquote(frag) not in pages[target].element_ids:
                out.append(f"{url} -> {link.raw}")
    return out


def _is_html(url: str) -> bool:
    """A page, not a download: ``.html`` or a folder URL (served as its index.html)."""
    path = urllib.parse.urlsplit(url).path
    return path.endswith((".html", "/"))


def crawl(start_url: str, base_url: str, evaluate: Mapping[str, str] | None = None,
          init_script: str | None = None, screenshots: Mapping[str, Path] | None = None,
          max_pages: int = 500) -> dict[str, PageReport]:
    """Open every HTML page reachable from ``start_url`` by internal links, breadth first, in one browser."""
    reports: dict[str, PageReport] = {}
    queue = [start_url]
    with browser(init_script) as context:
        while queue and len(reports) < max_pages:
            url = queue.pop(0)
            if url in reports:
                continue
            report = _open_one(context, url, evaluate or {}, (screenshots or {}).get(url))
            reports[url] = report
            queue += [u for u in page_links(report, base_url) if u not in reports and u not in queue]
    return reports
