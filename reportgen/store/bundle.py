"""Run bundles on disk: their layout, the one loader, the atomic writer, and the store's listing.

A store is a folder of run folders: ``<store>/<run_id>/run.json`` plus traces and
artifacts. A bundle is written into a hidden temporary folder and renamed into place,
so a crash never leaves a partial run; once written it is never modified.

The layout lives here and nowhere else: ``profile`` and ``import`` both name members with
``trace_member``/``artifact_member``, stamp times with ``format_utc`` and start a Run with
``new_run``. Older ``run.json`` files are upgraded on load (``reportgen.model.migrations``).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from reportgen import __version__
from reportgen.errors import BundleError, ConflictError, UsageError
from reportgen.model.codec import from_jsonable, to_jsonable
from reportgen.model.migrations import upgrade
from reportgen.model.run import (
    SCHEMA_VERSION,
    DeviceKind,
    DevicePeak,
    Environment,
    GitInfo,
    MeasureSettings,
    Run,
    RunSource,
    ScenarioInfo,
    VariantResult,
)

RUN_FILE = "run.json"
TRACES_DIR = "traces"
ARTIFACTS_DIR = "artifacts"
TRACE_SUFFIX = ".pt.trace.json.gz"
"""Every stored trace is gzip-compressed Kineto JSON, named as torch.profiler's exporter names them."""
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
RUN_ID_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
TMP_PREFIX = ".tmp-"
MAX_RUN_JSON_BYTES = 256 * 1024 * 1024
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,159}$")
_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
"""Whole seconds, UTC: the one form reportgen writes, so that sorting the strings sorts the times."""
MAX_LABEL_CHARS = 200
_SLUG_RE = re.compile(r"[^a-z0-9]+")


def slug(text: str, max_len: int = 40) -> str:
    """A lowercase ``[a-z0-9-]`` fragment of ``text`` that is safe in a path and a URL."""
    s = _SLUG_RE.sub("-", text.lower()).strip("-")
    return s[:max_len].strip("-")


def safe_component(text: str, max_len: int = 80) -> str:
    """A file-name-safe rendering of ``text``, unique per input (a hash suffix when changed)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:max_len]
    if s == text and s:
        return s
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{s or 'x'}-{digest}"


def trace_member(variant: str) -> str:
    """The bundle-relative path of a variant's trace: ``traces/<variant>.pt.trace.json.gz``."""
    return f"{TRACES_DIR}/{safe_component(variant)}{TRACE_SUFFIX}"


def artifact_member(variant: str, file_name: str) -> str:
    """The bundle-relative path of a device file kept for a variant: ``artifacts/<variant>/<file>``."""
    return f"{ARTIFACTS_DIR}/{safe_component(variant)}/{safe_component(file_name)}"


def format_utc(moment: datetime) -> str:
    """``2026-11-30T04:55:00Z``: the one form of ``created_utc`` (whole seconds, UTC, sorts as text)."""
    return moment.astimezone(timezone.utc).strftime(TIME_FORMAT)


def new_run(created: datetime, device: DeviceKind, label: str, source: RunSource, salt: str, *,
            git: GitInfo, environment: Environment, peak: DevicePeak, scenario: ScenarioInfo,
            variants: tuple[VariantResult, ...], settings: MeasureSettings | None = None,
            notes: tuple[str, ...] = ()) -> Run:
    """A Run of this schema and reportgen version, its id and time made from ``created`` (``salt`` keeps ids unique)."""
    return Run(
        schema_version=SCHEMA_VERSION,
        run_id=make_run_id(created, device.value, label, salt),
        created_utc=format_utc(created),
        label=label,
        source=source,
        reportgen_version=__version__,
        device=device,
        git=git,
        environment=environment,
        peak=peak,
        scenario=scenario,
        variants=variants,
        settings=settings,
        notes=notes,
    )


