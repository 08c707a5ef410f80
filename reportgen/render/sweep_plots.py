"""A shape sweep's charts (PNG): achieved bandwidth across shapes, and the roofline with each variant's points."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from reportgen.analysis.sweep import SweepCell, SweepRow, SweepView
from reportgen.render.drawing import save_png, styled_figure
from reportgen.render.style import CHAR_WIDTH_EM, LEGEND_FONT_PT, clip_label, colour_for, svg_text

SWEEP_WIDTH_IN = 7.5
SWEEP_HEIGHT_IN = 4.2
ROOF_COLOUR = "#555555"


def _log_axes(ax: Axes, x_label: str, y_label: str) -> None:
    """Both axes log scale with plain-number tick labels (no mathtext: text.parse_math is off)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(_si_tick))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(True, which="major", color="#e5e5e5", lw=0.6)


def _si_tick(value: float, _pos: object = None) -> str:
    """A log tick in SI steps: 1k, 10M, 1G, 0.1."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def _legend_right(fig: Figure, ax: Axes, names: Sequence[str]) -> None:
    legend_in = max((len(clip_label(n)) for n in names), default=0) * LEGEND_FONT_PT / 72 * CHAR_WIDTH_EM
    fig.subplots_adjust(left=0.85 / SWEEP_WIDTH_IN, right=1 - (0.5 + legend_in) / SWEEP_WIDTH_IN,
                        top=1 - 0.4 / SWEEP_HEIGHT_IN, bottom=0.7 / SWEEP_HEIGHT_IN)
    ax.legend(fontsize=LEGEND_FONT_PT, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def scaling_chart(view: SweepView, path: Path, title: str) -> None:
    """Achieved bandwidth against bytes moved per call (log-log), one line per variant, the ceilings drawn.

    The memory roofs (the best copy bandwidth measured in each memory level) are dashed horizontal lines;
    the cache sizes are faint vertical lines, so each point shows which level its data lives in.
    """
    with styled_figure(SWEEP_WIDTH_IN, SWEEP_HEIGHT_IN) as fig:
        ax = fig.subplots(1, 1)
        rows = [r for r in view.rows if r.bytes_per_call > 0]
        for k, roof in enumerate(view.memory_roofs):
            ax.axhline(roof.bandwidth_bytes_per_s, color=ROOF_COLOUR, lw=1.0, ls=("--", ":", "-.", "-")[k % 4],
                       label=f"{roof.label} roof {roof.bandwidth_bytes_per_s / 1e9:.3g} GB/s")
        _variant_lines(ax, view, rows, lambda c: c.achieved_bytes_per_s)
        if rows:
            lo, hi = min(r.bytes_per_call for r in rows) / 2, max(r.bytes_per_call for r in rows) * 2
            ax.set_xlim(lo, hi)
            for level in view.cache_levels:
                if lo < level.size_bytes < hi:
                    ax.axvline(level.size_bytes, color="#bbbbbb", lw=0.8)
                    ax.annotate(f"{level.name} size", (level.size_bytes, 1.0), xycoords=("data", "axes fraction"),
                                xytext=(2, -10), textcoords="offset points", fontsize=7, color="#777777")
        _log_axes(ax, "bytes moved per call (minimum traffic, log)", "achieved bandwidth, B/s (log)")
        ax.set_title(svg_text(title), fontsize=10, loc="left")
        labels = [f"{r.label} roof {r.bandwidth_bytes_per_s / 1e9:.3g} GB/s" for r in view.memory_roofs]
        _legend_right(fig, ax, [*labels, *view.variants])
        save_png(fig, path)


def roofline_chart(view: SweepView, path: Path, title: str) -> None:
    """Arithmetic intensity against achieved FLOP/s (log-log): each variant × shape a point, the roofs drawn.

    Memory roofs are lines of slope 1 (FLOP/s = intensity × bandwidth), one per memory level; the
    compute roof is horizontal. Where both are known the memory roofs stop at the compute roof.
    """
    with styled_figure(SWEEP_WIDTH_IN, SWEEP_HEIGHT_IN) as fig:
        ax = fig.subplots(1, 1)
        points = [(r.arithmetic_intensity, c.achieved_flops_per_s, i)
                  for r in view.rows if r.arithmetic_intensity
                  for i, name in enumerate(view.variants)
                  if (c := r.cell(name)) is not None and c.achieved_flops_per_s]
        intensities = [p[0] for p in points] or [1.0]
        lo, hi = min(intensities) / 4, max(max(intensities) * 4, 1.0)
        if view.compute_roof_flops_per_s:
            hi = max(hi, 4 * view.compute_roof_flops_per_s / max(r.bandwidth_bytes_per_s for r in view.memory_roofs)
                     if view.memory_roofs else hi)
        xs = [lo * (hi / lo) ** (k / 60) for k in range(61)]
        top = view.compute_roof_flops_per_s or float("inf")
        for k, roof in enumerate(view.memory_roofs):
            ax.plot(xs, [min(x * roof.bandwidth_bytes_per_s, top) for x in xs], color=ROOF_COLOUR, lw=1.0,
                    ls=("-", "--", ":", "-.")[k % 4], label=f"{roof.label} roof {roof.bandwidth_bytes_per_s / 1e9:.3g} GB/s")
        if view.compute_roof_flops_per_s:
            ax.axhline(view.compute_roof_flops_per_s, color="#222222", lw=1.2,
                       label=f"compute roof {view.compute_roof_flops_per_s / 1e9:.3g} GFLOP/s")
        for i, name in enumerate(view.variants):
            mine = [(x, y) for x, y, j in points if j == i]
            if mine:
                ax.scatter([m[0] for m in mine], [m[1] for m in mine], s=18, color=colour_for(i), zorder=3,
                           label=clip_label(name))
        _log_axes(ax, "arithmetic intensity, FLOP per byte moved (log)", "achieved FLOP/s (log)")
        ax.set_xlim(lo, hi)
        ax.set_title(svg_text(title), fontsize=10, loc="left")
        labels = [f"{r.label} roof {r.bandwidth_bytes_per_s / 1e9:.3g} GB/s" for r in view.memory_roofs]
        _legend_right(fig, ax, [*labels, "compute roof 000 GFLOP/s", *view.variants])
        save_png(fig, path)


def _variant_lines(ax: Axes, view: SweepView, rows: list[SweepRow], value: Callable[[SweepCell], float | None]) -> None:
    """One line per variant of ``value`` against bytes moved per call, over the rows where the variant has one."""
    for i, name in enumerate(view.variants):
        pts = [(r.bytes_per_call, v) for r in rows if (c := r.cell(name)) is not None and (v := value(c))]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, lw=1.4, color=colour_for(i),
                    label=clip_label(name))


def memory_chart(view: SweepView, path: Path, title: str) -> None:
    """Peak memory per call against bytes moved per call (log-log), one line per variant, the cache sizes marked:
    where a variant's intermediates stop fitting in a cache level."""
    with styled_figure(SWEEP_WIDTH_IN, SWEEP_HEIGHT_IN) as fig:
        ax = fig.subplots(1, 1)
        rows = [r for r in view.rows if r.bytes_per_call > 0]
        _variant_lines(ax, view, rows, lambda c: c.peak_bytes)
        for level in view.cache_levels:
            ax.axhline(level.size_bytes, color="#bbbbbb", lw=0.8)
            ax.annotate(f"{level.name} size", (0.0, level.size_bytes), xycoords=("axes fraction", "data"),
                        xytext=(2, 2), textcoords="offset points", fontsize=7, color="#777777")
        _log_axes(ax, "bytes moved per call (minimum traffic, log)", "peak memory above inputs, B (log)")
        ax.set_title(svg_text(title), fontsize=10, loc="left")
        _legend_right(fig, ax, view.variants)
        save_png(fig, path)
