"""The run page's bar chart: per-variant median time with its interval, laid out here and drawn by an SVG template.

``templates/charts/bars.svg`` draws the layout: a few rectangles and lines, where a matplotlib figure cost
more than the rest of a run page together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reportgen.analysis.variant_view import VariantView
from reportgen.render.jinja import render_html
from reportgen.render.style import XTick, clip_label, colour_for, nice_ticks, svg_text, text_width_px

BAR_WIDTH_PX = 750
BAR_FONT_PX = 12.0


@dataclass(frozen=True)
class SvgBar:
    """One variant's bar, its error bar and its value label, in SVG pixels."""

    label: str
    colour: str
    y_px: float
    height_px: float
    width_px: float
    err_from_px: float | None
    err_to_px: float | None
    value_text: str
    value_x_px: float


@dataclass(frozen=True)
class BarChartLayout:
    """Everything ``templates/charts/bars.svg`` draws: plot box, axis ticks and bars, in pixels."""

    title: str
    caption: str
    width_px: int
    height_px: int
    plot_left_px: float
    plot_right_px: float
    plot_top_px: float
    plot_bottom_px: float
    ticks: tuple[XTick, ...]
    bars: tuple[SvgBar, ...]


def bar_layout(variants: Sequence[VariantView], title: str) -> BarChartLayout:
    """Median time per call per variant as horizontal bars, with the 95 % bootstrap interval as error bars."""
    labels = [svg_text(clip_label(v.name)) for v in variants]
    row_px = 45.0
    height_px = int(round(60 + row_px * max(len(variants), 1) + 90))
    left = 20.0 + max((text_width_px(label, BAR_FONT_PX) for label in labels), default=0.0)
    right, top_px, bottom = BAR_WIDTH_PX - 15.0, 35.0, height_px - 55.0
    medians = [v.timing.median_us if v.timing is not None else 0.0 for v in variants]
    highs = [v.timing.ci_high_us if v.timing is not None else 0.0 for v in variants]
    top = max([*medians, *highs], default=0.0) or 1.0
    x_max = top * 1.3
    scale = (right - left) / x_max
    ticks, decimals = nice_ticks(x_max)
    band = (bottom - top_px) / max(len(variants), 1)
    bars = []
    for i, (v, label) in enumerate(zip(variants, labels, strict=True)):
        y = top_px + band * (i + 0.5)
        t = v.timing
        err_from = err_to = None
        if t is not None:
            err_from = left + max(min(t.ci_low_us, t.median_us), 0.0) * scale
            err_to = left + max(t.ci_high_us, t.median_us) * scale
        end = err_to if err_to is not None else left + medians[i] * scale
        text = f"{t.median_us:,.1f} µs" if t is not None else f"{v.status.value}: no timing"
        bars.append(SvgBar(label, colour_for(i), _px(y), _px(band * 0.8), _px(medians[i] * scale),
                           _px_or_none(err_from), _px_or_none(err_to), text, _px(end + 6)))
    return BarChartLayout(
        title=svg_text(title),
        caption="median time per call (µs); error bars: 95 % bootstrap CI of the median",
        width_px=BAR_WIDTH_PX, height_px=height_px, plot_left_px=_px(left), plot_right_px=_px(right),
        plot_top_px=top_px, plot_bottom_px=_px(bottom),
        ticks=tuple(XTick(_px(left + t * scale), f"{t:,.{decimals}f}") for t in ticks),
        bars=tuple(bars),
    )


def _px(value: float) -> float:
    """A coordinate to a hundredth of a pixel (a bar chart has a few dozen)."""
    return round(value, 2)


def _px_or_none(value: float | None) -> float | None:
    return None if value is None else _px(value)


def bar_chart(variants: Sequence[VariantView], path: Path, title: str) -> None:
    """Write the bar chart as SVG through ``templates/charts/bars.svg`` (every label escaped)."""
    path.write_text(render_html("charts/bars.svg", chart=bar_layout(variants, title)), encoding="utf-8")
