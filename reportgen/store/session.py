"""A command's store as a local folder: the folder itself, or an object store's local mirror or upload staging.

Commands that read (``runs``, ``compare``, ``rm``) get the object store mirrored into its cache folder first
(``build``: only what its pages need); commands that write (``profile``, ``import``, ``ab``) write into a fresh
staging folder whose bundles are uploaded create-only when the command finishes without an exception (an
interrupted command uploads nothing). A folder store is passed through unchanged.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen.errors import ReportgenError
from reportgen.store.withdrawn import Withdrawal, add_withdrawal

if TYPE_CHECKING:
    from reportgen.config import Config
    from reportgen.store.objects import ObjectStore


def object_store(config: Config) -> ObjectStore | None:
    """The object store ``config`` names, or None for a folder store."""
    if config.store_url is None:
        return None
    from reportgen.store.objects import ObjectStore

    return ObjectStore.open(config.store_url)


@contextlib.contextmanager
def reading_store(config: Config) -> Iterator[Path]:
    """The folder to read runs from: ``config.store``, mirrored from the object store first when there is one."""
    store = object_store(config)
    if store is not None:
        from reportgen.store.objects import sync_store

        sync_store(store, config.store)
    yield config.store


@contextlib.contextmanager
def building_store(config: Config) -> Iterator[tuple[Path, Callable[[Sequence[str]], None] | None]]:
    """For ``build``: the folder to read runs from and, for an object store, what fetches the bundles of the runs
    whose pages are drawn with their traces. The mirror gets only each new run's ``run.json`` first: a page
    reused, or drawn without traces (``--keep-traces``), needs no other member."""
    store = object_store(config)
    if store is None:
        yield config.store, None
        return
    from reportgen.store.objects import complete_bundles, sync_store

    sync_store(store, config.store, members=False)
    yield config.store, lambda run_ids: complete_bundles(store, config.store, run_ids)


@contextlib.contextmanager
def writing_store(config: Config) -> Iterator[Path]:
    """The folder to write new runs into; for an object store, a staging folder uploaded afterwards."""
    store = object_store(config)
    if store is None:
        yield config.store
        return
    from reportgen.store.objects import upload_new

    staging = Path(tempfile.mkdtemp(prefix="reportgen-upload-"))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # an interrupted or failed command uploads nothing
        raise
    try:
        uploaded = upload_new(store, staging)
    except ReportgenError as exc:  # the run is not lost: it stays in the staging folder, named in the message
        exc.args = (f"{exc.message}; the new run is kept in {staging}",)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    for run_id in uploaded:
        print(f"uploaded {run_id} to {store.url}/{run_id}")


def withdrawal_recorder(config: Config) -> Callable[[Path, Withdrawal], None]:
    """How ``rm`` records a withdrawal: in ``withdrawn.json`` under the lock, or as an object of its own."""
    store = object_store(config)
    if store is None:
        return add_withdrawal
    return lambda _folder, entry: store.add_withdrawal(entry)
