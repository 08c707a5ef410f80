"""Names in the store: a bundle's member paths, run ids, labels and times, and a new Run stamped with them.

The layout lives here and nowhere else: ``profile`` and ``import`` both name members with
``trace_member``/``artifact_member``, stamp times with ``format_utc`` and start a Run with
``new_run``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from reportgen import __version__
from reportgen.errors import UsageError
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
_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,159}")
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


@dataclass(frozen=True)
class NewRunRequest:
    """What a new Run records, before ``new_run`` stamps it with the schema, reportgen's version, its id and time."""

    created: datetime
    device: DeviceKind
    label: str
    source: RunSource
    salt: str
    """Keeps ids unique: runs of the same second, device and label get different ids."""
    git: GitInfo
    environment: Environment
    peak: DevicePeak
    scenario: ScenarioInfo
    variants: tuple[VariantResult, ...]
    settings: MeasureSettings | None = None
    notes: tuple[str, ...] = ()


def new_run(request: NewRunRequest) -> Run:
    """A Run of this schema and reportgen version, its id and time made from ``request.created``."""
    r = request
    return Run(
        schema_version=SCHEMA_VERSION,
        run_id=make_run_id(r.created, r.device.value, r.label, r.salt),
        created_utc=format_utc(r.created),
        label=r.label,
        source=r.source,
        reportgen_version=__version__,
        device=r.device,
        git=r.git,
        environment=r.environment,
        peak=r.peak,
        scenario=r.scenario,
        variants=r.variants,
        settings=r.settings,
        notes=r.notes,
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
    """True when ``run_id`` can be used as a folder name and URL path segment as is (the whole of it: a ``$`` would
    also have matched before a final newline)."""
    return _RUN_ID_RE.fullmatch(run_id) is not None and ".." not in run_id


def is_safe_relpath(ref: str) -> bool:
    """True for a relative POSIX path that stays inside its folder (no '..', no absolute, no NUL)."""
    if not ref or "\x00" in ref or "\\" in ref or ref.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in ref.split("/"))
