"""``reportgen runs``'s request (the listing reads the catalog: ``catalog.listing``) and ``reportgen rm`` (withdraw a run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from reportgen.errors import ExitCode, UsageError
from reportgen.store.loader import load_run, resolve_run_dir
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
