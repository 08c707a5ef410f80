"""Which ceiling applies to a measurement: the bandwidth for its working set, the memory level it lives in.

Pure functions over ``DevicePeak``. On the CPU a copy is measured at several working-set sizes at
profile time (``DevicePeak.bandwidth_curve``): a call whose data fits in a cache runs against that
cache's bandwidth, not DRAM's, and comparing it with a DRAM-sized copy gives "% of peak" above 100.
The ceiling for a working set is the fastest copy measured in the same memory level (by the CPU's
cache sizes), else the copy nearest in size. A fraction above 1 still means that ceiling is wrong
for this call, and is shown as such, never as a plain percentage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.model import BandwidthPoint, CacheLevel, DevicePeak

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

    With cache levels: the fastest point measured in the same memory level as the call (a copy there is
    served by the same cache). Otherwise, or when no point lies in that level: the point nearest in size
    (on a log scale; the larger of two equally near ones, the more conservative ceiling).
    """
    if not curve or working_set_bytes <= 0:
        return None
    level = memory_level(working_set_bytes, levels)
    if level is not None:
        same = [p for p in curve if memory_level(p.working_set_bytes, levels) == level]
        if same:
            return max(same, key=lambda p: (p.bandwidth_bytes_per_s, p.working_set_bytes))
    return min(curve, key=lambda p: (round(abs(math.log(p.working_set_bytes / working_set_bytes)), 9),
                                     -p.working_set_bytes))


def ceiling_for(peak: DevicePeak, working_set_bytes: int) -> Ceiling:
    """The bandwidth ceiling for a call moving ``working_set_bytes``: from the curve where there is one."""
    level = memory_level(working_set_bytes, peak.cache_levels)
    point = curve_bandwidth(working_set_bytes, peak.bandwidth_curve, peak.cache_levels)
    if point is None:
        return Ceiling(peak.bandwidth_bytes_per_s, level, peak.source)
    where = f"in {level}" if level and memory_level(point.working_set_bytes, peak.cache_levels) == level else "nearest in size"
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
