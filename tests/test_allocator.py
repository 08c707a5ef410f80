"""The allocator settings in the environment: recorded in every run's fingerprint and shown, escaped, on its page."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from factories import synthetic_run, write_synthetic

from reportgen.devices import allocator
from reportgen.devices import host as environment
from reportgen.site.pages import write_run_page
from reportgen.store.loader import load_run
from reportgen.text.markdown import md_escape


def test_only_allocator_variables_are_recorded_sorted() -> None:
    env = {"PATH": "/bin", "MALLOC_ARENA_MAX": "2", "LD_PRELOAD": "/usr/lib/libjemalloc.so.2", "MALLOC_CONF": "a:1",
           "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1", "TCMALLOC_RELEASE_RATE": "0", "XMALLOC_": "no",
           "HOME": "/root", "THP_MEM_ALLOC_ENABLE": "1", "THP_OTHER": "x"}
    assert list(allocator.allocator_env(env).items()) == [
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1"), ("LD_PRELOAD", "/usr/lib/libjemalloc.so.2"),
        ("MALLOC_ARENA_MAX", "2"), ("MALLOC_CONF", "a:1"), ("TCMALLOC_RELEASE_RATE", "0"),
        ("THP_MEM_ALLOC_ENABLE", "1")]


def test_the_fingerprint_records_the_allocator_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_MAX_", "0")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    env = environment.fingerprint(SimpleNamespace(__version__="2.13.0", get_num_threads=lambda: 1), "cpu", {})
    assert env.allocator_env.get("MALLOC_MMAP_MAX_") == "0" and "LD_PRELOAD" not in env.allocator_env


def test_the_run_page_shows_the_allocator_settings_escaped(tmp_path: Path) -> None:
    run = synthetic_run()
    hostile = "/opt/<b>lib</b>|x.so"
    shown = dataclasses.replace(run, environment=dataclasses.replace(
        run.environment, allocator_env={"MALLOC_MMAP_MAX_": "0", "LD_PRELOAD": hostile}))
    bundle = write_synthetic(tmp_path / "store", shown)
    assert load_run(bundle).environment.allocator_env == {"MALLOC_MMAP_MAX_": "0", "LD_PRELOAD": hostile}
    write_run_page(load_run(bundle), bundle, tmp_path / "page")
    html = (tmp_path / "page" / "index.html").read_text()
    md = (tmp_path / "page" / "report.md").read_text()
    assert "<code>LD_PRELOAD=/opt/&lt;b&gt;lib&lt;/b&gt;|x.so</code> · <code>MALLOC_MMAP_MAX_=0</code>" in html
    assert "<b>lib" not in html and "<b>lib" not in md
    rows = [line for line in md.splitlines() if line.startswith("| allocator |")]
    assert rows == [f"| allocator | {md_escape('LD_PRELOAD')}={md_escape(hostile)} · {md_escape('MALLOC_MMAP_MAX_')}=0 |"]
    plain = write_synthetic(tmp_path / "store2", run)
    write_run_page(load_run(plain), plain, tmp_path / "page2")
    assert "allocator" not in (tmp_path / "page2" / "index.html").read_text()


@pytest.mark.parametrize("text, mode", [("always [madvise] never\n", "madvise"), ("[always] madvise never", "always"),
                                        ("always madvise [never]", "never"), ("", None), ("always madvise never", None)])
def test_the_kernels_thp_mode_is_the_bracketed_one(text: str, mode: str | None) -> None:
    assert allocator.thp_mode(text) == mode


def test_a_missing_thp_file_reads_as_no_mode(tmp_path: Path) -> None:
    assert allocator.read_thp_mode(tmp_path / "absent") is None
    (tmp_path / "enabled").write_text("always [madvise] never\n")
    assert allocator.read_thp_mode(tmp_path / "enabled") == "madvise"
