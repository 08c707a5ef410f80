"""Which CPUs a process may run on: read (for the environment fingerprint), parsed from ``--cpus``, and set (the
A/B workers, so that both sides share the same CPUs and a background process is moved off them by the kernel).

Linux only (``os.sched_getaffinity``); elsewhere reading answers None and pinning is refused up front.
"""

from __future__ import annotations

import os
from pathlib import Path

from reportgen.errors import UsageError


def allowed_cpus() -> frozenset[int] | None:
    """CPUs this process may run on; None where the platform cannot say."""
    getter = getattr(os, "sched_getaffinity", None)
    return None if getter is None else frozenset(getter(0))


def parse_cpus(text: str) -> tuple[int, ...]:
    """``"1"``, ``"0,2"`` or ``"2-3"`` (as ``taskset -c``) -> sorted CPU numbers; a UsageError names ``cpus``."""
    cpus: set[int] = set()
    try:
        for part in (p.strip() for p in text.split(",")):
            low, sep, high = part.partition("-")
            first, last = int(low), int(high) if sep else int(low)
            if first < 0 or last < first:
                raise ValueError(part)
            cpus.update(range(first, last + 1))
    except ValueError:
        raise UsageError(f"cpus {text!r}: expected CPU numbers such as 1, 0,2 or 2-3", field="cpus") from None
    return tuple(sorted(cpus))


def check_cpus(cpus: tuple[int, ...] | None) -> None:
    """Refuse CPUs this process may not use (or pinning where the platform has none), naming ``cpus``."""
    if cpus is None:
        return
    allowed = allowed_cpus()
    shown = ",".join(str(c) for c in cpus)
    if allowed is None or not hasattr(os, "sched_setaffinity"):
        raise UsageError(f"cpus {shown}: pinning to CPUs needs Linux; leave --cpus out here", field="cpus")
    if not cpus:
        raise UsageError("cpus: name at least one CPU, e.g. 1", field="cpus")
    missing = [c for c in cpus if c not in allowed]
    if missing:
        mine = ",".join(str(c) for c in sorted(allowed))
        raise UsageError(f"cpus {shown}: CPU {missing[0]} is not available to this process (it may use {mine}); "
                         "name some of those", field="cpus")


def pin_process(cpus: tuple[int, ...]) -> None:
    """Restrict every thread of this process (and the threads it starts later) to ``cpus``."""
    tasks = Path("/proc/self/task")
    tids = [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
