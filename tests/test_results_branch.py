"""The results branch with many writers: the action's ``push_results`` (reportgen/ci/action.sh, sourced) rebases a
push that lost the race onto the branch and tries again, with a bound, so runners pushing at once lose no run.

A real bare remote on disk; eight writers released together (each blocks on its stdin until all are started).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from user_repo_kit import git

from reportgen.ci import ACTION_SCRIPT

BRANCH = "reportgen-results"
WRITERS = 8


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "REPORTGEN_", "RG_", "GIT_"))}
    env.update({"HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "runner",
                "GIT_AUTHOR_EMAIL": "runner@example.com", "GIT_COMMITTER_NAME": "runner",
                "GIT_COMMITTER_EMAIL": "runner@example.com", "RG_RESULTS_BRANCH": BRANCH,
                "RG_PUSH_BACKOFF_MS": "0", **extra})  # no waiting: the test is deterministic and fast
    return env


def _remote_with_one_run(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "--quiet", "-b", BRANCH)
    (seed / "seed-run").mkdir()
    (seed / "seed-run" / "run.json").write_text('{"run": "seed"}\n')
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=s", "-c", "user.email=s@e", "commit", "--quiet", "-m", "seed")
    remote = tmp_path / "results.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    return remote


def _runner_with_new_run(tmp_path: Path, remote: Path, k: int) -> Path:
    """A clone of the results branch with one new commit adding ``run-<k>/run.json``, as the action makes it."""
    clone = tmp_path / f"runner-{k}"
    git(tmp_path, "clone", "--quiet", "--branch", BRANCH, str(remote), str(clone))
    (clone / f"run-{k}").mkdir()
    (clone / f"run-{k}" / "run.json").write_text(f'{{"run": {k}}}\n')
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=r", "-c", "user.email=r@e", "commit", "--quiet", "-m", f"run {k}")
    return clone


def _push(clone: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    script = f'source "{ACTION_SCRIPT}"; read -r _go; push_results "{clone}"'
    return subprocess.Popen(["bash", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_concurrent_pushes_to_the_results_branch_lose_no_run(tmp_path: Path) -> None:
    remote = _remote_with_one_run(tmp_path)
    clones = [_runner_with_new_run(tmp_path, remote, k) for k in range(WRITERS)]
    env = _env(tmp_path)
    procs = [_push(c, env) for c in clones]
    for p in procs:  # the barrier: every writer is started before any is let go
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * WRITERS, [err for _out, err in results]
    tree = git(remote, "ls-tree", "-r", "--name-only", BRANCH).split()
    assert sorted(tree) == sorted(["seed-run/run.json"] + [f"run-{k}/run.json" for k in range(WRITERS)])
    for k in range(WRITERS):
        assert git(remote, "show", f"{BRANCH}:run-{k}/run.json") == f'{{"run": {k}}}'
    assert git(remote, "rev-list", "--count", BRANCH) == str(WRITERS + 1)  # one commit per run, linear
    assert git(remote, "rev-list", "--merges", BRANCH) == ""


def test_push_that_loses_every_try_stops_at_the_bound(tmp_path: Path) -> None:
    remote = _remote_with_one_run(tmp_path)
    late = _runner_with_new_run(tmp_path, remote, 0)
    early = _runner_with_new_run(tmp_path, remote, 1)
    git(early, "push", "--quiet", "origin", BRANCH)
    tip = git(remote, "rev-parse", BRANCH)
    proc = _push(late, _env(tmp_path, RG_PUSH_TRIES="1"))
    _out, err = proc.communicate("go\n", timeout=60)
    assert proc.returncode == 6 and "moved on at each of 1 pushes" in err
    assert git(remote, "rev-parse", BRANCH) == tip  # the winner's run is kept, nothing overwritten
