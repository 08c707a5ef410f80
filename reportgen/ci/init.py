"""``reportgen init``: a config, an example scenario and a CI workflow for the user's repository.

Every file comes from ``templates/init/``. Nothing is overwritten: when any target exists, or
``pyproject.toml`` already has a ``[tool.reportgen]`` table, nothing is written (exit 6 naming it).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reportgen import __version__
from reportgen.ab.settings import SHARED_CPU_RUNNER_ARGS
from reportgen.config import CONFIG_FILE, PYPROJECT, find_config_file
from reportgen.errors import ConflictError, ExitCode, UsageError

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

    ref = request.action_ref or DEFAULT_ACTION_REF
    if not _ACTION_REF_RE.match(ref):
        raise UsageError(f"action_ref {ref!r}: expected OWNER/REPO@REF (e.g. {DEFAULT_ACTION_REF}) or ./PATH",
                         field="action_ref")
    env = new_environment(autoescape=False)
    context = {"action_ref": ref, "scenarios_dir": SCENARIOS_DIR, "branch": request.branch,
               "install": request.install, "repo_name": request.folder.resolve().name,
               "shared_cpu_ab_args": " ".join(SHARED_CPU_RUNNER_ARGS)}
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


def write_new(path: Path, text: str) -> None:
    """Write ``path`` (which must not exist) through a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.link(tmp, path)  # fails if the file appeared meanwhile: never overwrite
    except FileExistsError:
        raise ConflictError(f"{path}: already exists; reportgen init never overwrites a file") from None
    finally:
        os.unlink(tmp)


def run_init(request: InitRequest) -> int:
    """Write the files and print the next steps."""
    if not request.folder.is_dir():
        raise UsageError(f"dir {request.folder}: no such folder; create the repository first", field="dir")
    files = render_files(request)
    check_free(request.folder, list(files))
    for rel, text in files.items():
        write_new(request.folder / rel, text)
        print(f"wrote {request.folder / rel}")
    print(NEXT_STEPS.format(scenario=f"{SCENARIOS_DIR}/example_scenario.py", workflow=WORKFLOW))
    return ExitCode.OK


NEXT_STEPS = """
next steps:
  1. reportgen scenarios                 # the example and the built-in scenarios, with variants and parameters
  2. reportgen profile                   # profiles every scenario in reportgen.toml into results/
  3. reportgen build                     # the site in site/ (open site/index.html)
  4. copy {scenario} for your own kernels (import your package; this folder is on sys.path)
  5. commit reportgen.toml, bench/ and {workflow}; enable GitHub Pages with "GitHub Actions" as the source"""
