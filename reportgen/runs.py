"""``reportgen runs``: one line per stored run."""

from __future__ import annotations

from pathlib import Path

from reportgen.bundle import load_store
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
    """Print the store's runs oldest first, or say that it is empty."""
    runs = load_store(store)
    if not runs:
        print(f"no runs in {store}; make one with 'reportgen profile'")
        return ExitCode.OK
    print("run_id\ttime_utc\tdevice\tlabel\tvariants\tstatus")
    for run in runs:
        print(run_line(run))
    return ExitCode.OK
