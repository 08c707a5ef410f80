"""Interval arithmetic on numpy arrays for the breakdowns: unions and lengths inside windows, no Python loop per event.

A trace has millions of events, so intervals are held as sorted arrays and every pass is a C-level numpy call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]
Indices = NDArray[np.intp]
EMPTY: Floats = np.zeros(0)


@dataclass(frozen=True)
class Span:
    """Sorted, disjoint intervals with prefix sums of their lengths: the length inside windows by binary search."""

    starts: Floats
    ends: Floats

    @property
    def total(self) -> float:
        """Length of all intervals."""
        return float(np.sum(self.ends - self.starts))

    def measure(self, lo: Floats, hi: Floats) -> Floats:
        """Length inside each window [lo[k], hi[k])."""
        prefix = np.concatenate(([0.0], np.cumsum(self.ends - self.starts)))
        i = np.searchsorted(self.ends, lo, side="right")  # first interval ending after lo
        j = np.searchsorted(self.starts, hi, side="left")  # intervals [i, j) start before hi
        inside = i < j
        total = prefix[j] - prefix[i]
        if len(self.starts):
            first = np.minimum(i, len(self.starts) - 1)
            last = np.maximum(j - 1, 0)
            total = total - np.maximum(lo - self.starts[first], 0.0) - np.maximum(self.ends[last] - hi, 0.0)
        return np.where(inside, np.maximum(total, 0.0), 0.0)


def merge(starts: Floats, ends: Floats) -> tuple[Floats, Floats, Indices]:
    """Union of intervals sorted by start (touching ones join): merged starts, ends, index opening each."""
    n = len(starts)
    if n == 0:
        return EMPTY, EMPTY, np.zeros(0, dtype=np.intp)
    reach = np.maximum.accumulate(ends)
    firsts = np.flatnonzero(np.concatenate(([True], starts[1:] > reach[:-1])))
    lasts = np.append(firsts[1:] - 1, n - 1)
    return starts[firsts], reach[lasts], firsts


def union(a: Span, b: Span) -> Span:
    """The union of two sorted, disjoint interval sets."""
    if not len(b.starts):
        return a
    if not len(a.starts):
        return b
    starts = np.concatenate((a.starts, b.starts))
    order = np.argsort(starts, kind="stable")  # two sorted runs: merged in linear time
    merged_s, merged_e, _ = merge(starts[order], np.concatenate((a.ends, b.ends))[order])
    return Span(merged_s, merged_e)


def floats(values: Iterable[float], count: int) -> Floats:
    return np.fromiter(values, dtype=np.float64, count=count)
