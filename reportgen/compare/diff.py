"""``compare_runs``: two runs -> a ``Comparison`` (refusals, per-variant changes, op diffs, environment warnings)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from reportgen.analysis.drift import minutes_apart
from reportgen.analysis.stats import METHOD
from reportgen.compare.memory import DEFAULT_MEMORY_THRESHOLD_PCT, memory_change
from reportgen.compare.model import Comparison, Pairing, RunRef, VersionDifference
from reportgen.compare.ops import op_diffs
from reportgen.compare.variants import Sides, drift_note, shape_changes, variant_change
from reportgen.devices import compared_environment_fields
from reportgen.errors import CompareError, UsageError
from reportgen.model.run import Run
from reportgen.text.markdown import clip

ENVIRONMENT_FIELDS = ("torch_version", *compared_environment_fields(), "python_version", "device_name", "cpu_model")
"""Software/hardware fingerprint fields whose difference is warned about, not refused."""


def compare_runs(base: Run, head: Run, threshold_pct: float, history: Sequence[Run] = (),
                 memory_threshold_pct: float = DEFAULT_MEMORY_THRESHOLD_PCT) -> Comparison:
    """Compare ``head`` against ``base``; CompareError when device or scenario differ.

    ``history``: the store's runs (any order; base and head may be among them) from which the drift between
    two separate runs is estimated. Without enough of it the drift is unknown (see ``reportgen.compare.variants``).
    """
    if not math.isfinite(threshold_pct) or threshold_pct < 0:
        raise UsageError(f"threshold {threshold_pct!r}: must be a finite number of percent >= 0")
    if not math.isfinite(memory_threshold_pct) or memory_threshold_pct < 0:
        raise UsageError(f"memory threshold {memory_threshold_pct!r}: must be a finite number of percent >= 0")
    check_comparable(base, head)
    pairing = Pairing.INTERLEAVED if is_ab_pair(base, head) else Pairing.SEPARATE
    sides = Sides(base, head, tuple(drift_history(history, head)), pairing)
    b, h = {v.name: v for v in base.variants}, {v.name: v for v in head.variants}
    names = list(b) + [n for n in h if n not in b]
    changes = tuple(variant_change(b.get(n), h.get(n), threshold_pct, sides) for n in names)
    diffs = op_diffs(b, h, names)
    minutes = minutes_apart(base.created_utc, head.created_utc)
    return Comparison(
        base=run_ref(base),
        head=run_ref(head),
        scenario=base.scenario.name,
        threshold_pct=threshold_pct,
        variants=changes,
        op_diffs=diffs,
        warnings=version_differences(base, head),
        method=METHOD,
        pairing=pairing,
        minutes_apart=minutes,
        drift_note=drift_note(pairing, minutes, changes, base.ab.pair_id if base.ab else None),
        shapes=shape_changes(base, head, changes),
        memory=tuple(memory_change(n, b[n].memory, h[n].memory, memory_threshold_pct) for n in names
                     if n in b and n in h and (b[n].memory or h[n].memory)),  # runs from before schema 5: none
        memory_threshold_pct=memory_threshold_pct,
    )


def is_ab_pair(base: Run, head: Run) -> bool:
    """True when ``base`` and ``head`` are the two sides of one interleaved ``reportgen ab`` pair."""
    return (base.ab is not None and head.ab is not None and base.ab.pair_id == head.ab.pair_id
            and base.ab.side != head.ab.side and base.ab.partner_run_id == head.run_id
            and head.ab.partner_run_id == base.run_id)


def drift_history(runs: Sequence[Run], head: Run) -> list[Run]:
    """The runs a drift estimate may use: separate runs only (no A/B side, whose samples are interleaved), and
    never ``head`` itself (the change being judged must not count as drift)."""
    return [r for r in runs if r.ab is None and r.run_id != head.run_id]


def check_comparable(base: Run, head: Run) -> None:
    """Refuse runs measured on different devices or with different scenario parameters."""
    pairs: list[tuple[str, object, object]] = [
        ("device", base.device.value, head.device.value),
        ("environment.machine", base.environment.machine, head.environment.machine),
        ("scenario.name", base.scenario.name, head.scenario.name),
    ]
    bp, hp = base.scenario.parameters, head.scenario.parameters
    pairs += [(f"scenario.parameters.{k}", bp.get(k), hp.get(k)) for k in sorted(set(bp) | set(hp))]
    for field, b, h in pairs:
        if b != h:
            raise CompareError(
                f"cannot compare {base.run_id} (base) with {head.run_id} (head): field '{clip(field, 60)}' differs "
                f"({show_value(b)} vs {show_value(h)}); compare runs of the same device and scenario parameters"
            )


def run_ref(run: Run) -> RunRef:
    """The identifying fields of ``run``."""
    return RunRef(run.run_id, run.label, run.created_utc, run.git.sha, run.device.value)


def version_differences(base: Run, head: Run) -> tuple[VersionDifference, ...]:
    """Environment fields (software versions, device and CPU names) that differ between the runs."""
    out = []
    for name in ENVIRONMENT_FIELDS:
        b, h = base.environment.field_text(name), head.environment.field_text(name)
        if b != h:
            out.append(VersionDifference(name, b, h))
    return tuple(out)


def show_value(value: object) -> str:
    """``value`` as a message shows it: quoted and clipped, or ``absent``."""
    return "absent" if value is None else repr(clip(str(value), 60))
