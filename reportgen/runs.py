"""``reportgen runs``: one line per stored run."""

from __future__ import annotations

import sys
from pathlib import Path

from reportgen.bundle import load_store_tolerant
from reportgen.errors import ExitCode
from reportgen.model import Run, VariantStatus


def printable(text: str) -> str:
    """``text`` safe for one terminal line: control, format (bidi) and separator characters become U+FFFD."""
    return "".join(c if c.isprintable() or c == " " else "\ufffd" for c in text)


def run_line(run: Run) -> str:
    """``id  time  device  label  variants  status`` for one run (text from run.json made printable)."""
    variants = printable(",".join(v.name for v in run.variants))
    bad = [v.name for v in run.variants if v.status is not VariantStatus.OK]
    status = "ok" if not bad else "failed: " + printable(",".join(bad))
    label = printable(run.label) or "-"
    return f"{run.run_id}\t{run.created_utc}\t{run.device.value}\t{label}\t{variants}\t{status}"


def print_runs(store: Path) -> int:
    """Print the store's runs oldest first, or say that it is empty.

    A bundle that does not load is named on stderr (one line each, exit 3); the other runs are still listed.
    """
    runs, problems = load_store_tolerant(store)
    if not runs and not problems:
        print(f"no runs in {store}; make one with 'reportgen profile'")
        return ExitCode.OK
    if runs:
        print("run_id\ttime_utc\tdevice\tlabel\tvariants\tstatus")
    for run in runs:
        print(run_line(run))
    for problem in problems:
        print(f"reportgen: error: {problem.message}", file=sys.stderr)
    return ExitCode.BAD_INPUT if problems else ExitCode.OK
