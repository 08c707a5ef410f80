"""What every chart shares: the fixed matplotlib style, palette, label clipping, SVG-safe text, ticks and PNG writing.

The matplotlib charts draw on a private ``Figure`` (no pyplot global state) under fixed rcParams
(DejaVu Sans, fixed DPI, no time or software metadata), so the same input gives the same bytes.
"""

from __future__ import annotations

import math
import re
import unicodedata
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

DPI = 100
PNG_COLOURS = 256
MAX_LABEL_CHARS = 32
"""Axis labels (variant names) longer than this are shortened on the chart."""
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
CHAR_WIDTH_EM = 0.62
"""Mean advance of a DejaVu Sans character, in em: the bar chart sizes its label margin from it."""
LEGEND_FONT_PT = 8.0
RC: dict[str, Any] = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # SVG text names it, then falls back to the viewer's sans-serif
    "svg.fonttype": "none",  # SVG text stays text: small files, selectable, drawn by the viewer's font
    "text.parse_math": False,  # names from traces are literal text: '$' must not start mathtext
    "font.size": 9,
    "svg.hashsalt": "reportgen",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}


@contextmanager
def chart_style() -> Iterator[None]:
    """matplotlib's rcParams set to the fixed style (``RC``) for the block, its missing-glyph warnings not shown.

    Chart text comes from data. A glyph DejaVu Sans lacks is drawn as a box in a PNG (an SVG's viewer draws text
    with its own fonts) and the page's tables carry the full name; the warning would print the character itself on
    the terminal, and an ESC, BEL or CR from a variant name would act there.
    """
    with matplotlib.rc_context(RC), warnings.catch_warnings():  # type: ignore[arg-type]
        warnings.filterwarnings("ignore", message=r"Glyph \d+ \(", category=UserWarning)
        yield


@contextmanager
def styled_figure(width_in: float, height_in: float) -> Iterator[Figure]:
    """A fresh Agg figure under the fixed style."""
    with chart_style():
        fig = Figure(figsize=(width_in, height_in), dpi=DPI)
        FigureCanvasAgg(fig)
        yield fig


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


def _drawn_rgba(canvas: FigureCanvasAgg) -> Image.Image:
    """``canvas`` drawn, and its RGBA pixels as an image over the canvas's own buffer (no copy)."""
    # matplotlib ships no annotations for its backend modules: FigureCanvasAgg's draw and buffer_rgba are untyped.
    canvas.draw()  # type: ignore[no-untyped-call]
    pixels = canvas.buffer_rgba()  # type: ignore[no-untyped-call]
    return Image.frombuffer("RGBA", canvas.get_width_height(), pixels, "raw", "RGBA", 0, 1)


def save_png(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a 256-colour PNG with no software/time metadata (reproducible bytes).

    The charts hold a few flat colours and anti-aliased text, which a palette keeps: the 1,005-run
    history chart of the benchmark store is 15 kB against 63 kB in true colour, and quantising plus
    encoding takes 9 ms against 17 ms for the true-colour encode alone.
    """
    rgba = _drawn_rgba(cast(FigureCanvasAgg, fig.canvas))
    image = rgba.convert("RGB").quantize(PNG_COLOURS, method=Image.Quantize.FASTOCTREE)
    image.save(path, format="PNG", dpi=(DPI, DPI))
