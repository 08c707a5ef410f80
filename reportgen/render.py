"""The Jinja environments and their filters, in one place: HTML (autoescaped) and Markdown (GFM).

The Markdown environment escapes every ``{{ expression }}`` with ``md_escape`` through Jinja's
``finalize`` hook, the Markdown counterpart of HTML autoescaping: a value is inert unless a
filter marked it as already-safe Markdown (``MdSafe``), as the number formatters do.
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import markdown as markdown_lib

from reportgen.mdtext import md_escape


def package_folder(package: str) -> Path:
    """The folder of a resource package (``reportgen.templates``, ``reportgen.scenarios``), found through the
    import system: the repository's folder in an editable install, site-packages in a wheel."""
    folder = resources.files(package)
    if not isinstance(folder, Path) or not folder.is_dir():
        raise RuntimeError(f"{package}: resources are not a folder on disk ({folder}); reinstall reportgen")
    return folder


TEMPLATES_DIR = package_folder("reportgen.templates")
"""Templates, the stylesheet, the icon and the help page's Markdown (package data, see pyproject.toml)."""
DASH = "—"


class MdSafe(str):
    """A string that is already valid, inert Markdown: the Markdown finalizer leaves it alone."""


def _md_finalize(value: Any) -> str:
    """Escape every value printed into a Markdown template unless it is MdSafe."""
    if value is None:
        return DASH
    if isinstance(value, MdSafe):
        return str(value)
    return md_escape(value)


def md_filter(value: Any) -> MdSafe:
    """The ``md`` filter: escape explicitly (idempotent with the finalizer)."""
    return value if isinstance(value, MdSafe) else MdSafe(md_escape(value))


def fmt_us(value: float | None) -> str:
    """Microseconds for a table: precision that keeps about four significant digits."""
    if value is None or not math.isfinite(value):
        return DASH
    if abs(value) >= 100:
        return f"{value:,.1f}"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.3f}"


def fmt_pct(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.495 -> '49.5 %'."""
    if fraction is None or not math.isfinite(fraction):
        return DASH
    return f"{fraction * 100:.{digits}f} %"


def fmt_ratio(value: float | None) -> str:
    """A speedup: 5.84 -> '5.84×'; tiny ones keep two significant digits (0.0009×, not 0.00×)."""
    if value is None or not math.isfinite(value):
        return DASH
    if abs(value) >= 0.1:
        return f"{value:.2f}×"
    return f"{value:.2g}×"


def fmt_rate(bytes_per_s: float | None) -> str:
    """Bandwidth in decimal units, as vendors quote it: '2.90 TB/s', '12.3 GB/s'."""
    if bytes_per_s is None or not math.isfinite(bytes_per_s):
        return DASH
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.3g} {unit}"
    return f"{bytes_per_s:.3g} B/s"


def fmt_bytes(size_bytes: int | float | None) -> str:
    """A size in binary units: 2048 -> '2.0 KiB'."""
    if size_bytes is None:
        return DASH
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return DASH  # pragma: no cover


def fmt_int(value: int | None) -> str:
    """An integer with thousands separators, or a dash."""
    return DASH if value is None else f"{value:,}"


def fmt_sci(value: float | None) -> str:
    """A small error magnitude: '1.2e-06'."""
    if value is None or not math.isfinite(value):
        return DASH
    return f"{value:.2g}"


def url_path(path: str) -> str:
    """Percent-encode a relative link (each segment); safe in HTML attributes and Markdown links."""
    return quote(path, safe="/#")


_FORMATTERS = {
    "us": fmt_us,
    "pct": fmt_pct,
    "ratio": fmt_ratio,
    "rate": fmt_rate,
    "size": fmt_bytes,
    "int": fmt_int,
    "sci": fmt_sci,
    "url": url_path,
}


def _md_safe(func: Any) -> Any:
    """Wrap a formatter so its output (digits, units, percent-encoded URLs) passes the Markdown finalizer."""
    return lambda *args, **kwargs: MdSafe(func(*args, **kwargs))


def new_environment(*, autoescape: bool, finalize: Any = None) -> jinja2.Environment:
    """A Jinja environment over templates/ with the project's options (undefined names are errors)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
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
    env.filters.update(_FORMATTERS)
    return env


@lru_cache(maxsize=1)
def md_env() -> jinja2.Environment:
    """The Markdown environment: no HTML autoescape, every printed value md-escaped by ``finalize``."""
    env = new_environment(autoescape=False, finalize=_md_finalize)
    env.filters.update({name: _md_safe(f) for name, f in _FORMATTERS.items()})
    env.filters["md"] = md_filter
    env.filters["trusted"] = MdSafe  # only for labels reportgen itself makes (enum-derived), never data
    return env


def render_html(template: str, **context: Any) -> str:
    """Render an HTML template."""
    return html_env().get_template(template).render(**context)


def render_md(template: str, **context: Any) -> str:
    """Render a Markdown template."""
    return md_env().get_template(template).render(**context)


def markdown_to_html(text: str) -> str:
    """Trusted Markdown (our own docs) to HTML through the ``markdown`` package, tables enabled."""
    return markdown_lib.markdown(text, extensions=["tables", "fenced_code", "toc"], output_format="html")
