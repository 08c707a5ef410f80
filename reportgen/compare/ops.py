"""Op-table differences of a variant between base and head: ops added or gone, calls changed, self-time changes."""

from __future__ import annotations

from reportgen.compare.model import OpChange, OpChangeKind, OpDiff
from reportgen.model.run import OpRow, TimeBasis, VariantResult

MAX_OP_CHANGES = 10
"""How many of the largest self-time changes each variant's op diff keeps."""


def op_diffs(base: dict[str, VariantResult], head: dict[str, VariantResult], names: list[str]
             ) -> tuple[OpDiff, ...]:
    """Op-table differences of every variant present on both sides (empty ones left out)."""
    out = []
    for n in names:
        b, h = base.get(n), head.get(n)
        if b is not None and h is not None and (b.ops or h.ops):
            d = op_diff(b, h)
            if not d.empty:
                out.append(d)
    return tuple(out)


def op_diff(base: VariantResult, head: VariantResult) -> OpDiff:
    """Ops added or gone, calls changed, and the largest self-time changes, per profiled step."""
    b, h = _op_totals(base), _op_totals(head)
    changes = [
        OpChange(
            name=name,
            kind=_op_kind(name in b, name in h),
            base_calls_per_step=b.get(name, (0.0, 0.0))[0],
            head_calls_per_step=h.get(name, (0.0, 0.0))[0],
            base_self_us_per_step=b.get(name, (0.0, 0.0))[1],
            head_self_us_per_step=h.get(name, (0.0, 0.0))[1],
        )
        for name in list(b) + [n for n in h if n not in b]
    ]
    by_size = sorted((c for c in changes if c.delta_self_us != 0), key=lambda c: (-abs(c.delta_self_us), c.name))
    return OpDiff(
        variant=base.name,
        base_time_basis=base.time_basis,
        head_time_basis=head.time_basis,
        added=tuple(c for c in changes if c.kind is OpChangeKind.ADDED),
        removed=tuple(c for c in changes if c.kind is OpChangeKind.REMOVED),
        calls_changed=tuple(c for c in changes if c.kind is OpChangeKind.CHANGED
                            and c.base_calls_per_step != c.head_calls_per_step),
        largest_self_changes=tuple(by_size[:MAX_OP_CHANGES]),
    )


def _op_kind(in_base: bool, in_head: bool) -> OpChangeKind:
    return OpChangeKind.CHANGED if in_base and in_head else OpChangeKind.REMOVED if in_base else OpChangeKind.ADDED


def _op_totals(v: VariantResult) -> dict[str, tuple[float, float]]:
    """Calls and self time (on the variant's time basis) per profiled step, summed by op name."""
    steps = v.profiled_steps if v.profiled_steps > 0 else 1
    totals: dict[str, tuple[float, float]] = {}
    for row in v.ops:
        calls, self_us = totals.get(row.name, (0.0, 0.0))
        totals[row.name] = (calls + row.calls, self_us + _self_us(row, v.time_basis))
    return {k: (c / steps, s / steps) for k, (c, s) in totals.items()}


def _self_us(row: OpRow, basis: TimeBasis) -> float:
    return row.self_device_us if basis is TimeBasis.DEVICE else row.self_cpu_us