def make_run_id(created: datetime, device: str, label: str, salt: str) -> str:
    """``20261130T045500Z-cpu-my-change-1a2b3c``: sortable by time, safe as a folder name."""
    parts = [created.astimezone(timezone.utc).strftime(RUN_ID_TIME_FORMAT), slug(device, 12) or "dev"]
    if slug(label):
        parts.append(slug(label))
    digest = hashlib.sha256(f"{created.isoformat()}|{device}|{label}|{salt}".encode()).hexdigest()[:6]
    parts.append(digest)
    return "-".join(parts)


def check_label(label: str) -> None:
    """Refuse a --label with control characters (C0, DEL, C1) or over MAX_LABEL_CHARS; anything else is data."""
    if len(label) > MAX_LABEL_CHARS:
        raise UsageError(f"label: {len(label)} characters; keep it under {MAX_LABEL_CHARS}", field="label")
    if any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in label):
        raise UsageError("label: contains control characters; use printable text", field="label")


def is_valid_run_id(run_id: str) -> bool:
    """True when ``run_id`` can be used as a folder name and URL path segment as is."""
    return bool(_RUN_ID_RE.match(run_id)) and ".." not in run_id


def run_to_json(run: Run) -> str:
    """Serialise ``run`` as stored in ``run.json`` (sorted keys, no NaN, trailing newline)."""
    return json.dumps(to_jsonable(run), indent=1, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


class StoreWriteError(BundleError):
    """A folder or file cannot be written (disk full, read-only, not a folder): ``path`` and ``reason`` say which."""

    def __init__(self, path: Path | str, reason: str, fix: str = "choose another folder") -> None:
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: cannot write ({reason}); {fix}")


def cannot_write(exc: OSError, where: Path | str) -> StoreWriteError:
    """The one-line error for an OSError met while writing under ``where`` (the file it names, if any)."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return StoreWriteError(exc.filename if exc.filename else where, exc.strerror or type(exc).__name__,
                           "free some space or choose another folder" if full else "choose another folder")


def check_store(store: Path) -> None:
    """Refuse a store path that exists but is not a folder (before any work is done)."""
    if store.exists() and not store.is_dir():
        raise BundleError(f"{store}: is not a folder; pass --store a results folder")


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object as a dict, refusing a key that appears twice (json.loads would keep the last silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def parse_run_json(text: str, source: Path | str) -> Run:
    """Validate and decode the text of a ``run.json``; every failure names the file and field."""
    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise BundleError(f"{source}: key {str(exc)[:60]!r} appears twice in one object; the bundle is corrupt, "
                          "re-run or re-import it") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise BundleError(f"{source}: not valid JSON ({exc}); the bundle is corrupt, re-run or re-import it") from None
    except RecursionError:
        raise BundleError(f"{source}: JSON nested too deeply; this is not a run.json") from None
    if not isinstance(data, dict):
        raise BundleError(f"{source}: expected a JSON object at the top level; this is not a run.json")
    _check_schema_version(data, source)
    run = from_jsonable(Run, upgrade(data, source), source)
    _check_run(run, source)
    return run


def load_run(bundle_dir: Path) -> Run:
    """Load and validate ``<bundle_dir>/run.json``: the only way the program reads a bundle."""
    path = bundle_dir / RUN_FILE
    if bundle_dir.is_symlink() or path.is_symlink():
        raise BundleError(f"{path}: is a symbolic link; run bundles must be real folders inside the store")
    try:
        with open_regular(path) as fh:
            raw = fh.read(MAX_RUN_JSON_BYTES + 1)
    except NotRegularFile:
        raise BundleError(f"{path}: is not a regular file; the bundle is corrupt") from None
    except FileNotFoundError:
        raise BundleError(f"{path}: missing; {bundle_dir} is not a run bundle") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_RUN_JSON_BYTES:
        raise BundleError(f"{path}: larger than {MAX_RUN_JSON_BYTES} bytes; this is not a run.json")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{path}: not UTF-8 (byte {exc.start}); the bundle is corrupt") from None
    run = parse_run_json(text, path)
    if run.run_id != bundle_dir.name:
        raise BundleError(
            f"{path}: field 'run_id' is {run.run_id!r} but the folder is {bundle_dir.name!r}; "
            "rename the folder to the run id"
        )
    return run


class NotRegularFile(OSError):
    """The path is a FIFO, socket or device: reading it could block for ever."""


def open_regular(path: Path) -> io.BufferedReader:
    """Open ``path`` for reading only if it is a regular file: a FIFO or device would block or never end.

    The open itself does not block (O_NONBLOCK); the type is checked on the opened file, so it cannot change
    between the check and the read. Raises IsADirectoryError for a folder, NotRegularFile for anything else.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path}: not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed")


