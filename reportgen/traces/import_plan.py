"""Stage 1 of ``reportgen import``: find the trace files (and device files) at the path given; nothing is read.

The path is one trace file, a folder of trace files (each a variant), or a device profiler's output
folder as a device module declares it (``reportgen.devices``; today TorchNeuron's ``profile_output/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from reportgen import devices
from reportgen.devices.spec import Device, ImportLayout, links_below
from reportgen.errors import TraceError
from reportgen.store.layout import safe_component

_TRACE_SUFFIXES = (".gz", ".json", ".trace", ".pt")


class Layout(str, Enum):
    """What the imported path was."""

    FILE = "file"
    FOLDER = "folder"
    DEVICE_FOLDER = "device-folder"
    """A device profiler's output folder (``ImportPlan.device`` says whose)."""


@dataclass(frozen=True)
class TraceInput:
    """One trace file to import, the variant name it will get, and the device files found beside it."""

    path: Path
    variant: str
    artifacts: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ImportPlan:
    """Everything found at the path the user gave, before anything is read."""

    source: Path
    layout: Layout
    inputs: tuple[TraceInput, ...]
    notes: tuple[str, ...] = ()
    device: tuple[Device, ImportLayout] | None = None
    """For a DEVICE_FOLDER: the device and its folder layout."""

    @property
    def layout_name(self) -> str:
        """The layout as stored in the run (``file``, ``folder``, or the device layout's name)."""
        return self.device[1].name if self.device else self.layout.value


def plan_import(path: Path) -> ImportPlan:
    """Find the trace files (and Neuron artifacts) at ``path``; nothing is read yet."""
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder; pass a trace (.json, .json.gz) or a profile_output/ folder")
    if path.is_file():
        return ImportPlan(path, Layout.FILE, (TraceInput(path, variant_name_for(path)),))
    if not path.is_dir():  # a FIFO, socket or device: reading it could block forever, listing it fails
        raise TraceError(f"{path}: is not a regular file or a folder; pass a trace file (.json, .json.gz) or a "
                         "profile_output/ folder")
    links = [p.relative_to(path).as_posix() for p in links_below(path)]
    for device, layout in devices.import_layouts():
        found = layout.find_traces(path)  # only through real folders (devices.spec.first_link)
        if found:
            inputs = _unique([TraceInput(t, _folder_variant(path, t), layout.artifacts(t.parent)) for t in found])
            notes = (f"skipped symbolic links in the profile folder: {_names(links)}",) if links else ()
            return ImportPlan(path, Layout.DEVICE_FOLDER, inputs, notes, (device, layout))
    named = sorted(p for p in path.iterdir() if not p.name.startswith(".") and p.name.lower().endswith((".json", ".json.gz")))
    files = [p for p in named if p.is_file() and not p.is_symlink()]  # a link could pull in a file from anywhere
    if not files:
        layouts = " or ".join(layout.description for _, layout in devices.import_layouts())
        skipped = f" (symbolic links are not followed: {_names(links)})" if links else ""
        raise TraceError(f"{path}: no trace files (*.json, *.json.gz) and no {layouts} "
                         f"in this folder{skipped}; pass a trace file or a profile_output/ folder")
    top = [p.name for p in named if p.is_symlink()]
    notes = (f"skipped symbolic links in the folder: {', '.join(top)}",) if top else ()
    return ImportPlan(path, Layout.FOLDER, _unique([TraceInput(p, variant_name_for(p)) for p in files]), notes)


def _names(links: list[str], shown: int = 5) -> str:
    """The first few link names, and how many more."""
    more = f" and {len(links) - shown} more" if len(links) > shown else ""
    return ", ".join(links[:shown]) + more


def variant_name_for(path: Path) -> str:
    """A variant name from a trace file name: ``rank0.pt.trace.json.gz`` -> ``rank0``, made path-safe."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in _TRACE_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return safe_component(name)


def _folder_variant(root: Path, trace_file: Path) -> str:
    """A device folder's variant name: the trace's folder path below the root (``pid_1-20260101``)."""
    rel = trace_file.parent.relative_to(root).parts
    return safe_component("-".join(rel) if rel else root.name)


def _unique(inputs: list[TraceInput]) -> tuple[TraceInput, ...]:
    """Make variant names unique by numbering repeats (``a``, ``a-2``, ``a-3``)."""
    seen: set[str] = set()
    out = []
    for item in inputs:
        name, n = item.variant, 1
        while name in seen:
            n += 1
            name = f"{item.variant}-{n}"
        seen.add(name)
        out.append(TraceInput(item.path, name, item.artifacts))
    return tuple(out)
