"""An object store (``s3://`` or ``gs://bucket/prefix``) holding the same bundles as a folder store, written
create-only.

Layout: ``<prefix>/<run_id>/run.json`` and the bundle's members beside it, as in a folder store;
``<prefix>/.withdrawn/<run_id>/<stamp>-<nonce>.json`` one object per withdrawal.

- **Create-only.** Every object is written with a conditional create (fsspec's ``mode="create"``): S3's
  ``If-None-Match: *`` through s3fs, GCS's ``ifGenerationMatch=0`` through gcsfs. An existing object is never
  replaced, and a second run with the same id is refused.
- **Whole or not at all.** A bundle's members are uploaded first and its ``run.json`` last; a run exists
  only once its ``run.json`` does, so a writer killed mid-upload leaves nothing that lists as a run.
- **Withdrawals are objects of their own**: no read-modify-write, so concurrent ``rm`` never lose one.
- Credentials come from the provider's standard chain (s3fs/botocore: environment, ``~/.aws``, an
  instance role; ``AWS_ENDPOINT_URL_S3`` for an S3-compatible server. gcsfs/google-auth:
  ``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's application-default login, the instance's service account;
  ``STORAGE_EMULATOR_HOST`` for a GCS emulator, reached without credentials); URLs are shown only through
  ``shown_url``.

Reading commands mirror the store into a local cache folder (:func:`sync_store`): bundles are
immutable, so a bundle already in the cache is never fetched again; new ones are fetched in parallel. The store
is listed one level deep, an entry per run folder, not per object (a run's traces and artifacts are several objects:
a listing of every object of 2,000 four-object runs took 2.2 s against a local S3 server, one level 0.07 s); a listed
run without its ``run.json`` is an upload under way, left out until it has one. A build mirrors only each new
run's ``run.json`` (``members=False``), marked in ``<cache>/.members-pending/``, and fetches the other members of
the runs whose pages it draws with their traces (:func:`complete_bundles`); any other reading command completes
every marked bundle first.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import Any, TypeVar

from reportgen.errors import BundleError, ConflictError
from reportgen.model.codec import from_jsonable, to_jsonable
from reportgen.store.layout import RUN_FILE, is_safe_relpath, is_valid_run_id
from reportgen.store.withdrawn import Withdrawal, write_withdrawn
from reportgen.store.writer import make_temp_dir, remove_stale_temp_dirs
from reportgen.text.documents import Limits, load_json
from reportgen.text.terminal import printable

WITHDRAWN_PREFIX = ".withdrawn"
PENDING_DIR = ".members-pending"
"""In a mirror: one empty file per run whose ``run.json`` alone was fetched (hidden: never listed as a run)."""
WITHDRAWAL_LIMITS = Limits(max_bytes=64 * 1024)
WORKERS = 16
"""Parallel listings and downloads when mirroring the store."""
T = TypeVar("T")


class ObjectStoreError(BundleError):
    """The object store cannot be reached or read (no bucket, no credentials, refused)."""


HINTS = {"s3": "the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...) and AWS_ENDPOINT_URL_S3",
         "gs": "the credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login) and "
               "STORAGE_EMULATOR_HOST"}
"""Per scheme, what to check when the store cannot be reached (names of settings, never their values)."""


@dataclass(frozen=True)
class ObjectStore:
    """``s3://`` or ``gs://bucket/prefix`` through an fsspec filesystem (s3fs, gcsfs); ``root`` is
    ``bucket/prefix``."""

    url: str
    fs: Any
    root: str

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0]

    @classmethod
    def open(cls, url: str) -> ObjectStore:
        """The store at ``url`` (checked by ``location.store_value``), with credentials from the standard chain."""
        scheme, root = url.split("://", 1)
        return cls(url, _filesystem(scheme), root)

    def _key(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def _failed(self, exc: Exception, doing: str) -> ObjectStoreError:
        reason = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)[:200]
        return ObjectStoreError(f"{self.url}: cannot {doing} ({type(exc).__name__}: {reason}); check the bucket, "
                                f"{HINTS[self.scheme]}")

    def listed_ids(self) -> list[str]:
        """Ids of the run folders the store lists, sorted: one paginated listing of the prefix's first level, an entry
        per run (not per object: a run's traces and artifacts are not listed). A run whose upload is under way is
        listed too, without its ``run.json``: a reader takes a run only with its ``run.json`` (:func:`sync_store`,
        ``ab``'s search for a calibration)."""
        try:
            entries = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        except Exception as exc:  # noqa: BLE001 - any client failure is the store's, named in one line
            raise self._failed(exc, "list the runs") from None
        prefix = self.root + "/"
        names = {e[len(prefix):].rstrip("/") for e in entries if e.startswith(prefix)}
        return sorted(filter(is_valid_run_id, names))

    def put_bundle(self, folder: Path, before_run_json: Callable[[], None] | None = None) -> str:
        """Upload the bundle in ``folder`` create-only, ``run.json`` last; refuse a run id already stored."""
        run_id = folder.name
        members = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        if RUN_FILE not in members or not is_valid_run_id(run_id) or not all(map(is_safe_relpath, members)):
            raise BundleError(f"{folder}: not a run bundle; the run was not uploaded")
        for rel in [m for m in members if m != RUN_FILE] + [RUN_FILE]:
            if rel == RUN_FILE and before_run_json is not None:
                before_run_json()
            self._create(f"{run_id}/{rel}", (folder / rel).read_bytes(), run_id)
        return run_id

    def _create(self, rel: str, data: bytes, run_id: str) -> None:
        try:
            self.fs.pipe_file(self._key(rel), data, mode="create")
        except FileExistsError:
            raise ConflictError(f"{self.url}/{run_id}: a run with this id already exists (or is being uploaded); "
                                "stored runs are never overwritten") from None
        except Exception as exc:  # noqa: BLE001
            raise self._failed(exc, f"write {rel}") from None

    def add_withdrawal(self, entry: Withdrawal) -> None:
        """Record ``entry`` as an object of its own (never read-modify-write)."""
        data = json.dumps(to_jsonable(entry), sort_keys=True).encode()
        rel = f"{WITHDRAWN_PREFIX}/{entry.run_id}/{entry.withdrawn_utc}-{secrets.token_hex(6)}.json"
        self._create(rel, data, entry.run_id)

    def withdrawals(self) -> dict[str, Withdrawal]:
        """Run id -> its latest withdrawal, from the withdrawal objects."""
        base = self._key(WITHDRAWN_PREFIX)
        try:
            keys = sorted(self.fs.find(base))
            blobs = self.fs.cat(keys) if keys else {}
        except FileNotFoundError:
            return {}
        except Exception as exc:  # noqa: BLE001
            raise self._failed(exc, "read the withdrawals") from None
        out: dict[str, Withdrawal] = {}
        for key in keys:
            source = f"{self.scheme}://{key}"
            fix = "delete that object and run 'reportgen rm' again"
            entry = from_jsonable(Withdrawal, load_json(blobs[key], source, WITHDRAWAL_LIMITS, fix=fix,
                                                        error=BundleError), source)
            if key.split("/")[-2] != entry.run_id:
                raise BundleError(f"{source}: field 'run_id' is {entry.run_id!r}, not its folder's; {fix}")
            if entry.run_id not in out or entry.withdrawn_utc >= out[entry.run_id].withdrawn_utc:
                out[entry.run_id] = entry
        return out

    def read_run_jsons(self, run_ids: Sequence[str], *, skip_unreadable: bool = False) -> dict[str, bytes]:
        """The ``run.json`` of each of ``run_ids`` (one concurrent request per run), by run id; a run without one (not
        uploaded yet) is left out, one that cannot be read otherwise is an error naming it (``skip_unreadable``: left
        out too, for a search that passes over what it cannot read)."""
        keys = {self._key(f"{i}/{RUN_FILE}"): i for i in run_ids}
        try:
            blobs = self.fs.cat(list(keys), on_error="return") if keys else {}
        except Exception as exc:  # noqa: BLE001
            raise self._failed(exc, "read runs") from None
        failed = sorted(k for k, data in blobs.items() if k in keys and not isinstance(data, (bytes, FileNotFoundError)))
        if failed and not skip_unreadable:
            raise self._failed(blobs[failed[0]], f"read {keys[failed[0]]}/{RUN_FILE} ({len(failed)} run(s))")
        return {keys[k]: data for k, data in blobs.items() if k in keys and isinstance(data, bytes)}

    def bundle_objects(self, run_id: str) -> dict[str, bytes]:
        """Every object of one run, by its path inside the bundle (each checked to stay inside it); none, and nothing
        read, when its ``run.json`` is not among them (an upload under way, or one a killed writer left: read again
        by every sync otherwise)."""
        prefix = self._key(run_id) + "/"
        try:
            keys = [k for k in self.fs.find(self._key(run_id)) if k.startswith(prefix)]
            blobs = self.fs.cat(keys) if prefix + RUN_FILE in keys else {}
        except Exception as exc:  # noqa: BLE001
            raise self._failed(exc, f"read run {run_id}") from None
        out = {}
        for key, data in blobs.items():
            rel = key[len(prefix):]
            if not is_safe_relpath(rel):
                raise BundleError(f"{self.url}/{run_id}: member {printable(rel)!r} is not a safe path")
            out[rel] = data
        return out

    def fetch_bundle(self, run_id: str, cache: Path) -> bool:
        """Copy one complete run into ``cache`` (a temporary folder renamed into place); False, and nothing copied,
        for a run whose ``run.json`` is not uploaded yet."""
        objects = self.bundle_objects(run_id)
        if RUN_FILE not in objects:
            return False
        _place(cache, run_id, objects)
        return True


def _place(cache: Path, run_id: str, files: dict[str, bytes]) -> None:
    """A run folder of ``files`` in ``cache``, written in a temporary folder and renamed into place (a reader of the
    cache never sees half of it); a folder another reader placed first is kept."""
    tmp = make_temp_dir(cache, run_id[:40])
    try:
        for rel, data in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        os.rename(tmp, cache / run_id)
    except OSError:
        if not (cache / run_id).is_dir():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _filesystem(scheme: str) -> Any:
    """An fsspec filesystem for ``scheme`` that lists afresh every time (other writers add runs).

    GCS: gcsfs's core filesystem, not the default class of its package, which first asks the storage-control gRPC
    API for the bucket's type (about a minute before it gives up against an emulator) to serve hierarchical and
    zonal buckets; reportgen writes and reads whole plain objects, which every bucket type serves."""
    if scheme == "gs":
        from gcsfs.core import GCSFileSystem

        token = "anon" if os.environ.get("STORAGE_EMULATOR_HOST") else None  # an emulator takes no credentials
        return GCSFileSystem(token=token, use_listings_cache=False)
    import s3fs

    return s3fs.S3FileSystem(use_listings_cache=False)


def sync_store(store: ObjectStore, cache: Path, *, members: bool = True) -> list[str]:
    """Mirror ``store``'s complete runs and withdrawals into ``cache``; returns the run ids fetched. ``members``:
    whole bundles (and the members of bundles an earlier build fetched only the ``run.json`` of); False: only the
    ``run.json`` of each new run, its other members marked pending (see :func:`complete_bundles`)."""
    cache.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_dirs(cache)
    ids = store.listed_ids()
    wanted = [i for i in ids if not (cache / i / RUN_FILE).is_file()]
    if members:
        fetched = list(compress(wanted, _parallel(lambda run_id: store.fetch_bundle(run_id, cache), wanted)))
        complete_bundles(store, cache, ids)
    else:
        fetched = _fetch_run_jsons(store, cache, wanted)
    write_withdrawn(cache, store.withdrawals())
    return fetched


RUN_JSON_BATCH = 512
"""``run.json`` files fetched (concurrently) per request batch when a build mirrors new runs: bounded memory."""


def _fetch_run_jsons(store: ObjectStore, cache: Path, run_ids: Sequence[str]) -> list[str]:
    """The ``run.json`` alone of each of ``run_ids`` (fetched concurrently, in batches), each run marked pending
    before its folder appears, so that a bundle in the cache is whole or marked; returns the runs fetched (a listed
    run without its ``run.json`` is an upload under way: left out until it has one)."""
    pending = cache / PENDING_DIR
    pending.mkdir(exist_ok=True)
    fetched: list[str] = []
    for start in range(0, len(run_ids), RUN_JSON_BATCH):
        found = store.read_run_jsons(run_ids[start:start + RUN_JSON_BATCH])
        for run_id, data in sorted(found.items()):
            (pending / run_id).touch()
            _place(cache, run_id, {RUN_FILE: data})
            fetched.append(run_id)
    return fetched


def complete_bundles(store: ObjectStore, cache: Path, run_ids: Iterable[str]) -> None:
    """Fetch the other members of those of ``run_ids`` whose ``run.json`` alone is in ``cache``."""
    pending = cache / PENDING_DIR
    try:
        marked = set(os.listdir(pending))
    except FileNotFoundError:
        return
    _parallel(lambda run_id: _complete(store, cache / run_id, pending / run_id), [i for i in run_ids if i in marked])


def _complete(store: ObjectStore, bundle: Path, marker: Path) -> None:
    """Write a pending bundle's members beside its ``run.json`` (each through a temporary file), then unmark it."""
    for rel, data in store.bundle_objects(bundle.name).items():
        if rel != RUN_FILE:
            target = bundle / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
    marker.unlink(missing_ok=True)


def upload_new(store: ObjectStore, staging: Path) -> list[str]:
    """Upload every bundle written into ``staging`` (a command's fresh local store), create-only."""
    folders = sorted(p for p in staging.iterdir() if p.is_dir() and (p / RUN_FILE).is_file())
    return [store.put_bundle(p) for p in folders]


def _parallel(fn: Callable[[str], T], items: Iterable[str]) -> list[T]:
    """``[fn(i) for i in items]``, ``WORKERS`` at a time."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(fn, items))
