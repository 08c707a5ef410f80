"""How fast this shared machine runs right now: recorded beside every benchmark figure.

This VM's speed drifts by up to 1.5x within minutes and the load average does not show it; the
seconds a fixed pure-Python loop takes do.
"""

from __future__ import annotations

import time


def reference_loop_s() -> float:
    """Seconds for a fixed pure-Python loop (about 0.17 s on this VM at its fastest)."""
    t0 = time.perf_counter()
    sum(i * i for i in range(3_000_000))
    return round(time.perf_counter() - t0, 3)
