"""Fake ``neuron-explorer`` and ``neuron-ls`` executables for tests: small Python scripts put first on PATH.

They follow the documented interfaces only (shared/design/trainium-profiling-facts.md):
``neuron-explorer view -d <session dir> --output-format summary-json|json [--output-file F]``
and ``neuron-ls -j``. The fake explorer refuses any other argv (exit 2, reason on stderr), checks
that the session folder holds an .ntff, appends its argv to ``calls.jsonl`` beside itself, and
writes records with the documented field names (Summary, SystemProfileEvents; SCH) taken from
``explorer-config.json``: per variant (the first config key that is a component of the session
path), a ``summary`` record and ``events`` counts {name: count}. ``"stdout": true`` prints
instead of writing the --output-file.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

EXPLORER_SCRIPT = r'''
import json, sys
from pathlib import Path

here = Path(__file__).resolve().parent
args = sys.argv[1:]
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps(args) + "\n")
def fail(msg):
    print("fake neuron-explorer: " + msg, file=sys.stderr)
    sys.exit(2)
if len(args) < 5 or args[0] != "view" or args[1] != "-d" or args[3] != "--output-format":
    fail("expected: view -d <session dir> --output-format FORMAT ...")
session, fmt, rest = Path(args[2]), args[4], args[5:]
if fmt not in ("summary-json", "json"):
    fail("unsupported --output-format " + fmt)
out_file = None
while rest:
    if rest[0] == "--output-file" and len(rest) > 1:
        out_file, rest = rest[1], rest[2:]
    elif rest[0] in ("--ignore-device-profile", "--ignore-system-profile"):
        rest = rest[1:]
    else:
        fail("unknown argument " + rest[0])
if not session.is_dir() or not any(session.glob("*.ntff")):
    fail("session folder has no .ntff: " + str(session))
config = json.loads((here / "explorer-config.json").read_text())
variant = next((k for k in config["variants"] if k in session.parts), None)
if variant is None:
    fail("no configured variant in " + str(session))
spec = config["variants"][variant]
if fmt == "summary-json":
    payload = spec["summary_json"]
else:
    events = []
    for name, count in spec["events"].items():
        for i in range(count):
            events.append({"id": str(len(events)), "name": name, "start_ts": 1000 * i, "end_ts": 1000 * i + 10,
                           "duration_ns": 10, "trace_event_source": "neuron_rt" if name.startswith("nrt") else "neuron_hw",
                           "instance_id": "i-0standin", "process_id": 1, "thread_id": 1, "nc_idx": 0})
    events.append({"id": "x", "name": "nc_exec_running", "start_ts": 0, "end_ts": 1, "duration_ns": 1,
                   "trace_event_source": "neuron_hw", "instance_id": "i-0standin", "process_id": 1, "thread_id": 1,
                   "nc_idx": 1})
    payload = {"system_profile": {"events": events}}
text = json.dumps(payload)
if config.get("stdout") or out_file is None:
    print(text)
else:
    Path(out_file).write_text(text)
'''

NEURON_LS_SCRIPT = r'''
import sys
from pathlib import Path
if sys.argv[1:] != ["-j"]:
    print("fake neuron-ls: expected -j", file=sys.stderr)
    sys.exit(2)
sys.stdout.write((Path(__file__).resolve().parent / "neuron-ls.json").read_text())
'''


def _install(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!{sys.executable}\n{body}")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return tool


def install_neuron_explorer(bin_dir: Path, variants: dict[str, dict[str, Any]], stdout: bool = False) -> Path:
    """The fake explorer in ``bin_dir``; ``variants``: name -> {"summary_json": ..., "events": {...}}."""
    (bin_dir / "explorer-config.json").parent.mkdir(parents=True, exist_ok=True)
    (bin_dir / "explorer-config.json").write_text(json.dumps({"variants": variants, "stdout": stdout}))
    return _install(bin_dir, "neuron-explorer", EXPLORER_SCRIPT)


def install_neuron_ls(bin_dir: Path, payload: Any) -> Path:
    """The fake ``neuron-ls``: ``-j`` prints ``payload`` as JSON."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "neuron-ls.json").write_text(json.dumps(payload))
    return _install(bin_dir, "neuron-ls", NEURON_LS_SCRIPT)


def explorer_calls(bin_dir: Path) -> list[list[str]]:
    """The argv of every fake explorer call so far."""
    log = bin_dir / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def path_with(bin_dir: Path) -> str:
    """$PATH with ``bin_dir`` first."""
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def summary_record(total_time_s: float, read_bytes: int, write_bytes: int, **extra: float) -> dict[str, Any]:
    """A Summary record with the documented field names (SCH), as a fake summary-json carries it."""
    return {"total_time": total_time_s, "hbm_read_bytes": read_bytes, "hbm_write_bytes": write_bytes, **extra}
