"""What one device module declares: the record the registry holds for each device."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reportgen.devices.lanes import LaneRules
from reportgen.model.run import DeviceEvidence, DeviceKind

if TYPE_CHECKING:
    from reportgen.devices.backend import Backend


class TraceHeader(Protocol):
    """What a device reads of a trace file's own metadata (``reportgen.traces.reader.Trace`` has it).

    A protocol, so the registry needs nothing from the trace reader, which sits above it.
    """

    @property
    def cuda_runtime_version(self) -> int | None: ...


@dataclass(frozen=True)
class EnvField:
    """A device-specific environment field (stored in ``Environment.device_extras``) and its display label."""

    name: str
    label: str
    compared: bool = True
    """True when ``reportgen compare`` warns that base and head differ in it."""


@dataclass(frozen=True)
class TraceFacts:
    """What a trace shows about where it was taken (all text lowercase)."""

    categories: frozenset[str]
    device_names: str
    runtime_names: frozenset[str]
    has_device_lane: bool


@dataclass(frozen=True)
class TraceEvidence:
    """Signs in a trace that it was taken on this device; any one sign is enough."""

    category_contains: tuple[str, ...] = ()
    category_prefixes: tuple[str, ...] = ()
    device_name_contains: tuple[str, ...] = ()
    runtime_name_prefixes: tuple[str, ...] = ()
    no_device_activity: bool = False
    """True for the host: a trace with no device lane and no runtime calls."""

    def matches(self, facts: TraceFacts) -> bool:
        """True when ``facts`` show one of this device's signs."""
        if self.no_device_activity and not facts.has_device_lane and not facts.runtime_names:
            return True
        return (any(k in c for c in facts.categories for k in self.category_contains)
                or any(c.startswith(self.category_prefixes) for c in facts.categories if self.category_prefixes)
                or any(k in facts.device_names for k in self.device_name_contains)
                or any(n.startswith(self.runtime_name_prefixes) for n in facts.runtime_names
                       if self.runtime_name_prefixes))


@dataclass(frozen=True)
class DeviceSummary:
    """A device tool's account of one imported variant: its raw outputs, notes, and the variant's device evidence."""

    raw: dict[str, bytes]
    """File name -> bytes, kept in the bundle under ``artifacts/<variant>/``."""
    notes: tuple[str, ...]
    evidence: Callable[[int | None], DeviceEvidence]
    """The variant's device evidence, given how many device events its trace holds."""
    artifact_kind: str = "device-summary"


def first_link(root: Path, path: Path) -> Path | None:
    """The first symbolic link on the way from ``root`` (not itself: the user named it) down to ``path``, or None.

    A profiler's folder is read only through real folders and files: a linked session or pid folder, or a linked
    file, could pull in files from anywhere, and what is read is copied into the bundle and the site.
    """
    step = root
    for part in path.relative_to(root).parts:
        step = step / part
        if step.is_symlink():
            return step
    return None


def links_below(root: Path) -> list[Path]:
    """Every symbolic link under ``root`` (none followed), sorted."""
    found = []
    for folder, dirs, files in os.walk(root):  # os.walk lists a linked folder among dirs but never enters it
        found += [Path(folder) / n for n in dirs + files if (Path(folder) / n).is_symlink()]
    return sorted(found)


@dataclass(frozen=True)
class ImportLayout:
    """A profiler's output folder: where its traces sit and which device files beside them are kept."""

    name: str
    """Stored as the import's ``layout`` parameter (e.g. ``neuron-profile-output``)."""
    description: str
    find_traces: Callable[[Path], list[Path]]
    artifact_suffixes: tuple[str, ...]
    summarize: Callable[[Path, int, Path], DeviceSummary] | None = None
    """(trace file, profiled steps, scratch folder) -> what the device's own tools add to that variant."""

    def artifacts(self, folder: Path) -> tuple[Path, ...]:
        """The device files in ``folder`` (real files only: a link could pull in a file from anywhere)."""
        return tuple(sorted(p for p in folder.iterdir() if p.suffix.lower() in self.artifact_suffixes
                            and p.is_file() and not p.is_symlink()))


@dataclass(frozen=True)
class Device:
    """Everything reportgen knows about one kind of device, in one place."""

    kind: DeviceKind
    title: str
    lanes: LaneRules = LaneRules()
    evidence: TraceEvidence | None = None
    evidence_rank: int = 100
    """Order in which devices' evidence is tried on a trace (lower first)."""
    environment_fields: tuple[EnvField, ...] = ()
    backend: Callable[[], Backend] | None = None
    """Makes the profiling backend (torch is imported only when it is used); None: import only."""
    auto_rank: int = 100
    """Order in which ``--device auto`` tries backends (lower first)."""
    import_layout: ImportLayout | None = None
    extras_from_trace: Callable[[TraceHeader], dict[str, str]] = field(default=lambda trace: {})
    """Device extras an imported trace records (e.g. the CUDA runtime version)."""
