"""Fake ``neuron-explorer``, ``neuron-ls`` and ``neuron-monitor`` executables for tests: Python scripts put first on PATH.

They print what the real tools printed, not what reportgen expects: ``neuron-ls -j`` prints one of
the real captures in tests/data/neuron/ byte for byte; ``neuron-monitor -c FILE`` streams the lines
of a real capture and then keeps running until it is stopped, as the real one does; and the fake
explorer's ``summary-json`` records carry the counter names and values of a real inf2 summary
(``real_counters``, from the listing in tests/data/neuron/), as a mapping keyed by node (one
entry per NEFF for an eager capture), printed to stdout, optionally after log lines.

The fake explorer accepts only ``--version`` (its first line is made up: what the real one prints
is not documented) and ``view -d <session dir> --output-format parquet|summary-json|json|perfetto
[--output-file F] [--ignore-device-profile|--ignore-system-profile]`` (exit 2 and a reason on
stderr otherwise), checks that the session folder holds an .ntff, and appends its argv to
``calls.jsonl`` beside itself. Per variant (the first config key that is a component of the session
path) ``explorer-config.json`` gives the ``summary_json`` payload, ``events`` counts {name: count}
for the legacy json export (written in the SDK's documented layout: ``trace_events`` records with
``group`` and ``lnc_idx``, plus ``mem_usage`` and ``cpu_util``; one event of core 1 and one framework
event added), ``perfetto`` the .pftrace files the perfetto format writes into the folder it runs in
(``system_profile.pftrace`` and ``device_profile_model_<id>.pftrace``, the documented names),
``log_lines`` printed before the JSON, and ``parquet``: the fixture folder
(tests/data/neuron/parquet/<name>/, written from the schema reference) whose tables Parquet writes
into the ``--output-file`` folder, one file per table, as the SDK documents; without it, Parquet
fails (exit 2: an explorer that gives no Parquet). With ``summary_to: "file"`` summary-json writes
the --output-file instead of printing.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).resolve().parent.parent / "data" / "neuron"
PARQUET_FIXTURES = CAPTURES / "parquet"
COUNTER_LISTING = CAPTURES / "summary-json-counters.inf2.xlarge.txt"
NODE = "ip-172-31-0-1"

EXPLORER_SCRIPT = r'''
import json, shutil, sys
from pathlib import Path

here = Path(__file__).resolve().parent
PARQUET_FIXTURES = Path(__PARQUET_FIXTURES__)
args = sys.argv[1:]
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps(args) + "\n")
def fail(msg):
    print("fake neuron-explorer: " + msg, file=sys.stderr)
    sys.exit(2)
config = json.loads((here / "explorer-config.json").read_text())
if args == ["--version"]:
    print(config.get("version_text", "2.19.1"))
    sys.exit(0)
if len(args) < 5 or args[0] != "view" or args[1] != "-d" or args[3] != "--output-format":
    fail("expected: view -d <session dir> --output-format FORMAT ...")
session, fmt, rest = Path(args[2]), args[4], args[5:]
if fmt not in ("parquet", "summary-json", "json", "perfetto"):
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
variant = next((k for k in config["variants"] if k in session.parts), None)
if variant is None:
    fail("no configured variant in " + str(session))
spec = config["variants"][variant]
if fmt == "parquet":
    if not spec.get("parquet"):
        fail("no Parquet output for this session (this stand-in plays an explorer that gives none)")
    if out_file is None:
        fail("this stand-in writes Parquet only into an --output-file folder")
    Path(out_file).mkdir(parents=True, exist_ok=True)
    for table in sorted((PARQUET_FIXTURES / spec["parquet"]).glob("*.parquet")):
        shutil.copyfile(table, Path(out_file) / table.name)
    sys.exit(0)
if fmt == "perfetto":
    if out_file is not None:
        fail("this stand-in writes Perfetto files into the folder it runs in, as the documented example names none")
    perfetto = spec.get("perfetto", {"models": ["1"], "bytes": 64})
    if perfetto.get("fail"):
        fail("perfetto conversion failed")
    names = ["system_profile.pftrace"] + ["device_profile_model_%s.pftrace" % m for m in perfetto["models"]]
    for name in names:  # bytes standing in for Perfetto's protobuf; reportgen never reads them
        Path(name).write_bytes(b"\x0a" * perfetto["bytes"])
    sys.exit(0)
if fmt == "summary-json":
    for line in spec.get("log_lines", []):
        print(line)
    text = json.dumps(spec["summary_json"])
    if spec.get("summary_to") == "file" and out_file is not None:
        Path(out_file).write_text(text)
    else:
        print(text)
    sys.exit(0)
events = []  # system_profile.json's trace_events as the SDK documents them: group, lnc_idx as a string, type
for name, count in spec["events"].items():
    for i in range(count):
        events.append({"duration": 10, "group": "nrt-nc-000", "id": len(events) + 1, "instance_id": "i-0standin",
                       "lnc_idx": "0", "name": name, "parent_id": 0, "process_id": "1", "thread_id": 1,
                       "timestamp": 1729888371056597613 + 1000 * i, "type": 11})
events.append({"duration": 1, "group": "nrt-nc-001", "id": len(events) + 1, "instance_id": "i-0standin",
               "lnc_idx": "1", "name": "nc_exec_running", "parent_id": 0, "process_id": "1", "thread_id": 1,
               "timestamp": 1729888371056597613, "type": 11})
events.append({"duration": 3758079, "group": "framework-1", "instance_id": "i-0standin", "name": "aten::mul",
               "process_id": "1", "thread_id": 1, "timestamp": 1729888382798557372, "type": 99999})
text = json.dumps({"trace_events": events,
                   "mem_usage": [{"duration": 1, "instance_id": "i-0standin", "percent_usage": 9.7,
                                  "timestamp": 1729888369286687792, "usage": 51805806592}],
                   "cpu_util": [{"cpu_id": "0", "duration": 1, "instance_id": "i-0standin",
                                 "timestamp": 1729888371287337243, "util": 2.3255813}]})
if config.get("stdout") or out_file is None:
    print(text)
else:
    Path(out_file).write_text(text)
'''

NEURON_LS_SCRIPT = r'''
import json, sys
from pathlib import Path
config = json.loads((Path(__file__).resolve().parent / "neuron-ls-config.json").read_text())
if sys.argv[1:] not in config["accepts"]:
    print("neuron-ls: error: unrecognized arguments: " + " ".join(sys.argv[1:]), file=sys.stderr)
    sys.exit(2)
sys.stdout.buffer.write(Path(config["capture"]).read_bytes())
'''

NEURON_MONITOR_SCRIPT = r'''
import json, sys, time
from pathlib import Path
args = sys.argv[1:]
if len(args) != 2 or args[0] != "-c" or "period" not in json.loads(Path(args[1]).read_text()):
    print("fake neuron-monitor: expected -c <config file with a period>", file=sys.stderr)
    sys.exit(2)
capture = (Path(__file__).resolve().parent / "neuron-monitor-capture.txt").read_text()
for line in capture.splitlines():
    if line.strip():
        print(line, flush=True)
time.sleep(60)  # the real tool streams until it is stopped
'''


DPKG_QUERY_SCRIPT = r'''
import json, sys
from pathlib import Path
installed = json.loads((Path(__file__).resolve().parent / "dpkg-query-config.json").read_text())
args = sys.argv[1:]
if len(args) != 3 or args[:2] != ["-W", "-f=${Version}"]:
    print("fake dpkg-query: expected -W -f=${Version} PACKAGE", file=sys.stderr)
    sys.exit(2)
if args[2] not in installed:
    print("dpkg-query: no packages found matching " + args[2], file=sys.stderr)
    sys.exit(1)
sys.stdout.write(installed[args[2]])  # -f with no newline: the version alone, as dpkg-query prints it
'''


def _install(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!{sys.executable}\n{body}")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return tool


def install_neuron_explorer(bin_dir: Path, variants: dict[str, dict[str, Any]], stdout: bool = False,
                            version_text: str = "2.19.1") -> Path:
    """The fake explorer in ``bin_dir``; ``variants``: name -> {"summary_json": ..., "events": {...},
    "parquet": fixture folder name, "perfetto": {"models": [...], "bytes": n} or {"fail": true}, ...}."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "explorer-config.json").write_text(json.dumps({"variants": variants, "stdout": stdout,
                                                              "version_text": version_text}))
    return _install(bin_dir, "neuron-explorer", EXPLORER_SCRIPT.replace("__PARQUET_FIXTURES__",
                                                                         repr(str(PARQUET_FIXTURES))))


