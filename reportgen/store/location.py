"""Where a store lives: a folder path, a ``file://`` URL, or an ``s3://`` or ``gs://bucket/prefix`` URL; anything else
refused.

The one place a store's text (``--store``, ``$REPORTGEN_STORE``, the config's ``store``) is parsed.
A scheme reportgen cannot serve is refused in one line before any work is done: it is never taken
as a folder named ``s3:`` in the working directory. A URL is only ever shown through :func:`shown_url`,
which drops any user name, password, query and fragment, so credentials never reach a message or a page.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from reportgen.errors import UsageError

OBJECT_SCHEMES = ("s3", "gs")
"""Schemes served by the object-store backend (through fsspec: s3fs, gcsfs)."""
S3_EXTRA = "pip install 'reportgen[s3]'"
GCS_EXTRA = "pip install 'reportgen[gcs]'"
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
_BUCKET_RES = {"s3": re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"),
               "gs": re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")}
"""Bucket names each provider accepts: S3, 3 to 63 lower-case letters, digits, dots and hyphens; GCS, underscores
too, and up to 222 characters when dotted (each dot-separated part at most 63, :func:`_bucket_ok`); a letter or
digit at each end."""
_CLIENTS = {"s3": ("s3fs", S3_EXTRA, "the standard AWS chain (environment, ~/.aws, the instance role)"),
            "gs": ("gcsfs", GCS_EXTRA, "Google's standard chain (GOOGLE_APPLICATION_CREDENTIALS, gcloud's "
                   "application-default login, the instance's service account)")}
"""Per scheme: the fsspec package that serves it, the install line, where its credentials come from."""
STORE_HELP = "results store: a folder, s3://bucket/prefix or gs://bucket/prefix (default: $REPORTGEN_STORE or ./results)"
"""What ``--store`` takes, as every command's help says it."""
_FIX = "use a folder path, file:///absolute/folder, s3://bucket/prefix or gs://bucket/prefix"


def shown_url(text: str) -> str:
    """``text`` safe to print: a URL without user name, password, query or fragment; anything else unchanged."""
    m = _SCHEME_RE.match(text)
    if not m or len(m.group(1)) < 2:
        return text
    parts = urlsplit(text)
    host = parts.netloc.rsplit("@", 1)[-1]  # host and port as typed, without a user name or password
    return f"{parts.scheme}://{host}{parts.path}"


def store_value(raw: str | Path, where: str) -> Path | str:
    """A local folder (a Path) or a checked object-store URL (a str) for the store text ``raw``.

    ``where`` names the origin (``--store``, ``$REPORTGEN_STORE``, a config file and key) in a refusal.
    """
    text = str(raw) if not isinstance(raw, Path) else _collapsed_url(raw)
    if not text.strip():
        raise UsageError(f"{where} is empty (it would mean the current folder); {_FIX}")
    m = _SCHEME_RE.match(text)
    if not m or len(m.group(1)) < 2:  # a plain path (a one-letter "scheme" is a Windows drive)
        return Path(text) if not isinstance(raw, Path) else raw
    scheme = m.group(1).lower()
    shown = shown_url(text)[:200]
    if scheme == "file":
        return _file_path(text, where, shown)
    if scheme not in OBJECT_SCHEMES:
        raise UsageError(f"{where} {shown!r}: reportgen cannot keep runs at a {scheme}:// URL; {_FIX}")
    return _object_url(scheme, text, where, shown)


def _collapsed_url(path: Path) -> str:
    """``s3:/bucket/x`` (what ``Path('s3://bucket/x')`` becomes) back as ``s3://bucket/x``; other paths as text."""
    parts = path.parts
    if parts and _SCHEME_RE.fullmatch(parts[0]) and len(parts[0]) > 2:
        return f"{parts[0]}//{'/'.join(parts[1:])}"
    return str(path)


def _file_path(text: str, where: str, shown: str) -> Path:
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/") or parts.query or parts.fragment:
        raise UsageError(f"{where} {shown!r}: a file:// store is file:///absolute/folder (no host, query or "
                         f"fragment); {_FIX}")
    return Path(parts.path)


def _object_url(scheme: str, text: str, where: str, shown: str) -> str:
    """``scheme://bucket/prefix`` checked and normalised (lower-case scheme, no trailing slash)."""
    package, extra, chain = _CLIENTS[scheme]
    parts = urlsplit(text)
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise UsageError(f"{where} {shown!r}: put no credentials, query or fragment in a store URL; credentials "
                         f"come from {chain}")
    bucket = parts.netloc  # as typed: .hostname would lower-case it into another bucket's name
    prefix = parts.path.strip("/")
    if not _bucket_ok(scheme, bucket) or any(p in ("", ".", "..") for p in prefix.split("/") if prefix) \
            or "//" in parts.path.rstrip("/")[1:]:
        raise UsageError(f"{where} {shown!r}: expected {scheme}://bucket/prefix (a valid bucket name and a prefix "
                         "without empty, '.' or '..' parts)")
    if importlib.util.find_spec(package) is None:
        raise UsageError(f"{where} {shown!r}: a {scheme}:// store needs {package}, which is not installed; {extra}")
    return f"{scheme}://{bucket}/{prefix}".rstrip("/")


def _bucket_ok(scheme: str, bucket: str) -> bool:
    if not _BUCKET_RES[scheme].match(bucket):
        return False
    return all(0 < len(part) <= 63 for part in bucket.split(".")) if scheme == "gs" else True


def cache_folder(url: str) -> Path:
    """The local folder that mirrors the object store at ``url``: ``$XDG_CACHE_HOME/reportgen/stores/<hash>``."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "reportgen" / "stores" / hashlib.sha256(url.encode()).hexdigest()[:20]
