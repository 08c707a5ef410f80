"""A new user's wall time from an empty folder to a first site, install included (issue 13).

Builds a wheel of this checkout, then, timing each step as a user would run it:

1. ``python -m venv`` a fresh environment outside the checkout;
2. ``pip install torch==2.13.0`` (the CPU wheel; pass ``--torch-spec`` for another);
3. ``pip install <the wheel>`` (jinja2, matplotlib, markdown from the index);
4. in an empty folder made a git repository: ``reportgen init``, ``reportgen profile``, ``reportgen build``.

    .venv/bin/python benchmarks/first_site.py --out benchmarks/results/first_site.json

The wheel build itself is not counted (a user installs a published wheel). The machine's load
average is recorded before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return round(time.monotonic() - t0, 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--torch-spec", default="torch==2.13.0")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "first_site.json")
    opts = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="reportgen-first-site-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REPORTGEN_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update({"GIT_AUTHOR_NAME": "U", "GIT_AUTHOR_EMAIL": "u@example.com", "GIT_COMMITTER_NAME": "U",
                "GIT_COMMITTER_EMAIL": "u@example.com", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor-cache")})  # a new user's compile cache is cold
    try:
        src = work / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md", "reportgen", "templates", "scenarios"):  # what the wheel is made of
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            else:
                shutil.copy2(ROOT / name, src / name)
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"),
              str(src)], work, env)
        (wheel,) = (work / "dist").glob("reportgen-*.whl")
        load_before = os.getloadavg()[0]
        venv, repo = work / "venv", work / "myproject"
        repo.mkdir()
        steps: dict[str, float] = {}
        steps["python -m venv"] = _run([sys.executable, "-m", "venv", str(venv)], work, env)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        steps[f"pip install {opts.torch_spec}"] = _run([*pip, opts.torch_spec], work, env)
        steps["pip install reportgen (wheel)"] = _run([*pip, str(wheel)], work, env)
        rg = str(venv / "bin" / "reportgen")
        steps["git init"] = _run(["git", "init", "-q", "-b", "main"], repo, env)
        steps["reportgen init"] = _run([rg, "init"], repo, env)
        steps["reportgen profile"] = _run([rg, "profile", "--quiet"], repo, env)
        steps["reportgen build"] = _run([rg, "build"], repo, env)
        total = round(sum(steps.values()), 2)
        pages = sorted(str(p.relative_to(repo)) for p in (repo / "site").rglob("index.html"))
        result = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
            "load_average_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
            "steps_s": steps,
            "total_s": total,
            "site_pages": pages,
        }
        opts.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
