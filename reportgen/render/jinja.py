"""The Jinja environments and their filters, in one place: HTML (autoescaped) and Markdown (GFM).

There is ONE Markdown environment (``md_env``), used by the site's ``report.md``/``index.md``
and by the PR comment of ``reportgen compare`` alike. It escapes every ``{{ expression }}``
with ``md_escape`` through Jinja's ``finalize`` hook, the Markdown counterpart of HTML
autoescaping: a value is inert unless a filter marked it as already-safe Markdown
(``MdSafe``), as the number formatters of ``reportgen.text.formatting`` do. Both environments get
the same formatters (``formatting.FILTERS``), registered here and nowhere else.
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from reportgen.text.formatting import DASH, FILTERS
from reportgen.text.markdown import clip, html_inline, md_escape


def package_folder(package: str) -> Path:
    """The folder of a resource package (``reportgen.templates``, ``reportgen.scenarios``), found through the
    import system: the repository's folder in an editable install, site-packages in a wheel."""
    folder = resources.files(package)
    if not isinstance(folder, Path) or not folder.is_dir():
        raise RuntimeError(f"{package}: resources are not a folder on disk ({folder}); reinstall reportgen")
    return folder


TEMPLATES_DIR = package_folder("reportgen.templates")
"""Templates, the stylesheet, the icon and the help page's Markdown (package data, see pyproject.toml)."""


class MdSafe(str):
    """A string that is already valid, inert Markdown: the Markdown finalizer leaves it alone."""


def _md_finalize(value: Any) -> str:
    """Escape every value printed into a Markdown template unless it is MdSafe."""
    if value is None:
        return DASH
    if isinstance(value, MdSafe):
        return str(value)
    return md_escape(value)


def _labelled_extras(*args: Any, **kwargs: Any) -> Any:
    from reportgen import devices

    return devices.labelled_extras(*args, **kwargs)


def _undeclared_extras(*args: Any, **kwargs: Any) -> Any:
    from reportgen import devices

    return devices.undeclared_extras(*args, **kwargs)


def _neuron_openings(*args: Any, **kwargs: Any) -> Any:
    from reportgen.devices.neuron import perfetto

    return perfetto.openings(*args, **kwargs)


DATA_FILTERS: dict[str, Any] = {"labelled_extras": _labelled_extras, "undeclared_extras": _undeclared_extras,
                                "neuron_openings": _neuron_openings}
"""Filters that return data (device extras by label), escaped like any other value where printed. They import the
device registry when first used, on a run page: the pages that list runs need none of it."""


def md_filter(value: Any) -> MdSafe:
    """The ``md`` filter: escape explicitly (idempotent with the finalizer)."""
    return value if isinstance(value, MdSafe) else MdSafe(md_escape(value))


def _md_safe(func: Any) -> Any:
    """Wrap a formatter so its output (digits, units, percent-encoded URLs) passes the Markdown finalizer."""
    return lambda *args, **kwargs: MdSafe(func(*args, **kwargs))


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja's file cache of compiled templates (keyed by template name and source checksum, so an edited
    template is compiled again); a cache that cannot be read or written is no cache, never an error."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, ValueError, EOFError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def cache_dir() -> Path | None:
    """reportgen's cache folder: $REPORTGEN_CACHE_DIR, else $XDG_CACHE_HOME/reportgen, else ~/.cache/reportgen;
    None when it cannot be made or is not this user's own (a shared folder could feed us compiled code)."""
    explicit = os.environ.get("REPORTGEN_CACHE_DIR")
    xdg = os.environ.get("XDG_CACHE_HOME")
    try:
        folder = Path(explicit) if explicit else (Path(xdg) if xdg else Path.home() / ".cache") / "reportgen"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except (OSError, RuntimeError):  # RuntimeError: no home directory
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return folder


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between builds: compiling the index's templates was about 0.1 s of adding a run."""
    folder = cache_dir()
    if folder is None:
        return None
    templates = folder / "templates"
    try:
        templates.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return _QuietBytecodeCache(str(templates), f"jinja{jinja2.__version__}-%s.cache")


def new_environment(*, autoescape: bool, finalize: Any = None) -> jinja2.Environment:
    """A Jinja environment over templates/ with the project's options (undefined names are errors)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        bytecode_cache=_bytecode_cache(),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@lru_cache(maxsize=1)
def html_env() -> jinja2.Environment:
    """The HTML environment: autoescape on."""
    env = new_environment(autoescape=True)
    env.filters.update(FILTERS)
    env.filters.update(DATA_FILTERS)
    return env


@lru_cache(maxsize=1)
def md_env() -> jinja2.Environment:
    """The Markdown environment: no HTML autoescape, every printed value md-escaped by ``finalize``."""
    env = new_environment(autoescape=False, finalize=_md_finalize)
    env.filters.update({name: _md_safe(f) for name, f in FILTERS.items()})
    env.filters.update(DATA_FILTERS)
    env.filters["md"] = md_filter
    env.filters["clip"] = clip  # a plain string: the finalizer still escapes it
    env.filters["html"] = lambda value: MdSafe(html_inline(value))  # for raw HTML such as <summary>
    env.filters["trusted"] = MdSafe  # only for text reportgen itself makes (markers, enum labels), never data
    return env


def render_html(template: str, **context: Any) -> str:
    """Render an HTML template."""
    return html_env().get_template(template).render(**context)


def render_md(template: str, **context: Any) -> str:
    """Render a Markdown template."""
    return md_env().get_template(template).render(**context)


def markdown_to_html(text: str) -> str:
    """Trusted Markdown (our own docs) to HTML through the ``markdown`` package, tables enabled."""
    import markdown as markdown_lib  # the help page only, which a build usually links from the old site

    html: str = markdown_lib.markdown(text, extensions=["tables", "fenced_code", "toc"], output_format="html")
    return html
