"""``reportgen runs`` (one line per stored run, filtered) and ``reportgen rm`` (withdraw a run)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from reportgen.errors import ExitCode, UsageError
from reportgen.model.run import Run, VariantStatus
from reportgen.store.loader import load_run, load_store_tolerant, resolve_run_dir, run_machine
from reportgen.store.withdrawn import MAX_REASON_CHARS, Withdrawal, add_withdrawal, read_withdrawn
from reportgen.text.terminal import printable


@dataclass(frozen=True)
class RunsRequest:
    """``reportgen runs``: which store, and which runs of it."""

    store: Path
    scenario: str | None = None
    machine: str | None = None
    include_withdrawn: bool = False
    shown_as: str | None = None
    """How messages name the store (an object store's URL; ``store`` is then its local mirror)."""


@dataclass(frozen=True)
class RemoveRequest:
    """``reportgen rm``: the run to withdraw and why."""

    store: Path
    ref: str
    reason: str
    scenario: str | None = None
    machine: str | None = None



def run_line(run: Run, withdrawn: Withdrawal | None = None) -> str:
    """``id  time  device  machine  scenario  label  variants  status`` for one run (text made printable)."""
    variants = printable(",".join(v.name for v in run.variants))
    bad = [v.name for v in run.variants if v.status is not VariantStatus.OK]
    status = "ok" if not bad else "failed: " + printable(",".join(bad))
    if withdrawn is not None:
        status = f"WITHDRAWN ({printable(withdrawn.reason)})"
    label = printable(run.label) or "-"
    machine = printable(run_machine(run) or "-")
    return (f"{run.run_id}\t{run.created_utc}\t{run.device.value}\t{machine}\t{printable(run.scenario.name)}\t"
            f"{label}\t{variants}\t{status}")


def select_runs(runs: list[Run], request: RunsRequest, withdrawn: dict[str, Withdrawal]) -> list[Run]:
    """The runs ``request`` asks for, oldest first."""
    return [r for r in runs
            if (request.scenario is None or r.scenario.name == request.scenario)
            and (request.machine is None or run_machine(r) == request.machine)
            and (request.include_withdrawn or r.run_id not in withdrawn)]


def print_runs(request: RunsRequest | Path) -> int:
    """Print the selected runs oldest first, or say that there are none.

    A bundle that does not load is named on stderr (one line each, exit 3); the other runs are still listed.
    """
    if isinstance(request, Path):
        request = RunsRequest(request)
    loaded, problems = load_store_tolerant(request.store)
    withdrawn = read_withdrawn(request.store) if request.store.is_dir() else {}
    runs = select_runs(loaded, request, withdrawn)
    if not runs and not problems:
        which = " matching the filters" if request.scenario or request.machine else ""
        print(f"no runs{which} in {printable(request.shown_as or str(request.store))}; make one with 'reportgen profile'")
        return ExitCode.OK
    if runs:
        print("run_id\ttime_utc\tdevice\tmachine\tscenario\tlabel\tvariants\tstatus")
    for run in runs:
        print(run_line(run, withdrawn.get(run.run_id)))
    for problem in problems:
        print(f"reportgen: error: {printable(problem.message)}", file=sys.stderr)
    return ExitCode.BAD_INPUT if problems else ExitCode.OK


def withdraw_run(request: RemoveRequest, now: datetime | None = None,
                 record: Callable[[Path, Withdrawal], None] = add_withdrawal) -> Withdrawal:
    """Record ``request.ref``'s run as withdrawn with ``record`` (the bundle itself is kept untouched)."""
    reason = request.reason.strip()
    if not reason or len(reason) > MAX_REASON_CHARS or any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in reason):
        raise UsageError(f"reason {request.reason[:40]!r}: give one line of printable text "
                         f"(at most {MAX_REASON_CHARS} characters) saying why the run is withdrawn")
    folder = resolve_run_dir(request.store, request.ref, request.scenario, request.machine)
    run = load_run(folder)
    if folder.resolve().parent != request.store.resolve():
        raise UsageError(f"{request.ref}: not a run of the store {request.store}; pass its run id")
    read_withdrawn(request.store)  # an unreadable withdrawn.json is refused before the lock file is made
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = Withdrawal(run.run_id, stamp, reason)
    record(request.store, entry)  # under the store's lock, or an object of its own: a concurrent rm is never lost
    return entry


def remove_command(request: RemoveRequest, record: Callable[[Path, Withdrawal], None] = add_withdrawal) -> int:
    """``reportgen rm``: withdraw, and say what that means."""
    entry = withdraw_run(request, record=record)
    print(f"withdrew {entry.run_id}: {printable(entry.reason)} (kept in {printable(str(request.store))}; "
          "left out of history, latest~N and 'reportgen runs'; rebuild the site to show it)")
    return ExitCode.OK