def install_neuron_ls(bin_dir: Path, capture: str | Path, accepts: tuple[tuple[str, ...], ...] = (("-j",),)) -> Path:
    """The fake ``neuron-ls``: with an argv in ``accepts`` it prints ``capture`` (a file name in tests/data/neuron/,
    or a path) byte for byte; any other argv fails as an argparse tool does."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = capture if isinstance(capture, Path) else CAPTURES / capture
    (bin_dir / "neuron-ls-config.json").write_text(json.dumps({"capture": str(path),
                                                               "accepts": [list(a) for a in accepts]}))
    return _install(bin_dir, "neuron-ls", NEURON_LS_SCRIPT)


def install_neuron_monitor(bin_dir: Path, capture: str) -> Path:
    """The fake ``neuron-monitor -c FILE``: prints the reports of ``capture`` (tests/data/neuron/), one JSON per
    line, then keeps running until it is stopped."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    text = (CAPTURES / capture).read_text()
    lines = text.splitlines() if capture.endswith(".jsonl") else [json.dumps(json.loads(text))]
    (bin_dir / "neuron-monitor-capture.txt").write_text("\n".join(lines) + "\n")
    return _install(bin_dir, "neuron-monitor", NEURON_MONITOR_SCRIPT)


def install_dpkg_query(bin_dir: Path, installed: dict[str, str]) -> Path:
    """The fake ``dpkg-query -W -f=${Version} PACKAGE``: prints ``installed[PACKAGE]``; for any other package dpkg's
    own refusal (exit 1, "no packages found matching")."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "dpkg-query-config.json").write_text(json.dumps(installed))
    return _install(bin_dir, "dpkg-query", DPKG_QUERY_SCRIPT)


def explorer_calls(bin_dir: Path) -> list[list[str]]:
    """The argv of every fake explorer call so far."""
    log = bin_dir / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def path_with(bin_dir: Path) -> str:
    """$PATH with ``bin_dir`` first."""
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


_PAIR = re.compile(r"([a-z][a-z0-9_]*)\s*=\s*(\S+)")
_LISTED = re.compile(r"([a-z][a-z0-9_]*) \(=([0-9.]+)\)")


def real_counters() -> dict[str, float | str]:
    """Every ``name = value`` of the real inf2 summary-json listing (numbers as numbers, versions as strings)."""
    counters: dict[str, float | str] = {}
    for line in COUNTER_LISTING.read_text().splitlines():
        for name, value in _LISTED.findall(line):  # the DMA section's "dma_transfer_count (=19)"
            counters[name] = int(value) if value.isdigit() else float(value)
        if not re.match(r"[a-z][a-z0-9_]*\s+=", line):
            continue  # headings, commentary, and the comma lists of names without values
        for name, value in _PAIR.findall(line):
            try:
                counters[name] = int(value) if value.isdigit() else float(value)
            except ValueError:
                counters[name] = value
    return counters


def summary_record(total_time_s: float, read_bytes: int, write_bytes: int, **extra: float) -> dict[str, Any]:
    """A record shaped as the real one (every real counter), with these figures; other times scaled to total_time."""
    record: dict[str, Any] = real_counters()
    scale = total_time_s / float(record["total_time"])
    for name in ("total_active_time", "tensor_engine_active_time", "tensor_engine_instruction_time"):
        record[name] = float(record[name]) * scale
    record.update(total_time=total_time_s, hbm_read_bytes=read_bytes, hbm_write_bytes=write_bytes, **extra)
    return record


def keyed_by_node(*records: dict[str, Any]) -> dict[str, Any]:
    """summary-json as real scripts read it: a mapping keyed by node, one entry per NEFF execution.

    How real keys are spelled when there are several entries is not known; reportgen does not read the keys."""
    return {NODE if len(records) == 1 else f"{NODE}#{i}": r for i, r in enumerate(records)}
