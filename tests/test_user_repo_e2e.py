"""End to end, as a new user: a throwaway repository with its own kernel package (an in-place fused
add + RMSNorm returning a tuple, and a softmax with an eps parameter), `reportgen init`, then `profile`
of both scenarios, `build` and `compare`, all driven by the config alone (no paths or flags).

reportgen is the console script of a wheel built from this checkout and installed into a fresh virtual
environment outside it (tests/wheel_kit.py), run with the throwaway repository as the working directory: nothing
of reportgen's checkout is on the path."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from user_repo_kit import git, write_user_package
from wheel_kit import InstalledWheel

from reportgen.compare.report import MARKER


def test_a_new_users_repository_from_init_to_site_and_comparison(tmp_path: Path, installed_wheel: InstalledWheel) -> None:
    def rg(repo: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(installed_wheel.reportgen), *args], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=900)

    env = {k: v for k, v in os.environ.items() if not k.startswith("REPORTGEN_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1"})
    where = subprocess.run([str(installed_wheel.venv / "bin" / "python"), "-c", "import reportgen; print(reportgen.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(installed_wheel.venv), where  # the wheel's package, not the checkout's
    repo = tmp_path / "myrepo"
    repo.mkdir()
    git(repo, "init", "--quiet", "-b", "main")
    write_user_package(repo)

    init = rg(repo, "init", env=env)
    assert init.returncode == 0, init.stderr
    (repo / "bench" / "example_scenario.py").unlink()  # the user's own scenarios replace the example
    config = (repo / "reportgen.toml").read_text()
    (repo / "reportgen.toml").write_text(config.replace('# machine = "ci-cpu"', 'machine = "laptop"')
                                         .replace('# eps = "1e-5"', 'eps = "1e-5"'))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "kernels and reportgen")

    for _ in range(2):
        prof = rg(repo, "profile", env=env)
        assert prof.returncode == 0, prof.stderr[-3000:]
        assert "USDT" not in prof.stderr + prof.stdout and "profiler_st" not in prof.stderr
    runs = [json.loads(p.read_text()) for p in sorted((repo / "results").glob("*/run.json"))]
    assert sorted(r["scenario"]["name"] for r in runs) == ["add_rmsnorm"] * 2 + ["softmax"] * 2
    for r in runs:
        assert r["environment"]["machine"] == "laptop" and r["environment"]["cpu_model"]
        assert all(v["status"] == "ok" for v in r["variants"]), [(v["name"], v["error"]) for v in r["variants"]]
        assert r["git"]["sha"] == git(repo, "rev-parse", "HEAD")
    softmax = next(r for r in runs if r["scenario"]["name"] == "softmax")
    assert softmax["scenario"]["parameters"]["eps"] == "1e-05"  # the config's default, recorded
    logs = list((repo / "results").glob("*/profile.log"))
    assert logs and any("profiler_start" in p.read_text() for p in logs)  # Kineto's lines, kept in the run

    build = rg(repo, "build", env=env)
    assert build.returncode == 0, build.stderr
    index = (repo / "site" / "index.html").read_text()
    assert "add_rmsnorm on cpu (machine laptop)" in index and "softmax on cpu (machine laptop)" in index

    compare = rg(repo, "compare", "latest~1", "latest", env=env)  # the newest run's scenario and machine
    assert compare.returncode == 0, compare.stderr
    assert compare.stdout.startswith(MARKER)
    listed = rg(repo, "runs", "--scenario", "add_rmsnorm", "--machine", "laptop", env=env)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 3