def _check_schema_version(data: dict[str, object], source: Path | str) -> None:
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise BundleError(f"{source}: field 'schema_version' is missing; this is not a reportgen run.json")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"{source}: field 'schema_version' is {version!r}, expected a positive integer")
    if version > SCHEMA_VERSION:
        raise BundleError(
            f"{source}: field 'schema_version' is {version}, newer than this reportgen reads "
            f"({SCHEMA_VERSION}); upgrade reportgen"
        )


def _check_run(run: Run, source: Path | str) -> None:
    if not is_valid_run_id(run.run_id):
        raise BundleError(f"{source}: field 'run_id' {run.run_id[:60]!r} is not a safe folder name")
    if not _TIME_RE.match(run.created_utc):
        raise BundleError(f"{source}: field 'created_utc' {run.created_utc[:40]!r} is not a UTC time like "
                          "2026-11-30T04:55:00Z")
    names = [v.name for v in run.variants]
    if len(set(names)) != len(names):
        raise BundleError(f"{source}: field 'variants' has duplicate names; each variant must be unique")
    for i, v in enumerate(run.variants):
        for j, ref in enumerate([v.trace_path, *(a.path for a in v.artifacts)]):
            if ref is not None and not is_safe_relpath(ref):
                field = "trace_path" if j == 0 else f"artifacts[{j - 1}].path"
                raise BundleError(f"{source}: field 'variants[{i}].{field}' {ref[:60]!r} points outside the bundle")
    _check_no_file_holds_another(run, source)


def _check_no_file_holds_another(run: Run, source: Path | str) -> None:
    """Refuse member paths where one file would have to be the folder of another (``a`` and ``a/b``)."""
    refs = {ref for v in run.variants for ref in (v.trace_path, *(a.path for a in v.artifacts)) if ref is not None}
    for i, v in enumerate(run.variants):
        for j, ref in enumerate([v.trace_path, *(a.path for a in v.artifacts)]):
            parts = ref.split("/") if ref is not None else []
            outer = next(("/".join(parts[:k]) for k in range(1, len(parts)) if "/".join(parts[:k]) in refs), None)
            if ref is not None and outer is not None:
                field = "trace_path" if j == 0 else f"artifacts[{j - 1}].path"
                raise BundleError(f"{source}: field 'variants[{i}].{field}' {ref[:60]!r} lies inside {outer[:60]!r}, "
                                  "which is a file of the bundle")


def is_safe_relpath(ref: str) -> bool:
    """True for a relative POSIX path that stays inside its folder (no '..', no absolute, no NUL)."""
    if not ref or "\x00" in ref or "\\" in ref or ref.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in ref.split("/"))


def member_file(bundle_dir: Path, rel: str) -> Path:
    """The regular file ``rel`` inside a bundle; refuses links and paths that leave the bundle."""
    if not is_safe_relpath(rel):
        raise BundleError(f"{bundle_dir / RUN_FILE}: names {rel[:60]!r}, which points outside the bundle")
    path = bundle_dir
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            raise BundleError(f"{path}: is a symbolic link; files of a run bundle must be real files inside it")
    if not path.is_file():
        if path.exists():  # a FIFO or device would block the reader
            raise BundleError(f"{path}: is not a regular file; the bundle is corrupt")
        raise BundleError(f"{path}: missing, but run.json names it; the bundle is incomplete")
    return path


