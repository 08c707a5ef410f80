"""``reportgen init``: a config, an example scenario and a CI workflow for the user's repository.

Every file comes from ``templates/init/``. Nothing is overwritten: when any target exists, or
``pyproject.toml`` already has a ``[tool.reportgen]`` table, nothing is written (exit 6 naming it).
All or nothing: when a file cannot be written (a read-only folder, a full disk), the files and folders
already made are removed again and the error names the path (exit 2). Files get the usual mode for the
user's umask (0644 under the common 022), not the 0600 of a temporary file.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reportgen import __version__
from reportgen.config import CONFIG_FILE, PYPROJECT, find_config_file
from reportgen.errors import ConflictError, ExitCode, UsageError, from_os_error
from reportgen.store.atomic import new_file_mode

ACTION_REPOSITORY = "reportgen/reportgen"
"""Where the reusable action lives; ``--action-ref`` names another copy (a fork, a pinned sha)."""
DEFAULT_ACTION_REF = f"{ACTION_REPOSITORY}@v{__version__}"
SCENARIOS_DIR = "bench"
WORKFLOW = ".github/workflows/reportgen.yml"
_ACTION_REF_RE = re.compile(r"^(\./[\w./-]*|[\w.-]+/[\w.-]+(/[\w./-]+)?@[\w./-]+)$")


@dataclass(frozen=True)
class InitRequest:
    """``reportgen init``: the repository folder and the action reference the workflow uses."""

    folder: Path
    action_ref: str | None = None
    branch: str = "main"
    install: str = "python -m pip install -e ."


@dataclass(frozen=True)
class InitFile:
    """One file ``init`` writes: where (relative to the repository) and from which template."""

    rel: str
    template: str


FILES = (
    InitFile(CONFIG_FILE, "init/reportgen.toml.j2"),
    InitFile(f"{SCENARIOS_DIR}/example_scenario.py", "init/example_scenario.py.j2"),
    InitFile(WORKFLOW, "init/workflow.yml.j2"),
)


def render_files(request: InitRequest) -> dict[str, str]:
    """Relative path -> content of every file ``init`` writes."""
    from reportgen.render.jinja import new_environment

    ref = DEFAULT_ACTION_REF if request.action_ref is None else request.action_ref
    if not _ACTION_REF_RE.fullmatch(ref):
        raise UsageError(f"action_ref {ref!r}: expected OWNER/REPO@REF (e.g. {DEFAULT_ACTION_REF}) or ./PATH",
                         field="action_ref")
    env = new_environment(autoescape=False)
    context = {"action_ref": ref, "scenarios_dir": SCENARIOS_DIR, "branch": request.branch,
               "install": request.install, "repo_name": request.folder.resolve().name}
    return {f.rel: env.get_template(f.template).render(**context) for f in FILES}


def check_free(folder: Path, rels: list[str]) -> None:
    """Refuse (exit 6) when a target exists or the folder already has a reportgen config of its own."""
    for rel in rels:
        if (folder / rel).exists() or (folder / rel).is_symlink():
            raise ConflictError(f"{folder / rel}: already exists; reportgen init never overwrites a file "
                                "(move it away or edit it by hand)")
    found = find_config_file(folder.resolve())
    if found is not None and found[0].parent == folder.resolve() and found[0].name == PYPROJECT:
        raise ConflictError(f"{found[0]}: already has [tool.reportgen]; reportgen init never overwrites a config")


def write_new(path: Path, text: str, mode: int) -> None:
    """Write ``path`` (which must not exist) through a temporary file in the same folder, with ``mode``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            os.fchmod(fh.fileno(), stat.S_IMODE(mode))
        os.link(tmp, path)  # fails if the file appeared meanwhile: never overwrite
    except FileExistsError:
        raise ConflictError(f"{path}: already exists; reportgen init never overwrites a file") from None
    finally:
        os.unlink(tmp)


def _make_folders(folder: Path, parent: Path, made: list[Path]) -> None:
    """Create ``parent`` and its missing ancestors below ``folder``, recording each one made."""
    missing = []
    for p in (parent, *parent.parents):
        if p == folder or p.is_dir():
            break
        missing.append(p)
    for p in reversed(missing):
        p.mkdir()
        made.append(p)


def _undo(made: list[Path]) -> None:
    """Remove what ``write_all`` made (files, then their folders), newest first; best effort."""
    for p in reversed(made):
        try:
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
        except OSError:
            pass


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` with ``path`` as its file name, for a message that names where."""
    return OSError(exc.errno, exc.strerror, str(path))


def write_all(folder: Path, files: dict[str, str]) -> list[Path]:
    """Write every file of ``files`` under ``folder``, or none: on any failure what was made is removed."""
    made: list[Path] = []
    mode = new_file_mode()
    path = folder
    try:
        for rel, text in files.items():
            path = folder / rel
            _make_folders(folder, path.parent, made)
            write_new(path, text, mode)
            made.append(path)
    except OSError as exc:
        _undo(made)
        where = exc.filename or path
        mapped = from_os_error(exc if exc.filename else _named(exc, path))
        if mapped is not None:  # the CLI's one line for a path the system refused (exit 3), as every command gives
            raise mapped from None
        raise UsageError(f"{where}: cannot be written ({exc.strerror or type(exc).__name__}); reportgen init "
                         "wrote nothing; use a writable folder with free space") from None
    except BaseException:
        _undo(made)
        raise
    return [folder / rel for rel in files]


def run_init(request: InitRequest) -> int:
    """Write the files and print the next steps."""
    try:
        is_dir = request.folder.is_dir()
    except OSError as exc:
        mapped = from_os_error(exc if exc.filename else _named(exc, request.folder))
        if mapped is not None:
            raise mapped from None
        raise UsageError(f"dir {str(request.folder)[:200]!r}: cannot be used ({exc.strerror})", field="dir") from None
    if not is_dir:
        raise UsageError(f"dir {request.folder}: no such folder; create the repository first", field="dir")
    files = render_files(request)
    check_free(request.folder, list(files))
    for path in write_all(request.folder, files):
        print(f"wrote {path}")
    print(NEXT_STEPS.format(scenario=f"{SCENARIOS_DIR}/example_scenario.py", workflow=WORKFLOW))
    return ExitCode.OK


NEXT_STEPS = """
next steps:
  1. reportgen scenarios                 # the example and the built-in scenarios, with variants and parameters
  2. reportgen profile                   # profiles every scenario in reportgen.toml into results/
  3. reportgen build                     # the site in site/ (open site/index.html)
  4. copy {scenario} for your own kernels (import your package; this folder is on sys.path)
  5. commit reportgen.toml, bench/ and {workflow}; enable GitHub Pages with "GitHub Actions" as the source"""
