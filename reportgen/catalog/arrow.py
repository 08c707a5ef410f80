"""pyarrow, imported when first needed (a command that reads no catalog never loads it), with the memory pool the
catalog is read with, and Arrow's compute kernels called without ``pyarrow.compute``."""

from __future__ import annotations

import functools
import os
from collections.abc import Collection
from typing import Any


@functools.cache
def pa() -> Any:
    """pyarrow, with the C library's allocator as its default memory pool (unless $ARROW_DEFAULT_MEMORY_POOL names
    one): a build reads a catalog once, and with pyarrow's bundled mimalloc the first history-window read of a
    10,000-run catalog had slow outliers (up to 97.5 ms against at most 54.2 ms, medians 47.4 and 46.1 ms, 15 fresh
    processes each: ``benchmarks/catalog_first_read.py``)."""
    import pyarrow

    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    return pyarrow


def pc() -> Any:
    """Arrow's compute kernels without ``pyarrow.compute``, whose import wraps every kernel in a Python function
    (about 0.1 s of adding one run to a site, with ``pyarrow.dataset``, which a filtered read_table imports)."""
    pa()
    import pyarrow._compute

    return pyarrow._compute


def pq() -> Any:
    """pyarrow.parquet (its files read with :func:`pa`'s memory pool)."""
    pa()
    import pyarrow.parquet

    return pyarrow.parquet


def is_in(column: Any, values: Collection[str]) -> Any:
    """A boolean mask: which of ``column``'s strings are in ``values``."""
    return pc().call_function("is_in", [column], pc().SetLookupOptions(pa().array(sorted(values), pa().string())))


def where(table: Any, mask: Any) -> Any:
    """The rows of ``table`` where ``mask`` is true."""
    return pc().call_function("filter", [table, mask])
