"""Timeline lanes and the rules that put a trace category in one (data, merged from every device).

The one lane enum: the trace reader tags events with it, the op table and the timeline layout
read it. Each device module declares its own ``LaneRules``; the registry merges them into one
``LaneClassifier``. Framework categories are Kineto's and belong to no device.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Lane(str, Enum):
    """Which row of a timeline an event belongs to, top to bottom as trace viewers stack them."""

    FRAMEWORK = "framework"
    RUNTIME = "runtime"
    DEVICE = "device"
    OTHER = "other"


FRAMEWORK_CATEGORIES = frozenset({
    "cpu_op", "user_annotation", "python_function", "operator", "cpu_instant_event", "python", "fwdbwd",
})
"""Kineto's host-side activity names (libkineto ActivityType.cpp) plus older and non-Kineto spellings."""

RUNTIME_CATEGORIES = frozenset({"runtime", "driver"})
RUNTIME_SUFFIXES = ("_runtime", "_driver")
"""Kineto names runtime and driver calls ``<device>_runtime`` / ``<device>_driver`` for every device."""

KINETO_GPU_DEVICE_CATEGORIES = frozenset({
    "kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset",
})
KINETO_GPU_WORK_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})
"""Device-lane categories that are work on the device (not annotations, syncs or profiler ranges)."""


@dataclass(frozen=True)
class CategoryPattern:
    """Categories that contain ``contains`` (and one of ``and_any``, if given) or start with ``prefix``."""

    lane: Lane
    contains: str = ""
    prefix: str = ""
    and_any: tuple[str, ...] = ()
    work: bool = False
    """True when a DEVICE match is device work (counted in device time and kernel counts)."""

    def matches(self, category: str) -> bool:
        """True when the lowercase ``category`` fits this pattern."""
        if self.prefix and not category.startswith(self.prefix):
            return False
        if self.contains and self.contains not in category:
            return False
        return not self.and_any or any(k in category for k in self.and_any)


@dataclass(frozen=True)
class LaneRules:
    """One device's trace categories (lowercase): exact names first, then patterns in order."""

    device_categories: frozenset[str] = frozenset()
    device_work_categories: frozenset[str] = frozenset()
    runtime_categories: frozenset[str] = frozenset()
    patterns: tuple[CategoryPattern, ...] = ()


class LaneClassifier:
    """Lane and device-work flag of a category under a set of rules (cached: traces repeat categories)."""

    def __init__(self, rules: Iterable[LaneRules]) -> None:
        rules = tuple(rules)
        self.device = frozenset().union(*(r.device_categories for r in rules))
        self.work = frozenset().union(*(r.device_work_categories for r in rules))
        self.runtime = RUNTIME_CATEGORIES.union(*(r.runtime_categories for r in rules))
        self.patterns = tuple(p for r in rules for p in r.patterns)
        self.classify = functools.lru_cache(maxsize=4096)(self._classify)

    def _classify(self, category: str) -> tuple[Lane, bool]:
        cat = category.lower()
        if cat in FRAMEWORK_CATEGORIES:
            return Lane.FRAMEWORK, False
        if cat in self.device:
            return Lane.DEVICE, cat in self.work
        if cat.endswith(RUNTIME_SUFFIXES) or cat in self.runtime:
            return Lane.RUNTIME, False
        for pattern in self.patterns:
            if pattern.matches(cat):
                return pattern.lane, pattern.lane is Lane.DEVICE and pattern.work
        return Lane.OTHER, False


OTHER_KINETO_RULES = LaneRules(device_categories=frozenset({"hpu_op"}))
"""Device categories Kineto writes for devices reportgen has no module for (shown in the device lane)."""
