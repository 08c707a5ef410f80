"""The catalog's current rows by run id, kept in the columns they were read in.

A build of a 10,000-run store reads every row of the catalog but needs an object for few of them (the runs it
draws, the index's newest): an object per row cost it more than the rest of its work for the runs it does not
draw. :class:`Rows` is a mapping from run id to :class:`Entry` that makes an entry only when one is asked for, and
answers the build's questions (each run's hash, time and series; which part holds a run) in bulk.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, KeysView, Mapping
from dataclasses import dataclass
from itertools import compress
from typing import Any

from reportgen.catalog.table import LISTING_COLUMNS, CatalogRun, Part

MADE = -1
"""The owner of a row held as an Entry (computed by this process, or moved to a part it wrote)."""


@dataclass(frozen=True)
class Entry:
    """A run of the catalog and the part its row was read from (None: computed now, not yet written)."""

    run: CatalogRun
    part: Part | None


class PartColumns(Mapping[str, list[Any]]):
    """The LISTING_COLUMNS of a part's runs, each made a Python list only when first asked for: a build of a
    10,000-run store uses four of them (id, hash, time, series) and a few rows of the others."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self._lists: dict[str, list[Any]] = {}

    def __getitem__(self, name: str) -> list[Any]:
        found = self._lists.get(name)
        if found is None:
            if name not in LISTING_COLUMNS:
                raise KeyError(name)
            found = self._lists[name] = self._table.column(name).to_pylist()
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(LISTING_COLUMNS)

    def __len__(self) -> int:
        return len(LISTING_COLUMNS)

    def value(self, name: str, at: int) -> Any:
        """Row ``at``'s value of one column, without making the column a list."""
        found = self._lists.get(name)
        return found[at] if found is not None else self._table.column(name)[at].as_py()

    @property
    def complete(self) -> bool:
        """Whether every column is there (a file missing one reads without it) and every row has a run id (the
        columns of one table are as long as each other)."""
        names = self._table.column_names
        return all(n in names for n in LISTING_COLUMNS) and self._table.column("run_id").null_count == 0


class Rows(Mapping[str, Entry]):
    """Run id -> Entry: the rows of the parts read (a newer part's row of a run wins) and entries made here."""

    def __init__(self) -> None:
        self._parts: list[tuple[Part, PartColumns, dict[str, int]]] = []
        self._owner: dict[str, int] = {}
        """Run id -> index in ``_parts`` of the part its row is read from, or MADE."""
        self._made: dict[str, Entry] = {}

    def add_part(self, part: Part, columns: PartColumns) -> None:
        """A part's rows: they replace the rows of the same runs read before."""
        ids = columns["run_id"]
        for i in ids if self._made else ():
            self._made.pop(i, None)
        self._parts.append((part, columns, dict(zip(ids, range(len(ids)), strict=True))))
        self._owner.update(dict.fromkeys(ids, len(self._parts) - 1))

    def put(self, entry: Entry) -> None:
        """One entry, replacing the run's row."""
        self._owner[entry.run.run_id] = MADE
        self._made[entry.run.run_id] = entry

    def only(self, keep: Collection[str]) -> Rows:
        """These rows for the runs of ``keep`` only (the same parts' columns, shared)."""
        out = Rows()
        out._parts = self._parts
        if len(keep) == len(self._owner) and self._owner.keys() == keep:  # nothing left out: one copy in C
            out._owner = dict(self._owner)
        else:
            out._owner = {i: self._owner[i] for i in keep if i in self._owner}
        out._made = {i: self._made[i] for i, k in out._owner.items() if k == MADE} if self._made else {}
        return out

    def __getitem__(self, run_id: str) -> Entry:
        k = self._owner[run_id]
        if k == MADE:
            return self._made[run_id]
        part, columns, index = self._parts[k]
        at = index[run_id]
        row = CatalogRun(*(columns.value(name, at) for name in LISTING_COLUMNS),  # type: ignore[misc]
                         digest_json=None)
        return Entry(row, part)

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._owner

    def ids(self) -> KeysView[str]:
        """The run ids, as a view a set operation takes in C (``in`` per id would be a Python call each)."""
        return self._owner.keys()

    def part_of(self, run_id: str) -> Part | None:
        """The part a run's row is read from (None: not written, or no such run)."""
        k = self._owner.get(run_id)
        if k is None:
            return None
        return self._made[run_id].part if k == MADE else self._parts[k][0]

    def held_digest(self, run_id: str) -> str | None:
        """The digest JSON of a run whose entry this process holds with it (computed or just written), else None."""
        return self._made[run_id].run.digest_json if self._owner.get(run_id) == MADE else None

    def column(self, name: str) -> dict[str, Any]:
        """One field of every row, by run id (each part's column zipped with its ids: no object per row)."""
        out: dict[str, Any] = {}
        for _, columns, _ in self._parts:
            out.update(zip(columns["run_id"], columns[name], strict=True))
        out.update((i, getattr(e.run, name)) for i, e in self._made.items())
        if len(out) != len(self._owner):
            for gone in out.keys() - self._owner.keys():
                del out[gone]
        return out

    def unwritten(self) -> list[str]:
        """The runs whose rows no part holds yet."""
        return [i for i, e in self._made.items() if e.part is None]

    def rows_per_part(self) -> dict[Part, int]:
        """How many current rows each part holds."""
        counts = Counter(self._owner.values())
        out = {self._parts[k][0]: n for k, n in counts.items() if k != MADE}
        for e in self._made.values():
            if e.part is not None:
                out[e.part] = out.get(e.part, 0) + 1
        return out

    def in_parts(self, parts: Collection[Part]) -> list[str]:
        """The runs whose current row is read from one of ``parts`` (none: a write that merges nothing asks for no
        step per run; else the owners are picked in C)."""
        if not parts:
            return []
        where = {k for k, (p, _, _) in enumerate(self._parts) if p in parts}
        return list(compress(self._owner, map(where.__contains__, self._owner.values()))) + [
            i for i, e in self._made.items() if e.part is not None and e.part in parts]

    def by_part(self, run_ids: Iterable[str]) -> dict[Part, list[str]]:
        """``run_ids`` that have a written row, grouped by the part it is read from."""
        grouped: dict[int, list[str]] = {}
        made: dict[Part, list[str]] = {}
        for i in run_ids:
            k = self._owner.get(i)
            if k is None:
                continue
            if k != MADE:
                grouped.setdefault(k, []).append(i)
            elif (part := self._made[i].part) is not None:
                made.setdefault(part, []).append(i)
        out = {self._parts[k][0]: ids for k, ids in grouped.items()}
        for part, ids in made.items():
            out.setdefault(part, []).extend(ids)
        return out

    def part_ids(self) -> dict[Part, list[str]]:
        """The runs of each part read (current or not), as its runs file lists them."""
        return {part: columns["run_id"] for part, columns, _ in self._parts}

    def parts(self) -> list[Part]:
        """The parts that hold a current row, oldest first."""
        return sorted(self.rows_per_part(), key=lambda p: p.stem)
