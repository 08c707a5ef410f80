"""The C allocator's settings a measurement ran under, recorded in every run's environment fingerprint.

They change what a CPU call costs (measured on this project's 2-core VM, benchmarks/README.md "alloc_probe.py"):
glibc serves an allocation of 32 MiB or more with a fresh ``mmap`` and unmaps it when freed, so a call that makes
large tensors page-faults them in on every call: 24,579 faults and about 25 of the 33 ms of a default-shape
``torch.rms_norm`` call there. An allocator that keeps freed memory (glibc told so through ``MALLOC_*_``, or jemalloc
or tcmalloc preloaded) skips that, so two runs are only comparable with the same settings. torch's own
``THP_MEM_ALLOC_ENABLE=1`` (2 MiB-aligned CPU allocations advised as transparent huge pages) cut those faults about
fifteenfold where THP is in ``madvise`` mode (benchmarks/README.md, "alloc_probe.py"), so it is recorded too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

RECORDED_PREFIXES = ("MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD", "TCMALLOC_", "JEMALLOC_", "THP_MEM_ALLOC_ENABLE")
"""Environment variables that change which allocator runs or how (glibc's ``MALLOC_*_``, jemalloc's
``MALLOC_CONF``, a preloaded allocator, torch's huge-page switch for CPU allocations)."""


def allocator_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allocator-related variables of ``environ`` (default: this process's), sorted by name."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in sorted(env) if k.startswith(RECORDED_PREFIXES)}


THP_ENABLED_FILE = Path("/sys/kernel/mm/transparent_hugepage/enabled")
"""Where Linux says whether a process may get transparent huge pages: ``always``, ``madvise`` (when asked, as
torch's allocator does with ``THP_MEM_ALLOC_ENABLE=1``) or ``never``; the selected one in brackets."""


def thp_mode(text: str) -> str | None:
    """The selected mode in that file's text (``"always [madvise] never"`` -> ``"madvise"``); None if none is."""
    found = re.search(r"\[([a-z+]+)\]", text)
    return found.group(1) if found else None


def read_thp_mode(path: Path = THP_ENABLED_FILE) -> str | None:
    """This kernel's transparent huge page mode; None where the file is missing or unreadable (not Linux, or a
    kernel without THP)."""
    try:
        return thp_mode(path.read_text(encoding="utf-8"))
    except OSError:
        return None
