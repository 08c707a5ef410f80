"""Issue 12 for the site: file names a bundle chooses never become web pages, a refused build changes nothing
(no lock file either), a build never adopts a neighbour site's moved-aside copy, and a build never lands
inside the store or inside another site. Issue 11: the renderer version covers every file a page depends on."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, write_synthetic

from reportgen.errors import SiteError
from reportgen.model.run import Artifact
from reportgen.site import build_site, fs, plan, renderer_version
from reportgen.store.outputs import SITE_MARKERS, enclosing_site
from reportgen.store.writer import temp_owner_tag, write_bundle

EXECUTABLE_WEB_SUFFIXES = (".html", ".htm", ".xhtml", ".xht", ".svg", ".svgz", ".js", ".mjs", ".xml", ".xsl",
                           ".shtml", ".php", ".css", ".swf", ".pdf", ".wasm")


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_bundle_file_names_never_publish_an_executable_web_type(tmp_path: Path) -> None:
    """A trace named report.html and artifacts a.html / x.svg / y.js are published as .json / .bin files."""
    run = synthetic_run(with_traces=True)
    evil_trace = "traces/report.html"
    arts = (Artifact("artifacts/a.html", "html", 30), Artifact("artifacts/x.svg", "svg", 40),
            Artifact("artifacts/y.js", "neff", 5), Artifact("artifacts/z.xhtml", "device-summary", 2))
    variants = (dataclasses.replace(run.variants[0], trace_path=evil_trace, artifacts=arts), *run.variants[1:])
    run = dataclasses.replace(run, variants=variants)
    files: dict[str, Path | bytes] = {v.trace_path: gzip.compress(json.dumps(chrome_trace()).encode(), mtime=0)
                                      for v in run.variants if v.trace_path and v.trace_path != evil_trace}
    files[evil_trace] = json.dumps(chrome_trace()).encode()  # valid trace JSON, not gzip
    files["artifacts/a.html"] = b"<script>alert(1)</script>" + b" " * 5
    files["artifacts/x.svg"] = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'
    files["artifacts/y.js"] = b"alert(1)"
    files["artifacts/z.xhtml"] = b"{}"
    write_bundle(tmp_path / "store", run, files)
    build_site(tmp_path / "store", tmp_path / "site", "/")
    page = tmp_path / "site" / "runs" / run.run_id
    data = sorted(str(p.relative_to(page)) for p in (page / "data").rglob("*") if p.is_file())
    assert [d for d in data if d.lower().endswith(EXECUTABLE_WEB_SUFFIXES)] == [], data
    assert "data/traces/report.html.json" in data
    assert "data/artifacts/naive/a.html.bin" in data and "data/artifacts/naive/x.svg.bin" in data
    assert "data/artifacts/naive/y.js.neff" in data and "data/artifacts/naive/z.xhtml.json" in data
    assert (page / "data/artifacts/naive/a.html.bin").read_bytes() == files["artifacts/a.html"]
    html = (page / "index.html").read_text()
    for href in ("data/traces/report.html.json", "data/artifacts/naive/a.html.bin", "data/artifacts/naive/x.svg.bin"):
        assert f'href="{href}"' in html
    assert 'href="data/artifacts/a.html"' not in html and 'href="data/traces/report.html"' not in html
    md = (page / "report.md").read_text()
    assert "(data/traces/report.html.json)" in md and "(data/artifacts/naive/a.html)" not in md


def test_a_member_named_twice_is_published_once_and_names_never_collide(tmp_path: Path) -> None:
    run = synthetic_run(with_traces=True)
    arts = (Artifact("artifacts/k.neff", "neff", 1), Artifact("artifacts/sub/k", "neff", 1))
    shared = "traces/naive.pt.trace.json.gz"
    variants = (dataclasses.replace(run.variants[0], artifacts=arts),
                dataclasses.replace(run.variants[1], trace_path=shared), *run.variants[2:])
    run = dataclasses.replace(run, variants=variants)
    files: dict[str, Path | bytes] = {v.trace_path: gzip.compress(json.dumps(chrome_trace()).encode(), mtime=0)
                                      for v in run.variants if v.trace_path}
    files["artifacts/k.neff"], files["artifacts/sub/k"] = b"A", b"B"
    write_bundle(tmp_path / "store", run, files)
    build_site(tmp_path / "store", tmp_path / "site", "/")
    data = tmp_path / "site" / "runs" / run.run_id / "data"
    assert (data / "artifacts/naive/k.neff").read_bytes() == b"A"
    assert (data / "artifacts/naive/k-2.neff").read_bytes() == b"B"
    assert sorted(p.name for p in (data / "traces").iterdir()) == ["compiled.pt.trace.json.gz",
                                                                   "naive.pt.trace.json.gz"]


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_recovery_never_adopts_a_neighbour_sites_moved_aside_copy(tmp_path: Path) -> None:
    """'a-site' was moved aside by a killed build; building 'site' must neither adopt nor delete it."""
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run())
    neighbour = tmp_path / "a-site"
    build_site(store, neighbour, "/")
    host = temp_owner_tag().rsplit("-p", 1)[0]
    pid = _dead_pid()
    # as the old code named it (slug of the name), and as fs names it now (a hash of the exact name)
    asides = [tmp_path / f"{fs.OLD_PREFIX}{host}-p{pid}-a-site-abc123",
              tmp_path / f"{fs.OLD_PREFIX}{host}-p{pid}-{fs.name_tag(neighbour)}-abc123"]
    shutil.copytree(neighbour, asides[1])
    os.rename(neighbour, asides[0])
    result = build_site(store, tmp_path / "site", "/")
    assert asides[0].is_dir() and asides[1].is_dir()  # neither adopted nor deleted
    assert (result.rendered, result.reused) == (1, 0) and not neighbour.exists()  # built fresh, not adopted
    assert fs.own_aside_pattern(tmp_path / "site").fullmatch(asides[1].name) is None
    # the neighbour's own next build puts its copy back
    os.rename(asides[0], tmp_path / "elsewhere")
    build_site(store, neighbour, "/")
    assert not asides[1].exists() and (neighbour / "manifest.json").is_file()


def test_the_site_is_put_back_from_its_own_moved_aside_copy(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run())
    site = tmp_path / "site"
    build_site(store, site, "/")
    before = _tree(site)
    aside = tmp_path / f"{fs.OLD_PREFIX}{temp_owner_tag().rsplit('-p', 1)[0]}-p{_dead_pid()}-{fs.name_tag(site)}-x1"
    os.rename(site, aside)
    result = build_site(store, site, "/")
    assert result.reused == 1 and _tree(site) == before and not aside.exists()


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run())
    return store


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_build_into_the_file_system_root_is_refused_without_a_lock_file(tmp_path: Path) -> None:
    had_lock = Path("/..lock").exists()
    with pytest.raises(SiteError, match="not the file-system root"):
        build_site(_store(tmp_path), Path("/"), "/")
    assert Path("/..lock").exists() == had_lock


def test_build_inside_a_site_is_refused_and_writes_nothing_there(tmp_path: Path) -> None:
    store = _store(tmp_path)
    site = tmp_path / "site"
    build_site(store, site, "/")
    before = _listing(tmp_path)
    for inner in (site / "runs", site / "runs" / "new", site / "assets" / "deeper" / "x"):
        with pytest.raises(SiteError, match=r"is inside the site .*site; pass the site folder itself"):
            build_site(store, inner, "/")
    assert _listing(tmp_path) == before  # no .runs.lock, no folder


def test_build_inside_the_store_is_refused_before_writing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    before = _listing(tmp_path)
    for out in (store / "site", store, store / "a" / "b"):
        with pytest.raises(SiteError, match="is inside the results folder"):
            build_site(store, out, "/")
    assert _listing(tmp_path) == before


def test_a_refused_build_over_a_folder_that_is_not_a_site_writes_no_lock(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keep.txt").write_text("x")
    store = _store(tmp_path)
    before = _listing(tmp_path)
    with pytest.raises(SiteError, match="not empty and has no manifest.json"):
        build_site(store, docs, "/")
    assert _listing(tmp_path) == before


def test_a_folder_holding_only_a_manifest_is_not_taken_for_a_site(tmp_path: Path) -> None:
    """An unrelated project with a manifest.json (a web app) is not a site: building below it is allowed."""
    (tmp_path / "manifest.json").write_text("{}")
    build_site(_store(tmp_path), tmp_path / "public" / "site", "/")
    assert enclosing_site(tmp_path / "public" / "site" / "runs", SITE_MARKERS) == tmp_path / "public" / "site"


# --- the renderer version --------------------------------------------------------------------------


def _copy_sources(tmp_path: Path) -> tuple[Path, Path]:
    code = tmp_path / "reportgen"
    shutil.copytree(plan.package_dir(), code, ignore=shutil.ignore_patterns("__pycache__"))
    templates = tmp_path / "templates"
    shutil.copytree(plan.TEMPLATES_DIR, templates, ignore=shutil.ignore_patterns("__pycache__"))
    return code, templates


@pytest.mark.parametrize("changed", ["reportgen/analysis/stats.py", "reportgen/text/markdown.py", "reportgen/traces/reader.py",
                                     "reportgen/analysis/run_view.py", "reportgen/devices/neuron/device.py",
                                     "reportgen/site/pages.py", "templates/run.html", "templates/_macros.html",
                                     "templates/charts/bars.svg", "templates/style.css",
                                     "templates/reading-a-report.md"])
def test_changing_any_file_a_page_depends_on_changes_the_renderer_version(tmp_path: Path, changed: str) -> None:
    code, templates = _copy_sources(tmp_path)
    before = renderer_version(code, templates)
    assert before == renderer_version(code, templates)
    target = tmp_path / changed
    target.write_bytes(target.read_bytes() + b"\n")
    assert renderer_version(code, templates) != before


def test_a_new_module_changes_the_renderer_version(tmp_path: Path) -> None:
    code, templates = _copy_sources(tmp_path)
    before = renderer_version(code, templates)
    (code / "newchart.py").write_text("X = 1\n")
    assert renderer_version(code, templates) != before


def test_the_installed_version_covers_every_loaded_reportgen_module_and_template() -> None:
    import sys

    from reportgen.render import bars, history_plot, jinja, sweep_plots, timeline_plot  # noqa: F401
    from reportgen.traces import reader  # noqa: F401  what a build loads

    sources = {p.resolve() for p in plan.renderer_sources()}
    modules = [m for name, m in list(sys.modules.items())  # built-in scenarios are workloads, not page code
               if name.split(".")[0] == "reportgen" and not name.startswith("reportgen.scenarios")]
    files = {Path(m.__file__).resolve() for m in modules if getattr(m, "__file__", None)}
    assert files and files <= sources, sorted(map(str, files - sources))
    templates = {p.resolve() for p in plan.TEMPLATES_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert templates <= sources
    assert renderer_version() == renderer_version(plan.package_dir(), plan.TEMPLATES_DIR)
