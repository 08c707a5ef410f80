"""Compiled templates are kept between builds in reportgen's cache folder; a cache never breaks a page."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from reportgen.render import jinja


def test_cache_folder_is_made_private_and_a_shared_one_is_not_used(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPORTGEN_CACHE_DIR", str(tmp_path / "c"))
    folder = jinja.cache_dir()
    assert folder == tmp_path / "c" and (folder.stat().st_mode & 0o777) == 0o700
    os.chmod(folder, 0o777)  # anyone could write compiled code into it: not used
    assert jinja.cache_dir() is None
    monkeypatch.setenv("REPORTGEN_CACHE_DIR", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a folder")
    assert jinja.cache_dir() is None
    monkeypatch.delenv("REPORTGEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jinja.cache_dir() == tmp_path / "xdg" / "reportgen"


def test_templates_compiled_once_are_loaded_from_the_cache_and_a_corrupt_cache_is_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPORTGEN_CACHE_DIR", str(tmp_path))
    compiled: list[str] = []
    real_compile = jinja2.Environment.compile

    def counting_compile(self: jinja2.Environment, source: str, name: str | None = None,
                         *args: object, **kwargs: object) -> object:
        compiled.append(str(name))
        return real_compile(self, source, name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(jinja2.Environment, "compile", counting_compile)

    def render() -> str:
        return jinja.new_environment(autoescape=True).get_template("latest.html").render(latest=None, root="")

    first = render()
    files = sorted((tmp_path / "templates").iterdir())
    assert compiled and files, "compiling a template stores it"
    compiled.clear()
    assert render() == first and compiled == []  # a new environment (a new build) loads it: nothing compiled
    for f in files:
        f.write_bytes(b"\x00garbage")
    assert render() == first and compiled  # a corrupt cache file: compiled again
    for f in sorted((tmp_path / "templates").iterdir()):
        f.unlink()
    (tmp_path / "templates").rmdir()
    (tmp_path / "templates").write_text("a file where the cache folder goes")  # no cache: still renders
    assert render() == first
