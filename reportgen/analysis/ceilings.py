"""Which ceiling applies to a measurement: the bandwidth for its working set, the memory level it lives in.

Pure functions over ``DevicePeak``. On the CPU a copy is measured at several working-set sizes at
profile time (``DevicePeak.bandwidth_curve``): a call whose data fits in a cache runs against that
cache's bandwidth, not DRAM's, and comparing it with a DRAM-sized copy gives "% of peak" above 100.
The ceiling for a working set is the fastest copy measured in its memory level or a slower one (by the
CPU's cache sizes: a cache serves its data at least as fast as the memory behind it), else the copy
nearest in size. A fraction above 1 still means that ceiling is wrong
for this call, and is shown as such, never as a plain percentage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.model.run import BandwidthPoint, CacheLevel, DevicePeak

DRAM = "DRAM"
"""The memory level of a working set larger than every cache (also for devices, where it is HBM or GDDR)."""
OVER_CEILING = 1.0
"""A fraction of the ceiling above this is a ceiling problem, not a fast kernel."""


@dataclass(frozen=True)
class Ceiling:
    """The bandwidth a call with a given working set is compared against, and where that figure comes from."""

    bandwidth_bytes_per_s: float | None
    level: str | None
    """The memory level the working set fits in (``L2``, ``L3``, ``DRAM``); None when the caches are unknown."""
    source: str


def memory_level(working_set_bytes: int, levels: Sequence[CacheLevel]) -> str | None:
    """The smallest cache level holding ``working_set_bytes``; ``DRAM`` past the last; None with no levels."""
    if not levels:
        return None
    for level in sorted(levels, key=lambda c: c.size_bytes):
        if working_set_bytes <= level.size_bytes:
            return level.name
    return DRAM


def curve_bandwidth(working_set_bytes: int, curve: Sequence[BandwidthPoint], levels: Sequence[CacheLevel] = ()
                    ) -> BandwidthPoint | None:
    """The curve point that bounds a call moving ``working_set_bytes``.

    With cache levels: the fastest copy measured in the call's memory level or any slower one (data a
    cache holds is served at least as fast as the memory behind it, so a slower level's copy also bounds
    it from below; on a busy machine one level's copies can come out far too low). Otherwise, or when no
    copy lies in those levels: the copy nearest in size (log scale; of two equally near, the larger).
    """
    if not curve or working_set_bytes <= 0:
        return None
    level = memory_level(working_set_bytes, levels)
    if level is not None:
        rank = _level_rank(levels)
        same_or_slower = [p for p in curve if rank[memory_level(p.working_set_bytes, levels) or DRAM] >= rank[level]]
        if same_or_slower:
            return max(same_or_slower, key=lambda p: (p.bandwidth_bytes_per_s, p.working_set_bytes))
    return min(curve, key=lambda p: (round(abs(math.log(p.working_set_bytes / working_set_bytes)), 9),
                                     -p.working_set_bytes))


def _level_rank(levels: Sequence[CacheLevel]) -> dict[str, int]:
    """Memory levels from fastest (0) to DRAM (last)."""
    names = [c.name for c in sorted(levels, key=lambda c: c.size_bytes)]
    return {**{n: i for i, n in enumerate(names)}, DRAM: len(names)}


def ceiling_for(peak: DevicePeak, working_set_bytes: int) -> Ceiling:
    """The bandwidth ceiling for a call moving ``working_set_bytes``: from the curve where there is one."""
    level = memory_level(working_set_bytes, peak.cache_levels)
    point = curve_bandwidth(working_set_bytes, peak.bandwidth_curve, peak.cache_levels)
    if point is None:
        return Ceiling(peak.bandwidth_bytes_per_s, level, peak.source)
    point_level = memory_level(point.working_set_bytes, peak.cache_levels)
    rank = _level_rank(peak.cache_levels)
    if level is not None and point_level == level:
        where = f"in {level}"
    elif level is not None and point_level is not None and rank[point_level] > rank[level]:
        where = f"in {point_level}, slower than {level}"
    else:
        where = "nearest in size"
    return Ceiling(point.bandwidth_bytes_per_s, level,
                   f"copy bandwidth measured with a {size_text(point.working_set_bytes)} working set ({where}; this "
                   f"call moves {size_text(working_set_bytes)})")


def is_over_ceiling(fraction: float | None) -> bool:
    """True when a fraction of the ceiling exceeds 100 %: the ceiling is wrong for that call."""
    return fraction is not None and fraction > OVER_CEILING


def size_text(n: int) -> str:
    """A byte count in binary units: 2 MiB, 32 KiB."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} B"
