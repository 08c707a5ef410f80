"""Where a command may write a file the user names (``--output``, ``--out``): never inside the store, a run bundle
or a built site, which reportgen alone writes.

The one guard every such command calls (through :func:`reportgen.store.atomic.write_output`, or directly for a
folder): the path is resolved first, symbolic links and ``..`` included, exactly as the write would follow them,
so neither a link nor ``a/../results/x`` gets around it. A site is recognised by its marker files (what every
build writes into it), a bundle by its ``run.json``, the store by the path the command was given.
"""

from __future__ import annotations

import os
from pathlib import Path

from reportgen.errors import UsageError
from reportgen.store.layout import RUN_FILE

MANIFEST_FILE = "manifest.json"
NOJEKYLL = ".nojekyll"
SITE_MARKERS = (MANIFEST_FILE, NOJEKYLL)
"""Files every built site holds: a folder with both is a site (reportgen.site names its files from here)."""


def enclosing_site(path: Path, markers: tuple[str, ...] = SITE_MARKERS) -> Path | None:
    """The nearest folder above ``path`` (not ``path`` itself) holding every file of ``markers``: a site."""
    for parent in path.parents:
        if all(_is_file(parent / m) for m in markers):
            return parent
    return None


def enclosing_bundle(path: Path) -> Path | None:
    """The nearest folder above ``path`` (not ``path`` itself) holding a ``run.json``: a run bundle."""
    return next((parent for parent in path.parents if _is_file(parent / RUN_FILE)), None)


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False where it cannot even be looked at (a name too long, a loop): no marker there."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def check_output_path(path: Path, store: Path | None, field: str = "output") -> Path:
    """Refuse an output path inside ``store``, a run bundle or a built site; returns it resolved.

    ``field`` names the flag in the message (``output`` -> ``--output``). Nothing is written or created here.
    """
    resolved = Path(os.path.realpath(path))
    where = None
    if store is not None:
        store_dir = Path(os.path.realpath(store))
        if resolved == store_dir or store_dir in resolved.parents:
            where = f"inside the results folder {store}"
    bundle = enclosing_bundle(resolved) if where is None else None
    if bundle is not None:
        where = f"inside the run bundle {bundle}"
    site = enclosing_site(resolved) if where is None else None
    if site is not None:
        where = f"inside the site {site}"
    if where is not None:
        raise UsageError(f"{field} {path}: is {where}, which only reportgen writes; write it outside "
                         "(nothing was changed)", field=field)
    return resolved
