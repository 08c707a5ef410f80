"""What every chart shares without matplotlib: palette, label clipping, SVG-safe text, text widths and ticks.

The SVG charts (bars, history, timelines) are laid out with these alone, so a build that draws only them never imports
matplotlib; :mod:`reportgen.render.drawing` adds the matplotlib style and PNG writing for the others.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

MAX_LABEL_CHARS = 32
"""Axis labels (variant names) longer than this are shortened on the chart."""
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
CHAR_WIDTH_EM = 0.62
"""Mean advance of a DejaVu Sans character, in em: the bar chart sizes its label margin from it."""
LEGEND_FONT_PT = 8.0


def clip_label(text: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """A label cut to ``max_chars`` with an ellipsis; the page's tables carry the full name."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def svg_text(text: str) -> str:
    """``text`` with what XML 1.0 forbids (C0 controls but tab and newlines, lone surrogates, U+FFFE/F) as U+FFFD.

    Names come from traces and users; one ESC character would make the whole SVG unreadable.
    """
    return _NOT_XML.sub("\ufffd", text)


def colour_for(index: int) -> str:
    """The palette colour of the variant at ``index`` (stable order: the run's variant order)."""
    return PALETTE[index % len(PALETTE)]


def text_width_px(text: str, font_px: float) -> float:
    """An estimate of ``text``'s drawn width: the viewer's font lays SVG text out, not ours.

    East Asian wide and full-width characters take about a whole em; others about CHAR_WIDTH_EM.
    """
    wide = sum(1 for c in text if unicodedata.east_asian_width(c) in ("W", "F"))
    return ((len(text) - wide) * CHAR_WIDTH_EM + wide) * font_px


def nice_ticks(top: float, max_ticks: int = 7) -> tuple[list[float], int]:
    """Ticks 0, s, 2s ... up to ``top`` with s a 1, 2, 2.5 or 5 times a power of ten; and the decimals to print."""
    if not math.isfinite(top) or top <= 0:
        return [0.0], 0
    raw = top / max(max_ticks - 1, 1)
    if raw < 1e-12:  # below an attosecond: one tick at zero (and no logarithm of an underflow)
        return [0.0], 0
    exponent = math.floor(math.log10(raw))
    mantissa = next(m for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * 10.0**exponent >= raw * (1 - 1e-12))
    if mantissa == 10.0:
        mantissa, exponent = 1.0, exponent + 1
    step = mantissa * 10.0**exponent
    decimals = max(0, -exponent) + (1 if mantissa == 2.5 and exponent <= 0 else 0)
    count = int(top / step + 1e-9)
    return [i * step for i in range(count + 1)], decimals


def px(value: float) -> float | int:
    """A coordinate to a tenth of a pixel, printed without a trailing ``.0`` (a chart has thousands of them)."""
    tenth = round(value, 1)
    return int(tenth) if tenth.is_integer() else tenth


@dataclass(frozen=True)
class XTick:
    """A labelled tick on a chart's horizontal axis, in SVG pixels."""

    x_px: float
    label: str
