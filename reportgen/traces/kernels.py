"""The kernel tables of a trace's breakdown: device work grouped by kernel name, its kind, and the ops launching it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from reportgen.model.breakdown import (
    COMMUNICATION_RE,
    MAX_DRILLDOWN_OPS,
    MAX_KERNEL_ROWS,
    MAX_KERNELS_PER_OP,
    KernelStat,
    OpKernel,
    OpKernels,
    WorkKind,
)
from reportgen.traces.events import TraceEvent
from reportgen.traces.intervals import Floats, Indices

_NAME = attrgetter("name")


def work_kind(e: TraceEvent) -> WorkKind:
    """Memcpy/memset by category, communication by kernel name, else compute."""
    return work_kind_of(e.name, e.category)


def work_kind_of(name: str, category: str) -> WorkKind:
    """The kind of device work called ``name`` in ``category``."""
    cat = category.lower()
    if "memcpy" in cat:
        return WorkKind.MEMCPY
    if "memset" in cat:
        return WorkKind.MEMSET
    return WorkKind.COMMUNICATION if COMMUNICATION_RE.search(name) else WorkKind.COMPUTE


@dataclass(frozen=True)
class KernelNames:
    """Device work grouped by kernel name (ids of the reader's shared strings, so no hashing of long names)."""

    names: list[str]
    """The name of each group."""
    index: Indices
    """The group of each device work event."""
    kinds: list[WorkKind]


def kernel_names(device: list[TraceEvent]) -> KernelNames:
    """Device work grouped by kernel name, in the order the names first appear; a name's kind is its first event's."""
    n = len(device)
    if n == 0:
        return KernelNames([], np.zeros(0, dtype=np.intp), [])
    _, first, index = np.unique(np.fromiter(map(id, map(_NAME, device)), dtype=np.int64, count=n),
                                return_index=True, return_inverse=True)
    # Equal names are almost always one shared string; merge the rare equal copies by value.
    canon: dict[str, int] = {}
    names: list[str] = []
    kinds: list[WorkKind] = []
    remap = np.empty(len(first), dtype=np.intp)
    for group in np.argsort(first, kind="stable").tolist():  # groups in the order their names first appear
        e = device[int(first[group])]
        c = canon.get(e.name)
        if c is None:
            c = canon[e.name] = len(names)
            names.append(e.name)
            kinds.append(work_kind(e))
        remap[group] = c
    return KernelNames(names, remap[index], kinds)


def kernel_tables(durations: Floats, names: KernelNames, launchers: Sequence[str | None]
                  ) -> tuple[tuple[KernelStat, ...], int, float, tuple[OpKernels, ...]]:
    """Per kernel name: count and times, kind, main launcher; per launching op: its kernels."""
    n = len(names.index)
    if n == 0:
        return (), 0, 0.0, ()
    total_all = float(durations.sum())
    groups = len(names.names)
    counts = np.bincount(names.index, minlength=groups)
    totals = np.bincount(names.index, weights=durations, minlength=groups).tolist()
    by_name = np.argsort(names.index, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(counts)[:-1]))
    mins = np.minimum.reduceat(durations[by_name], bounds).tolist()
    maxs = np.maximum.reduceat(durations[by_name], bounds).tolist()
    who_ids, who_first, who_index = np.unique(np.fromiter(map(id, launchers), dtype=np.int64, count=n),
                                              return_index=True, return_inverse=True)
    pair_keys, pair_index = np.unique(names.index * len(who_ids) + who_index, return_inverse=True)
    pair_totals = np.bincount(pair_index, weights=durations, minlength=len(pair_keys)).tolist()
    pair_counts = np.bincount(pair_index, minlength=len(pair_keys)).tolist()
    launched: dict[int, dict[str, float]] = {}
    per_op_acc: dict[str, dict[int, list[float]]] = {}
    for key, total, count in zip(pair_keys.tolist(), pair_totals, pair_counts, strict=True):
        k, w = divmod(key, len(who_ids))
        who = launchers[int(who_first[w])]
        by_who = launched.setdefault(k, {})
        by_who[who or ""] = by_who.get(who or "", 0.0) + total
        if who is not None:
            acc = per_op_acc.setdefault(who, {}).setdefault(k, [0, 0.0])
            acc[0] += count
            acc[1] += total
    per_op = {op: [OpKernel(names.names[k], int(a[0]), a[1]) for k, a in ks.items()] for op, ks in per_op_acc.items()}
    stats = [KernelStat(name, names.kinds[k], int(counts[k]), totals[k], totals[k] / int(counts[k]), mins[k], maxs[k],
                        totals[k] / total_all if total_all > 0 else 0.0, _main_launcher(launched[k]))
             for k, name in enumerate(names.names)]
    stats.sort(key=lambda s: (-s.total_us, s.name))
    shown, hidden = stats[:MAX_KERNEL_ROWS], stats[MAX_KERNEL_ROWS:]
    ops = []
    for op, lines in per_op.items():
        lines.sort(key=lambda line: (-line.total_us, line.name))
        ops.append(OpKernels(op, sum(line.total_us for line in lines), tuple(lines[:MAX_KERNELS_PER_OP]),
                             max(len(lines) - MAX_KERNELS_PER_OP, 0)))
    ops.sort(key=lambda o: (-o.total_us, o.op))
    return tuple(shown), len(hidden), sum(s.total_us for s in hidden), tuple(ops[:MAX_DRILLDOWN_OPS])


def _main_launcher(times: dict[str, float]) -> str:
    """The launcher with the most time ('' = not linked), ties broken by name."""
    return min(times.items(), key=lambda t: (-t[1], t[0]))[0]
