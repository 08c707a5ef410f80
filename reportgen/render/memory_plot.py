"""A variant's memory timeline (PNG): live bytes above the call's start over one measured call, a step line with
the peak marked, drawn under the charts' fixed style."""

from __future__ import annotations

from pathlib import Path

from reportgen.model.memory import VariantMemory
from reportgen.render.drawing import save_png, styled_figure
from reportgen.render.style import colour_for, svg_text
from reportgen.text.formatting import fmt_bytes

MEMORY_WIDTH_IN = 11.0
MEMORY_HEIGHT_IN = 2.4
UNITS = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))


def _unit(top: int) -> tuple[int, str]:
    return next((u for u in UNITS if top >= u[0]), UNITS[-1])


def memory_timeline_chart(memory: VariantMemory, path: Path, title: str, index: int = 0) -> None:
    """Live bytes over the call as a filled step line (each allocation or free a step), the peak dashed."""
    points = memory.timeline
    top = max((p.live_bytes for p in points), default=0)
    scale, unit = _unit(max(top, 1))
    end_us = max((p.t_us for p in points), default=0.0)
    time_scale, time_unit = (1000.0, "ms") if end_us >= 10_000 else (1.0, "µs")
    xs = [p.t_us / time_scale for p in points]
    ys = [p.live_bytes / scale for p in points]
    colour = colour_for(index)
    with styled_figure(MEMORY_WIDTH_IN, MEMORY_HEIGHT_IN) as fig:
        fig.subplots_adjust(left=1.1 / MEMORY_WIDTH_IN, right=1 - 0.45 / MEMORY_WIDTH_IN,
                            top=1 - 0.35 / MEMORY_HEIGHT_IN, bottom=0.55 / MEMORY_HEIGHT_IN)
        ax = fig.subplots(1, 1)
        ax.fill_between(xs, ys, step="post", color=colour, alpha=0.25, lw=0)
        ax.step(xs, ys, where="post", color=colour, lw=1.2)
        if top > 0:
            ax.axhline(top / scale, color="#999999", lw=0.8, ls="--")
            ax.text(xs[-1] if xs else 0.0, top / scale, f"peak {fmt_bytes(top)}", ha="right", va="bottom", fontsize=8)
        ax.set_ylim(0, max(top / scale, 1e-9) * 1.15)
        ax.set_xlim(0, max(end_us / time_scale, 1e-9))
        ax.set_ylabel(f"live {unit} above inputs")
        ax.set_xlabel(f"time since the call began ({time_unit})")
        ax.set_title(svg_text(title), fontsize=10, loc="left")
        save_png(fig, path)