def list_run_dirs(store: Path) -> list[Path]:
    """The run folders of ``store`` (hidden and temporary folders excluded), sorted by name."""
    if not store.exists():
        return []
    if not store.is_dir():
        raise BundleError(f"{store}: is not a folder; pass --store a results folder")
    return sorted(p for p in store.iterdir() if not p.name.startswith(".") and (p.is_dir() or p.is_symlink()))


def load_store(store: Path) -> list[Run]:
    """Every run in ``store``, oldest first; any invalid bundle is an error naming it."""
    runs = [load_run(d) for d in list_run_dirs(store)]
    return sorted(runs, key=lambda r: (r.created_utc, r.run_id))


def load_store_tolerant(store: Path) -> tuple[list[Run], list[BundleError]]:
    """Every valid run in ``store`` (oldest first) and the error of each bundle that does not load.

    For commands that can go on without a bad bundle (``runs``, ``build``): one corrupt bundle must not hide
    the others. A store that is not a folder is still an error.
    """
    runs: list[Run] = []
    problems: list[BundleError] = []
    for d in list_run_dirs(store):
        try:
            runs.append(load_run(d))
        except BundleError as exc:
            problems.append(exc)
    return sorted(runs, key=lambda r: (r.created_utc, r.run_id)), problems


def resolve_run_dir(store: Path, ref: str, scenario: str | None = None, machine: str | None = None) -> Path:
    """A run folder from a run id, a folder path, ``latest``/``latest~N``, a label or a git sha (prefix).

    ``latest~N`` counts back among profiled, not withdrawn runs of one scenario and machine: those
    given, else the newest such run's. A label or sha names the newest matching run (within the filters).
    """
    m = re.fullmatch(r"latest(?:~(\d+))?", ref)
    if m:
        runs = candidate_runs(store, scenario, machine, ref)
        back = int(m.group(1) or 0)
        if back >= len(runs):
            within = f" of scenario {runs[-1].scenario.name!r} on machine {run_machine(runs[-1]) or '(unnamed)'}" \
                if runs else ""
            raise BundleError(f"{store}: has {len(runs)} run(s){within}; '{ref}' does not exist")
        return store / runs[-1 - back].run_id
    as_path = Path(ref)
    if (as_path / RUN_FILE).exists():
        return as_path
    if is_valid_run_id(ref) and (store / ref).is_dir():
        return store / ref
    matches = [r for r in _filtered(load_store(store), scenario, machine) if r.label == ref
               or (re.fullmatch(r"[0-9a-f]{7,40}", ref) and (r.git.sha or "").startswith(ref))] if ref else []
    if matches:
        return store / matches[-1].run_id
    raise BundleError(f"{ref}: no such run in {store} and not a bundle folder, label or git sha; see 'reportgen runs'")


def run_machine(run: Run) -> str | None:
    """The machine name a run was recorded with (None: unnamed)."""
    return getattr(run.environment, "machine", None)


def _filtered(runs: list[Run], scenario: str | None, machine: str | None) -> list[Run]:
    return [r for r in runs if (scenario is None or r.scenario.name == scenario)
            and (machine is None or run_machine(r) == machine)]


def candidate_runs(store: Path, scenario: str | None, machine: str | None, ref: str = "latest") -> list[Run]:
    """What ``latest~N`` counts: profiled, not withdrawn runs, oldest first, of one scenario and machine."""
    from reportgen.model.run import RunSource
    from reportgen.store.withdrawn import read_withdrawn

    withdrawn = read_withdrawn(store) if store.is_dir() else {}
    runs = [r for r in load_store(store) if r.source is RunSource.PROFILE and r.run_id not in withdrawn]
    runs = _filtered(runs, scenario, machine)
    if runs and (scenario is None or machine is None):
        newest = runs[-1]
        runs = _filtered(runs, scenario or newest.scenario.name, machine or run_machine(newest))
        if machine is None and run_machine(newest) is None:
            runs = [r for r in runs if run_machine(r) is None]
    return runs


