"""Keep the catalog true to the store, and read it.

:func:`record` adds one run's part as the run is stored (``profile``, ``import``, ``ab``). :func:`sync` is what
readers call: it lists the store's bundles (one ``lstat`` of each ``run.json``, no reads), adds the rows of bundles
the catalog lacks or whose ``run.json`` changed (size or modification time), drops rows of bundles no longer
there, and writes what changed as one new part: merged with the newest parts when more than ``MAX_PARTS`` would be
left, or with every part (a compaction) when rows were dropped. The catalog is a cache of the bundles: a missing,
unreadable or foreign catalog is rebuilt from them, and a store the process cannot write is still read (the rows
are then computed in memory each time).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reportgen.analysis.digest_json import digest_from_json
from reportgen.analysis.history import (
    GroupPoint,
    HistoryGroup,
    RunDigest,
    digest,
    group_key,
    group_points,
    groups_from_points,
    key_text,
    run_counts,
)
from reportgen.catalog import table
from reportgen.catalog.rows import Entry, PartColumns, Rows
from reportgen.catalog.table import CATALOG_DIR, CatalogRun, Part, PartVanished
from reportgen.errors import BundleError
from reportgen.model.codec import to_jsonable
from reportgen.model.run import Run
from reportgen.store.layout import RUN_FILE
from reportgen.store.loader import StoreListing, list_store, load_run

MAX_PARTS = 8
"""More parts than this after a write: the write merges the newest parts into one (:func:`_merge_tail`)."""


@dataclass(frozen=True)
class Catalog:
    """The store's runs as the catalog has them, after a sync; and the bundles that could not be read."""

    folder: Path
    entries: Rows
    problems: tuple[BundleError, ...] = ()
    fresh_points: tuple[GroupPoint, ...] = ()
    """Points of rows computed by this sync but not written (a store this process cannot write)."""

    def columns(self) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """Each run's run.json hash, time and history key, by run id (what a build plans from)."""
        return (self.entries.column("run_json_sha256"), self.entries.column("created_utc"),
                self.entries.column("history_key"))

    def digests(self, run_ids: Sequence[str] | None = None) -> list[RunDigest]:
        """The digests of ``run_ids`` (default: every run), oldest first."""
        ids = list(self.entries if run_ids is None else run_ids)
        texts = self.digest_texts(ids)
        rows = sorted((self.entries[i].run for i in ids), key=lambda r: (r.created_utc, r.run_id))
        return [digest_from_json(json.loads(texts[r.run_id]), self.folder / r.run_id, "digest") for r in rows]

    def digest_texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The digest JSON of each run in ``ids``: from memory, else from its part (one read per part), else (the
        part compacted away since this sync) from its bundle."""
        texts = {i: text for i in ids if (text := self.entries.held_digest(i)) is not None}
        for part, wanted in self.entries.by_part(i for i in ids if i not in texts).items():
            try:
                texts.update(table.read_digests(part, wanted))
            except PartVanished:
                pass
        store = self.folder.parent
        for i in ids:
            if i not in texts:
                texts[i] = catalog_run(load_run(store / i), store / i)[0].digest_json or "null"
        return texts

    def groups(self, key: str | None = None) -> tuple[HistoryGroup, ...]:
        """History groups (only ``key``'s when given) read from the points table, not from every digest."""
        return groups_from_points(self.points(key))

    def points(self, key: str | None = None) -> list[GroupPoint]:
        """The points of the catalog's current rows (only group ``key``'s when given)."""
        parts = self.entries.parts()
        try:
            found = [p for part, p in table.read_points(parts, key) if self._current(p.run_id, part)]
        except PartVanished:  # compacted since this sync: the digests hold the same points
            every = [p for d in self.digests() for p in group_points(d)]
            return [p for p in every if key is None or p.key == key]
        return found + [p for p in self.fresh_points if key is None or p.key == key]

    def latest_points(self, run_ids: Collection[str], window: int) -> tuple[list[GroupPoint], dict[str, int]]:
        """The points of ``run_ids`` in each group's latest ``window`` of them, and each group's count of them."""
        wanted = self.entries.by_part(run_ids)
        every = self.entries.part_ids()
        unwanted = {part: set(every[part]).difference(ids) for part, ids in wanted.items()
                    if part in every and len(ids) > len(every[part]) // 2}
        try:
            found, totals = table.latest_points(wanted, window, unwanted)
        except PartVanished:  # compacted since this sync: the digests hold the same points
            found = [p for d in self.digests([i for i in run_ids if i in self.entries]) for p in group_points(d)]
            return found, run_counts(found)
        fresh = [p for p in self.fresh_points if p.run_id in run_ids]
        for key, count in run_counts(fresh).items():
            totals[key] = totals.get(key, 0) + count
        return found + fresh, totals

    def _current(self, run_id: str, part: Part) -> bool:
        return self.entries.part_of(run_id) == part


def catalog_folder(store: Path) -> Path:
    """Where the catalog of ``store`` lives: ``<store>/.catalog`` (hidden: never listed as a run)."""
    return store / CATALOG_DIR


def catalog_run(run: Run, bundle: Path) -> tuple[CatalogRun, list[GroupPoint]]:
    """The catalog's row and points of a stored run (its bundle's run.json hashed and stat'ed)."""
    path = bundle / RUN_FILE
    data = path.read_bytes()
    st = os.stat(path)
    d = digest(run)
    row = CatalogRun(run.run_id, run.created_utc, run.scenario.name, d.device.value, d.machine,
                     hashlib.sha256(data).hexdigest(), st.st_size, st.st_mtime_ns, key_text(group_key(d)),
                     json.dumps(to_jsonable(d), sort_keys=True, allow_nan=False))
    return row, group_points(d)


def record(store: Path, run: Run, bundle: Path) -> bool:
    """Add a just-stored run to the catalog as a part of its own; False when the catalog cannot be written.

    The run is stored either way: the catalog is a cache of the bundles, and the next reader adds what a write
    could not (so a full disk or a read-only ``.catalog`` never fails a measurement).
    """
    try:
        row, points = catalog_run(run, bundle)
        table.write_part(catalog_folder(store), [row], points)
    except OSError:
        return False
    return True


Mapper = Callable[[Callable[[Path], "Read"], Sequence[Path]], list["Read"]]
"""How :func:`sync` reads the bundles the catalog lacks: ``mapper(fn, paths)`` is ``[fn(p) for p in paths]``, in
this process (the default) or across worker processes (a build's first sync of a big store, where each bundle is
decoded and summarised: ``benchmarks/load_run_cost.py`` times the decoding)."""
Read = tuple[CatalogRun, list[GroupPoint]] | BundleError


def sync(store: Path, listing: StoreListing | None = None, *, verify: bool = True,
         mapper: Mapper | None = None) -> Catalog:
    """The catalog of ``store`` brought up to date with its bundles (written back when it changed and can be);
    ``listing``: the store's run folders, when the caller has just listed them. ``verify``: check each known
    bundle's run.json against its row (one ``lstat`` per run; a bundle changed by hand is read again); False
    trusts the rows of the bundles the catalog knows (bundles are written once and never changed), for a build
    whose cost must not grow with the store. ``mapper``: see :data:`Mapper`."""
    folder = catalog_folder(store)
    if listing is None:
        listing = list_store(store)  # first: a store that cannot be listed is named as the store, not its catalog
    parts, known = _read_retrying(lambda: _current_rows(folder))
    names = set(listing.names)
    stale = list(listing.links.union(names.difference(known.ids())))  # set operations: no Python step per run
    if verify:
        root = os.fspath(store)
        stale += [n for n in listing.names if n in known and n not in listing.links
                  and not _unchanged(known[n].run, os.path.join(root, n, RUN_FILE))]
    entries = known.only(names.difference(stale))
    added, problems = _read_bundles(listing, sorted(stale), mapper)
    for row, _ in added:
        entries.put(Entry(row, None))
    dropped = len(known) - (len(entries) - len(added))
    fresh = [p for _, points in added for p in points]
    if added or dropped or len(parts) > MAX_PARTS:
        merged = parts if dropped else _merge_tail(parts, entries, len(added))
        written = _write_back(folder, merged, entries, fresh)
        if written is not None:
            return Catalog(folder, written, tuple(problems))
    return Catalog(folder, entries, tuple(problems), tuple(fresh))


def _read_bundles(listing: StoreListing, names: Sequence[str], mapper: Mapper | None = None
                  ) -> tuple[list[tuple[CatalogRun, list[GroupPoint]]], list[BundleError]]:
    """The rows and points of the bundles ``names`` (loaded), and the errors of those that do not load."""
    paths = [listing.path(n) for n in names]
    read = [_read_bundle(p) for p in paths] if mapper is None else mapper(_read_bundle, paths)
    added = [r for r in read if not isinstance(r, BundleError)]
    return added, [r for r in read if isinstance(r, BundleError)]


def _read_bundle(bundle: Path) -> Read:
    """One bundle's row and points, or the error that names why it cannot be read (returned: it may cross from a
    worker process)."""
    try:
        return catalog_run(load_run(bundle), bundle)
    except BundleError as exc:
        return exc
    except OSError as exc:
        return BundleError(f"{bundle / RUN_FILE}: unreadable ({exc.strerror})")


def _unchanged(row: CatalogRun, run_json: str) -> bool:
    """Whether a bundle's run.json is the regular file the row was read from (size and modification time; one
    ``lstat`` of a string per stored run per sync). A run.json that became a link counts as changed, so it is
    loaded again, and refused: an entry of the catalog is a bundle that loads."""
    try:
        st = os.lstat(run_json)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == row.run_json_bytes and st.st_mtime_ns == row.run_json_mtime_ns


def _current_rows(folder: Path) -> tuple[list[Part], Rows]:
    """The readable parts and, per run, the row of the newest part listing it."""
    parts: list[Part] = []
    known = Rows()
    for part in table.list_parts(folder):
        try:
            read = table.read_part_columns(part)
            columns = None if read is None else PartColumns(read)
        except PartVanished:
            raise
        except Exception:  # noqa: BLE001  pyarrow's errors for a damaged file: a cache to rebuild, not to fail on
            columns = None
        if columns is None or not columns.complete:  # a column missing or a row without a run id: damaged
            continue
        parts.append(part)
        known.add_part(part, columns)
    return parts, known


def _merge_tail(parts: list[Part], entries: Rows, added: int) -> list[Part]:
    """The newest parts that a write merges with its rows when the catalog would otherwise hold more than
    ``MAX_PARTS`` parts: at least half of ``MAX_PARTS``, then each older part no bigger than those merged so far.

    A part is merged with parts about its own size, so a run's row is rewritten about log2(runs) times over the
    catalog's life, and the big part of a 10,000-run store is not rewritten for every ``MAX_PARTS`` runs added."""
    if len(parts) + (1 if added else 0) <= MAX_PARTS:
        return []
    rows = entries.rows_per_part()
    tail = parts[-(MAX_PARTS // 2):]
    total = added + sum(rows.get(p, 0) for p in tail)
    for part in reversed(parts[: len(parts) - len(tail)]):
        if rows.get(part, 0) > total:
            break
        tail.insert(0, part)
        total += rows.get(part, 0)
    return tail


def _write_back(folder: Path, merged: list[Part], entries: Rows, fresh: list[GroupPoint]) -> Rows | None:
    """Write the new rows as one part, with the rows of the ``merged`` parts (then deleted) when there are any; the
    entries as written, or None when the folder cannot be written (the caller keeps them in memory). Merging
    every part is a compaction: it also drops the rows of runs no longer in the store."""
    moved = entries.unwritten() + entries.in_parts(set(merged))
    try:
        if not merged:
            part = table.write_part(folder, [entries[i].run for i in moved], fresh)
            for i in moved:
                entries.put(Entry(entries[i].run, part))
            return entries
        current = Catalog(folder, entries)
        kept = [p for part, p in table.read_points(merged) if current._current(p.run_id, part)]
        texts = current.digest_texts(moved)
        rows = [replace(entries[i].run, digest_json=texts[i]) for i in moved]
        part = table.write_part(folder, rows, [*kept, *fresh])
        table.delete_parts(merged)
        for r in rows:
            entries.put(Entry(replace(r, digest_json=None), part))
        return entries
    except (OSError, PartVanished):  # another reader merged these parts first: its part holds the same rows
        return None


def _read_retrying(read: Any) -> Any:
    """``read()``, listed again while a compaction deletes parts under it."""
    for _ in range(table.READ_ATTEMPTS - 1):
        try:
            return read()
        except PartVanished:
            continue
    return read()
