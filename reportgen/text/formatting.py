"""Number and text formatters shared by every output: the site (HTML and Markdown) and the PR comment.

One home for how a figure is printed, so a time reads the same on a run page and in a comment.
``render.py`` registers each of these as a Jinja filter (``FILTERS``) in both environments.
Every formatter returns ``DASH`` for a missing or non-finite value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from urllib.parse import quote

DASH = "—"

URL_SAFE = ":/?#=&%~+,;@!$*"
"""Characters left as they are in an absolute URL; everything else (spaces, brackets, quotes) is percent-encoded."""


def fmt_us(value: float | None) -> str:
    """Microseconds for a table (the unit goes in the column header): about four significant digits."""
    if value is None or not math.isfinite(value):
        return DASH
    if abs(value) >= 100:
        return f"{value:,.1f}"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.3f}"


def fmt_delta_us(value: float | None) -> str:
    """A signed difference of microseconds, with the digits of ``fmt_us``: '+30.00', '-100.0'."""
    if value is None or not math.isfinite(value):
        return DASH
    return ("+" if value >= 0 else "-") + fmt_us(abs(value))


def fmt_pct(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.495 -> '49.5 %'."""
    if fraction is None or not math.isfinite(fraction):
        return DASH
    return f"{fraction * 100:.{digits}f} %"


def fmt_of_ceiling(fraction: float | None) -> str:
    """A fraction of the ceiling: '49.5 %'; above 100 % never as a plain number ('ceiling too low: 1.34×')."""
    if fraction is None or not math.isfinite(fraction):
        return DASH
    if fraction > 1.0:
        return f"ceiling too low: {fraction:.2f}×"
    return fmt_pct(fraction)


def fmt_change_pct(percent: float | None) -> str:
    """A signed change already in percent: 30.0 -> '+30.0 %'."""
    if percent is None or not math.isfinite(percent):
        return DASH
    return f"{percent:+.1f} %"


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


def fmt_calls(value: float | None) -> str:
    """Calls per step: an integer when whole, else two decimals."""
    if value is None or not math.isfinite(value):
        return DASH
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def fmt_number(value: float | None) -> str:
    """A plain setting such as a threshold: '5', '2.5'."""
    if value is None or not math.isfinite(value):
        return DASH
    return f"{value:g}"


def fmt_sci(value: float | None) -> str:
    """A small error magnitude: '1.2e-06'."""
    if value is None or not math.isfinite(value):
        return DASH
    return f"{value:.2g}"


def url_path(path: str) -> str:
    """Percent-encode a relative link (each segment); safe in HTML attributes and Markdown links."""
    return quote(path, safe="/#")


def url_absolute(url: str) -> str:
    """An absolute URL made safe as a Markdown link destination: no space, bracket, quote or line break."""
    return quote(str(url), safe=URL_SAFE)


FILTERS: dict[str, Callable[..., str]] = {
    "us": fmt_us,
    "delta_us": fmt_delta_us,
    "pct": fmt_pct,
    "of_ceiling": fmt_of_ceiling,
    "change_pct": fmt_change_pct,
    "ratio": fmt_ratio,
    "rate": fmt_rate,
    "size": fmt_bytes,
    "int": fmt_int,
    "calls": fmt_calls,
    "number": fmt_number,
    "sci": fmt_sci,
    "url": url_path,
    "abs_url": url_absolute,
}
"""The formatters as Jinja filters: their output is digits, units and percent-encoded URLs (nothing to escape)."""