def write_bundle(store: Path, run: Run, files: Mapping[str, Path | bytes]) -> Path:
    """Write ``run`` and its files as a new bundle atomically; refuse to overwrite an existing run.

    ``files`` maps bundle-relative paths to source files (copied) or bytes.
    """
    if not is_valid_run_id(run.run_id):
        raise BundleError(f"run id {run.run_id!r} is not a safe folder name")
    text = checked_run_json(run, store / run.run_id / RUN_FILE)
    check_store(store)
    try:
        return _write_bundle_files(store, run, files, text)
    except OSError as exc:
        raise cannot_write(exc, store) from None


def checked_run_json(run: Run, source: Path | str) -> str:
    """``run.json`` text for ``run``, refused unless the loader accepts it: whatever is stored must load."""
    try:
        text = run_to_json(run)
    except ValueError as exc:
        raise BundleError(f"{source}: {exc}; the run was not stored") from None
    try:
        parse_run_json(text, source)
    except BundleError as exc:
        raise BundleError(f"{exc.message}; the run was not stored") from None
    return text


def _write_bundle_files(store: Path, run: Run, files: Mapping[str, Path | bytes], text: str) -> Path:
    store.mkdir(parents=True, exist_ok=True)
    final = store / run.run_id
    if final.exists():
        raise ConflictError(f"{final}: a run with this id already exists; stored runs are never overwritten")
    remove_stale_temp_dirs(store)
    tmp = make_temp_dir(store, run.run_id[:40])
    try:
        for rel, content in sorted(files.items()):
            _write_member(tmp, rel, content)
        _write_member(tmp, RUN_FILE, text.encode("utf-8"))
        os.chmod(tmp, 0o755)
        _fsync_dir(tmp)
        try:
            os.rename(tmp, final)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise ConflictError(f"{final}: a run with this id already exists; stored runs are never overwritten") from None
        _fsync_dir(store)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def temp_owner_tag() -> str:
    """``<host>-p<pid>``: put in a temporary folder's name so a later run can tell when its maker is gone."""
    return f"{slug(socket.gethostname(), 30)}-p{os.getpid()}"


def make_temp_dir(folder: Path, tag: str, prefix: str = TMP_PREFIX) -> Path:
    """A hidden temporary folder in ``folder`` named ``<prefix><host>-p<pid>-<tag>-XXXX`` (see remove_stale_temp_dirs)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{temp_owner_tag()}-{slug(tag, 40) or 'x'}-", dir=folder))


def remove_stale_temp_dirs(folder: Path, prefix: str = TMP_PREFIX, dry_run: bool = False) -> list[Path]:
    """Delete the temporary folders in ``folder`` left by a killed reportgen on this host (its pid is gone).

    Only names made by make_temp_dir with ``prefix`` are considered; a folder of a live process, of another
    host (a shared store), or of unknown shape is left alone. Returns the stale folders (only listed if dry_run).
    """
    own = f"{prefix}{temp_owner_tag().rsplit('-p', 1)[0]}-p"
    removed = []
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        pid = p.name[len(own):].split("-", 1)[0] if p.name.startswith(own) else ""
        if not pid.isdigit() or p.is_symlink() or not p.is_dir():
            continue
        if not _pid_alive(int(pid)):
            if not dry_run:
                shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _pid_alive(pid: int) -> bool:
    """True when a process with this id exists on this host (a reused pid errs on the side of keeping)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _write_member(root: Path, rel: str, content: Path | bytes) -> None:
    if not is_safe_relpath(rel):
        raise BundleError(f"bundle member path {rel!r} is not a safe relative path")
    dest = root / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        with open(dest, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
    else:
        shutil.copyfile(content, dest)
        with open(dest, "rb") as fh:  # durable before the rename publishes the bundle, like the bytes above
            os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
