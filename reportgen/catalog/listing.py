"""``reportgen runs`` read from the catalog: one line per stored run, filtered, without parsing every run.json."""

from __future__ import annotations

import sys

from reportgen.analysis.history import RunDigest
from reportgen.catalog.sync import Catalog, sync
from reportgen.errors import ExitCode
from reportgen.model.run import VariantStatus
from reportgen.store.loader import check_is_store, list_store
from reportgen.store.runs import RunsRequest
from reportgen.store.withdrawn import Withdrawal, read_withdrawn
from reportgen.text.terminal import printable

HEADER = "run_id\ttime_utc\tdevice\tmachine\tscenario\tlabel\tvariants\tstatus"


def run_line(d: RunDigest, withdrawn: Withdrawal | None = None) -> str:
    """``id  time  device  machine  scenario  label  variants  status`` for one run (text made printable)."""
    variants = printable(",".join(v.name for v in d.variants))
    bad = [v.name for v in d.variants if v.status is not VariantStatus.OK]
    status = "ok" if not bad else "failed: " + printable(",".join(bad))
    if withdrawn is not None:
        status = f"WITHDRAWN ({printable(withdrawn.reason)})"
    return (f"{d.run_id}\t{d.created_utc}\t{d.device.value}\t{printable(d.machine or '-')}\t{printable(d.scenario)}\t"
            f"{printable(d.label) or '-'}\t{variants}\t{status}")


def selected_runs(request: RunsRequest) -> tuple[Catalog, list[str], dict[str, Withdrawal]]:
    """The store's catalog brought up to date, the ids of the runs ``request`` selects (scenario, machine, withdrawn
    or not) and the store's withdrawals; a folder that is not a store is refused in one line."""
    cat = sync(request.store)
    if not cat.entries:
        check_is_store(request.store, list_store(request.store).names)
    withdrawn = read_withdrawn(request.store) if request.store.is_dir() else {}
    ids = [i for i, e in cat.entries.items()
           if (request.scenario is None or e.run.scenario == request.scenario)
           and (request.machine is None or e.run.machine == request.machine)
           and (request.include_withdrawn or i not in withdrawn)]
    return cat, ids, withdrawn


def print_runs(request: RunsRequest) -> int:
    """Print the selected runs oldest first, or say that there are none.

    A bundle that does not load is named on stderr (one line each, exit 3); the other runs are still listed.
    """
    cat, ids, withdrawn = selected_runs(request)
    if not ids and not cat.problems:
        which = " matching the filters" if request.scenario or request.machine else ""
        print(f"no runs{which} in {printable(request.shown_as or str(request.store))}; make one with 'reportgen profile'")
        return ExitCode.OK
    if ids:
        print(HEADER)
    for d in cat.digests(ids):
        print(run_line(d, withdrawn.get(d.run_id)))
    for problem in cat.problems:
        print(f"reportgen: error: {printable(problem.message)}", file=sys.stderr)
    return ExitCode.BAD_INPUT if cat.problems else ExitCode.OK
