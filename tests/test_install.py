"""A real install: build a wheel, install it into a fresh virtual environment outside the checkout, and run every
command from an empty folder (issue 11: templates, scenarios, assets and the help page ship inside the package).

Fast and offline: the wheel is built with the project venv's setuptools (``--no-build-isolation``) from a copy
of the sources (the checkout gets no ``build/``), installed with ``--no-deps``, and the fresh environment borrows
the project venv's dependencies (torch, matplotlib, jinja2 ...) through a ``.pth`` line added after the install.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import REAL_TRACES_DIR, ROOT
from wheel_kit import InstalledWheel

pytestmark = pytest.mark.slow
SHIPPED = ("reportgen/templates/run.html", "reportgen/templates/charts/bars.svg", "reportgen/templates/style.css",
           "reportgen/templates/favicon.svg", "reportgen/templates/reading-a-report.md",
           "reportgen/scenarios/rmsnorm.py", "reportgen/scenarios/layernorm.py", "reportgen/site/build.py",
           "reportgen/templates/init/reportgen.toml.j2", "reportgen/templates/init/workflow.yml.j2",
           "reportgen/templates/init/example_scenario.py.j2", "reportgen/ci/action.sh", "reportgen/ci/comment.py",
           "reportgen/templates/_sweep.html", "reportgen/templates/_sweep.md")


def test_a_wheel_installed_outside_the_checkout_runs_every_command(tmp_path: Path, installed_wheel: InstalledWheel) -> None:
    wheel, venv = installed_wheel.wheel, installed_wheel.venv
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(SHIPPED) <= names, sorted(set(SHIPPED) - names)
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REPORTGEN_STORE", "VIRTUAL_ENV")}
    env.update({"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
                "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"), "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"})

    def run(*argv: str) -> str:
        proc = subprocess.run(list(argv), cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (argv, proc.stdout[-2000:], proc.stderr[-3000:])
        return proc.stdout

    where = run(str(venv / "bin" / "python"), "-c", "import reportgen, reportgen.render.jinja as r; "
                "print(reportgen.__file__); print(r.TEMPLATES_DIR)").split()
    assert all(Path(w).is_relative_to(venv) for w in where), where
    reportgen = str(venv / "bin" / "reportgen")
    for label in ("base", "head"):
        run(reportgen, "profile", "--device", "cpu", "--shape", "4,64", "--samples", "4", "--quiet",
            "--variants", "naive,fused", "--label", label)
    comment = run(reportgen, "compare", "latest~1", "latest")
    assert "naive" in comment and "fused" in comment
    trace = REAL_TRACES_DIR / "cpu_only.trace.json.gz"
    assert run(reportgen, "import", str(trace), "--label", "imported").startswith("imported run ")
    assert run(reportgen, "build").startswith("built site: ")
    assert (work / "site" / "help" / "index.html").read_text().count("How to read a report") >= 1
    assert (work / "site" / "assets" / "style.css").stat().st_size > 0
    run("git", "init", "-q", "-b", "main", ".")
    run("git", "commit", "-q", "--allow-empty", "-m", "source")
    run("git", "init", "-q", "--bare", str(tmp_path / "remote.git"))
    run("git", "remote", "add", "origin", str(tmp_path / "remote.git"))
    assert "; pushed" in run(reportgen, "publish", "--push")
    files = run("git", "--git-dir", str(tmp_path / "remote.git"), "ls-tree", "-r", "--name-only", "gh-pages").split()
    assert "index.html" in files and "help/index.html" in files and "assets/style.css" in files
    assert len([f for f in files if f.startswith("runs/") and f.endswith("/index.html")]) == 3
    assert not (ROOT / "build").exists() or (ROOT / "build").stat().st_mtime < wheel.stat().st_mtime
