"""``reportgen runs``: one line per stored run."""

from __future__ import annotations

from pathlib import Path

from reportgen.bundle import load_store
from reportgen.errors import ExitCode
from reportgen.model import Run, VariantStatus


def run_line(run: Run) -> str:
    """``id  time  device  label  variants  status`` for one run."""
    variants = ",".join(v.name for v in run.variants)
    bad = [v.name for v in run.variants if v.status is not VariantStatus.OK]
    status = "ok" if not bad else "failed: " + ",".join(bad)
    label = run.label.replace("\t", " ") or "-"
    return f"{run.run_id}\t{run.created_utc}\t{run.device.value}\t{label}\t{variants}\t{status}"


def print_runs(store: Path) -> int:
    """Print the store's runs oldest first, or say that it is empty."""
    runs = load_store(store)
    if not runs:
        print(f"no runs in {store}; make one with 'reportgen profile'")
        return ExitCode.OK
    print("run_id\ttime_utc\tdevice\tlabel\tvariants\tstatus")
    for run in runs:
        print(run_line(run))
    return ExitCode.OK
