"""Helpers for the hardening tests: tree snapshots, the injection payload corpus, hostile runs and traces."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from factories import chrome_trace, synthetic_run, variant

from reportgen.catalog.table import CATALOG_DIR
from reportgen.model.run import OpRow, Run, VariantStatus
from reportgen.store.writer import STAGING_DIR

# A payload that executes sets window.__pwned; one that loads sets nothing but makes a request to port 1.
PAYLOADS = (
    "<script>window.__pwned=1</script>",
    "<img src=x onerror=\"window.__pwned=1\">",
    "\"><svg onload=window.__pwned=1>",
    "'><svg/onload=window.__pwned=1>",
    "javascript:window.__pwned=1",
    "</td></tr></table><script>window.__pwned=1</script>",
    "</title></style></textarea><script>window.__pwned=1</script>",
    "{{ 7*7 }}",
    "{% raw %}x{% endraw %}",
    "[x](javascript:window.__pwned=1)",
    "![x](http://127.0.0.1:1/x.png)",
    "@octocat",
    "a|b",
    "<a href=\"javascript:window.__pwned=1\">click</a>",
    "<iframe src=\"javascript:window.__pwned=1\"></iframe>",
    "<!-- comment --> `code` *em* _u_ ~~s~~",
    "<style>body{background:url(http://127.0.0.1:1/css)}</style>",
)
ALL_PAYLOADS = " ".join(PAYLOADS)


def _fit(payloads: tuple[str, ...], limit: int) -> str:
    """As many whole payloads as fit in ``limit`` characters (a --label is at most 200)."""
    out = ""
    for p in payloads:
        candidate = f"{out} {p}" if out else p
        if len(candidate) <= limit:
            out = candidate
    return out


CLI_LABEL = _fit(PAYLOADS, 200)
"""The payloads a --label can carry through the CLI, which refuses labels over 200 characters."""
"""Every payload in one string, for fields shown once (label, hostname)."""
LITERAL_TEMPLATE = "{{ 7*7 }}"



def snapshot(*roots: Path, listing: bool = True) -> dict[str, str]:
    """Every path under ``roots`` (and the listing of their parent folders) -> content hash or link target.

    Two equal snapshots mean the trees are byte-identical, and no temporary folder was left beside them. A store's
    catalog (``.catalog/``) is left out: it is a cache of the bundles that readers bring up to date
    (tests/test_catalog.py holds it to the bundles).
    """
    out: dict[str, str] = {}
    for root in roots:
        parent = root.parent
        if listing:
            out[f"listing:{parent}"] = "\n".join(sorted(set(os.listdir(parent)) - {CATALOG_DIR})) if parent.is_dir() else "<none>"
        if root.is_symlink():
            out[str(root)] = "link:" + os.readlink(root)
            continue
        if not root.exists():
            out[str(root)] = "<absent>"
            continue
        if root.is_file():
            out[str(root)] = _file_hash(root)
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            if CATALOG_DIR in dirnames:
                dirnames.remove(CATALOG_DIR)
            out[dirpath] = "dir"
            for name in sorted(dirnames + filenames):
                p = Path(dirpath) / name
                if p.is_symlink():
                    out[str(p)] = "link:" + os.readlink(p)
                elif p.is_file():
                    out[str(p)] = _file_hash(p)
    return out


def tree_hash(root: Path) -> str:
    """One digest of every file, folder and link under ``root``, relative to it (the same tree anywhere)."""
    h = hashlib.sha256()
    if not root.exists():
        return "<absent>"
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        h.update(f"D {rel_dir}\0".encode())
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            p = Path(dirpath) / name
            rel = os.path.relpath(p, root)
            if p.is_symlink():
                h.update(f"L {rel} {os.readlink(p)}\0".encode())
            else:
                h.update(f"F {rel} {_file_hash(p)}\0".encode())
    return h.hexdigest()


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stray_temp_entries(*folders: Path) -> list[str]:
    """Names of leftover temporary folders (``.tmp-*``, ``.site-tmp-*``, ``.site-old-*``) in ``folders`` and in their
    staging folders (``.tmp``, where a store's writers write)."""
    found = []
    for folder in (*folders, *(f / STAGING_DIR for f in folders)):
        if folder.is_dir():
            found += [f"{folder}/{p.name}" for p in folder.iterdir()
                      if p.name.startswith((".tmp-", ".site-tmp-", ".site-old-"))]
    return sorted(found)


def hostile_run(run_id: str = "20261130T000000Z-cpu-evil-abc123", created_utc: str = "2026-11-30T00:00:00Z"
                ) -> Run:
    """A valid run with a payload in every string field that comes from a user or a trace."""
    ops = tuple(OpRow(p, 2, 30.0 + i, 40.0 + i, 0.0, 0.0, p) for i, p in enumerate(PAYLOADS))
    plain = replace(variant("naive", 100.0, trace_path="traces/naive.pt.trace.json.gz"), ops=ops,
                    description=ALL_PAYLOADS)
    named = [replace(variant(p, 50.0 + i, trace_path=f"traces/v{i}.pt.trace.json.gz"), description=p)
             for i, p in enumerate(PAYLOADS[:6])]
    failed = variant("broken " + PAYLOADS[0], 1.0, status=VariantStatus.FAILED,
                     error="RuntimeError: " + ALL_PAYLOADS + "\nsecond line " + PAYLOADS[1])
    run = synthetic_run(run_id=run_id, created_utc=created_utc, label=ALL_PAYLOADS, hostname=ALL_PAYLOADS,
                        variants=(plain, *named, failed))
    env = replace(run.environment, platform=PAYLOADS[2], cpu_model=PAYLOADS[1], device_name=PAYLOADS[0],
                  torch_version=PAYLOADS[7], device_extras={"cuda_version": PAYLOADS[5], PAYLOADS[6]: PAYLOADS[3]})
    scenario = replace(run.scenario, name=PAYLOADS[0], description=ALL_PAYLOADS,
                       parameters={**run.scenario.parameters, PAYLOADS[3]: PAYLOADS[4], "note": ALL_PAYLOADS})
    peak = replace(run.peak, source=ALL_PAYLOADS)
    return replace(run, environment=env, scenario=scenario, peak=peak, notes=PAYLOADS)


def hostile_trace() -> dict:
    """A Kineto-shaped trace whose op names, categories, thread names and args carry the payloads."""
    trace = chrome_trace(ops=PAYLOADS[:8])
    trace["traceEvents"].append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
                                 "args": {"name": ALL_PAYLOADS}})
    trace["traceEvents"].append({"ph": "X", "cat": PAYLOADS[1], "name": PAYLOADS[5], "pid": PAYLOADS[2],
                                 "tid": PAYLOADS[0], "ts": 1001.0, "dur": 5.0, "args": {"Input Dims": PAYLOADS}})
    trace["deviceProperties"] = [{"name": ALL_PAYLOADS}]
    return trace


def write_trace(path: Path, trace: object, compress: bool = False) -> Path:
    """Write a trace object as JSON (gzip-compressed when asked)."""
    raw = json.dumps(trace).encode()
    path.write_bytes(gzip.compress(raw, mtime=0) if compress else raw)
    return path


def one_error(capsys: Any) -> str:
    """The one error line a refused command printed (its text after ``reportgen: error: ``); fails the test on a second
    line, a missing prefix or an internal error."""
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("reportgen: error: "), err
    assert "internal error" not in err
    return str(err.removeprefix("reportgen: error: ").rstrip("\n"))
