"""Memory per call of a variant: peak above the inputs, bytes allocated, allocations, the ops that allocate most
and a timeline of one call, each figure with the source it came from.

Measured by ``reportgen.profile.memory`` outside the timed samples; compared by ``reportgen.compare.memory``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AllocatorCount:
    """A device allocator's own figures over one call: peak above the bytes live when it began, bytes and
    allocations it served (CUDA: ``torch.cuda.max_memory_allocated`` and ``memory_stats``)."""

    peak_bytes: int
    allocated_bytes: int
    allocation_count: int


@dataclass(frozen=True)
class MemoryPoint:
    """Bytes live above the call's start, ``t_us`` after the call began (one allocation or free)."""

    t_us: float
    live_bytes: int


@dataclass(frozen=True)
class MemoryOp:
    """The allocations made inside one op (innermost op around them) during the measured call."""

    name: str
    allocated_bytes: int
    allocation_count: int


@dataclass(frozen=True)
class VariantMemory:
    """One call's memory. ``unavailable`` says why there are no figures (then they are None).

    ``exact``: two measured calls gave the same three figures, so a comparison may treat any change as real."""

    source: str
    peak_bytes: int | None = None
    """Most bytes live at once above those live when the call began (the inputs); the output counts."""
    allocated_bytes: int | None = None
    allocation_count: int | None = None
    exact: bool = False
    unavailable: str | None = None
    ops: tuple[MemoryOp, ...] = ()
    """The ops that allocate most, most bytes first (from the profiler's memory events)."""
    timeline: tuple[MemoryPoint, ...] = ()
    """Live bytes over one call, from the profiler's memory events (at most ``MAX_TIMELINE_POINTS``)."""
    timeline_source: str = ""


MAX_TIMELINE_POINTS = 400
"""Points kept of a call's memory timeline; more events are thinned to the highest point of each stretch."""
MAX_MEMORY_OPS = 10
"""Ops listed per variant as allocating most."""
