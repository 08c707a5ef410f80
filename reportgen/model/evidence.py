"""Per-variant evidence beyond timings: what torch.compile made (dynamo's counters) and the device's own profile.

``dynamo_snapshot`` / ``compile_info_since`` bracket one compiled variant's measurement with
``torch._dynamo.utils.counters`` (graphs compiled, graph breaks and their reasons), on every
device. ``VariantEvidence`` is what a backend adds after profiling a variant (on neuron:
neuron-explorer's device summary and counters, the NEFF count, CPU fallback ops).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.model.run import CompileInfo, DeviceEvidence, TimeBasis

MAX_REASONS = 5
MAX_REASON_CHARS = 200


@dataclass(frozen=True)
class VariantEvidence:
    """What a backend found after profiling one variant (defaults: nothing beyond the trace)."""

    device: DeviceEvidence | None = None
    time_basis: TimeBasis | None = None  # overrides the backend's when the trace lacks device events
    neff_count: int | None = None
    fallback_ops: tuple[str, ...] | None = None
    files: tuple[tuple[Path, str], ...] = ()  # (file, artifact kind) to store in the bundle


@dataclass(frozen=True)
class DynamoSnapshot:
    """Dynamo's counters at one moment: compiled graphs and graph breaks by reason."""

    unique_graphs: int
    breaks: dict[str, int]


def dynamo_snapshot(torch: Any) -> DynamoSnapshot:
    """Copy of ``torch._dynamo.utils.counters`` (stats.unique_graphs and graph_break)."""
    from torch._dynamo.utils import counters

    return DynamoSnapshot(int(counters["stats"]["unique_graphs"]), dict(counters["graph_break"]))


def compile_info_since(before: DynamoSnapshot, after: DynamoSnapshot, evidence: VariantEvidence) -> CompileInfo:
    """Graphs and breaks added between two snapshots, plus the backend's NEFF count and CPU fallbacks."""
    added = Counter(after.breaks)
    added.subtract(before.breaks)
    reasons = [_first_line(reason) for reason, n in added.most_common() if n > 0]
    source = "torch._dynamo.utils.counters (stats.unique_graphs, graph_break) over this variant's compile and runs"
    if evidence.neff_count is not None:
        source += "; NEFFs: .neff files in the capture session"
    if evidence.fallback_ops is not None:
        source += "; CPU fallbacks: torch_neuronx.get_fallback_ops() after this variant (as returned)"
    return CompileInfo(graph_count=max(0, after.unique_graphs - before.unique_graphs),
                       graph_break_count=sum(n for n in added.values() if n > 0),
                       break_reasons=tuple(reasons[:MAX_REASONS]),
                       neff_count=evidence.neff_count, fallback_ops=evidence.fallback_ops, source=source)


def _first_line(reason: str) -> str:
    """A break reason on one line: its title and, where dynamo gives one, the first line of its explanation."""
    lines = [x.strip() for x in reason.splitlines() if x.strip()]
    line = " — ".join(lines[:2]) if len(lines) > 1 and lines[1].startswith("Explanation:") else \
        (lines[0] if lines else "unknown")
    return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 3] + "..."


def eager_compile_info(evidence: VariantEvidence) -> CompileInfo | None:
    """For a variant not under torch.compile: its NEFF count and CPU fallbacks, where the backend has them."""
    if evidence.neff_count is None and evidence.fallback_ops is None:
        return None
    return CompileInfo(graph_count=0, graph_break_count=0, neff_count=evidence.neff_count,
                       fallback_ops=evidence.fallback_ops,
                       source="not under torch.compile (eager ops; the runtime may still compile NEFFs); NEFFs: "
                              ".neff files in the capture session; CPU fallbacks: torch_neuronx.get_fallback_ops()")
