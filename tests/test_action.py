"""The reusable GitHub Action: action.yml and this repository's workflow validate against GitHub's
published schemas, and the action's script (reportgen/ci/action.sh, which action.yml runs) works
end to end with a fake GITHUB_* environment, a local bare remote and a local stand-in for the API."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT
from hostile import tree_hash
from user_repo_kit import ADD_RMSNORM, git, write_user_package

from reportgen.ci import ACTION_SCRIPT
from reportgen.ci.comment import GitHub, post_or_update
from reportgen.compare.report import MARKER

ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / ".github" / "workflows" / "reportgen.yml"
VENV_BIN = Path(sys.executable).parent


def check_jsonschema() -> str | None:
    return shutil.which("check-jsonschema") or (str(VENV_BIN / "check-jsonschema")
                                                if (VENV_BIN / "check-jsonschema").exists() else None)


needs_schema = pytest.mark.skipif(check_jsonschema() is None, reason="check-jsonschema is not installed")


@needs_schema
@pytest.mark.parametrize(("path", "schema"), [(ACTION, "vendor.github-actions"), (WORKFLOW, "vendor.github-workflows")])
def test_valid_against_githubs_published_schema_offline(path: Path, schema: str, tmp_path: Path) -> None:
    env = {**os.environ, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "NO_PROXY": ""}  # the built-in schemas ship inside check-jsonschema: no network needed
    cmd = [str(check_jsonschema()), "--builtin-schema", schema]
    ok = subprocess.run([*cmd, str(path)], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / path.name
    broken.write_text(path.read_text().replace("using: composite", "using: compositee")
                      .replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"))
    assert subprocess.run([*cmd, str(broken)], capture_output=True, text=True, env=env).returncode != 0


def test_action_inputs_are_declared_and_used_and_steps_run_the_script() -> None:
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    declared = set(action["inputs"])
    assert {"mode", "scenarios", "device", "threshold", "python-version", "install", "token"} <= declared
    text = ACTION.read_text()
    used = set(re.findall(r"inputs\.([\w-]+)", text))
    assert used == declared, (used ^ declared)
    runs = [s["run"] for s in action["runs"]["steps"] if "run" in s]
    assert 'bash "${GITHUB_ACTION_PATH}/reportgen/ci/action.sh" pull-request' in runs
    assert 'bash "${GITHUB_ACTION_PATH}/reportgen/ci/action.sh" push' in runs
    assert 'bash "${GITHUB_ACTION_PATH}/reportgen/ci/action.sh" calibrate' in runs
    assert (ROOT / "reportgen" / "ci" / "action.sh") == ACTION_SCRIPT and ACTION_SCRIPT.is_file()
    upload = next(s for s in action["runs"]["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "${{ runner.temp }}/reportgen-site"
    push = next(s for s in action["runs"]["steps"] if s.get("id") == "push")
    assert push["env"]["RG_SITE_DIR"] == upload["with"]["path"]
    steps = action["runs"]["steps"]
    restore, save = (next(i for i, s in enumerate(steps) if s.get("uses", "").startswith(f"actions/cache/{verb}@"))
                     for verb in ("restore", "save"))
    # the last push's site is restored before the build (which then draws only new pages) and kept after it
    assert restore < steps.index(push) < save and steps[restore]["if"] == push["if"]
    assert steps[restore]["with"]["path"] == steps[save]["with"]["path"] == upload["with"]["path"]
    assert steps[save]["with"]["key"] == steps[restore]["with"]["key"]
    assert steps[save]["with"]["key"].startswith(steps[restore]["with"]["restore-keys"])


def test_this_repositorys_workflow_uses_the_local_action() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    uses = {job: [s.get("uses") for s in wf["jobs"][job]["steps"]] for job in ("profile-and-build", "compare")}
    modes = {job: next(s["with"]["mode"] for s in wf["jobs"][job]["steps"] if s.get("uses") == "./")
             for job in uses}
    assert modes == {"profile-and-build": "push", "compare": "pull-request"}
    compare = next(s for s in wf["jobs"]["compare"]["steps"] if s.get("uses") == "./")
    # reportgen ab's defaults are the ones measured for a shared CPU; more flags from the repository's variable
    assert compare["with"]["ab-args"] == "${{ vars.REPORTGEN_AB_ARGS }}"


def test_script_is_valid_bash() -> None:
    proc = subprocess.run(["bash", "-n", str(ACTION_SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# --- a stand-in for the GitHub REST API -----------------------------------------------------------


class FakeGitHub:
    """Issue comments of one pull request, with every request recorded."""

    def __init__(self) -> None:
        self.comments: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, str]] = []
        self.next_id = 100


@pytest.fixture
def api() -> Iterator[tuple[str, FakeGitHub]]:
    state = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

        def do_GET(self) -> None:  # noqa: N802
            state.requests.append(("GET", self.path, self.headers.get("Authorization", "")))
            page = int(re.search(r"[?&]page=(\d+)", self.path).group(1))  # type: ignore[union-attr]
            self._reply(200, state.comments[(page - 1) * 100: page * 100])

        def do_POST(self) -> None:  # noqa: N802
            state.requests.append(("POST", self.path, self.headers.get("Authorization", "")))
            state.next_id += 1
            state.comments.append({"id": state.next_id, "body": self._body()["body"], "user": {"type": "Bot"}})
            self._reply(201, state.comments[-1])

        def do_PATCH(self) -> None:  # noqa: N802
            state.requests.append(("PATCH", self.path, self.headers.get("Authorization", "")))
            cid = int(self.path.rsplit("/", 1)[1])
            comment = next(c for c in state.comments if c["id"] == cid)
            comment["body"] = self._body()["body"]
            self._reply(200, comment)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def test_comment_is_created_once_then_updated(api: tuple[str, FakeGitHub]) -> None:
    url, state = api
    state.comments.append({"id": 1, "body": f"{MARKER} but a person wrote it", "user": {"type": "User"}})
    gh = GitHub(url, "o/r", "tok")
    assert post_or_update(gh, 7, f"{MARKER}\nfirst") == "created"
    assert post_or_update(gh, 7, f"{MARKER}\nsecond") == "updated"
    assert [c["body"] for c in state.comments] == [f"{MARKER} but a person wrote it", f"{MARKER}\nsecond"]
    assert all(auth == "Bearer tok" for _m, _p, auth in state.requests)
    assert [m for m, _p, _a in state.requests] == ["GET", "POST", "GET", "PATCH"]


# --- the script, run as the action runs it --------------------------------------------------------


def user_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A bare remote with one commit of a user repository (config + one scenario), and a clone of it."""
    src = tmp_path / "src"
    src.mkdir()
    write_user_package(src, {"add_rmsnorm": ADD_RMSNORM})
    (src / "reportgen.toml").write_text('scenarios = ["bench/"]\nmachine = "ci-box"\n')
    git(src, "init", "--quiet", "-b", "main")
    git(src, "add", "-A")
    git(src, "commit", "--quiet", "-m", "base")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(src), str(remote))
    work = tmp_path / "workspace"
    git(tmp_path, "clone", "--quiet", str(remote), str(work))
    return remote, work


def action_env(tmp_path: Path, work: Path, **extra: str) -> dict[str, str]:
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "REPORTGEN_", "RG_"))}
    env.update({"PATH": f"{VENV_BIN}{os.pathsep}{env['PATH']}", "GITHUB_WORKSPACE": str(work),
                "RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(runner_temp / "output"),
                "GITHUB_SHA": git(work, "rev-parse", "HEAD"), "GITHUB_REF_NAME": "main",
                "GITHUB_REPOSITORY": "o/r", "GITHUB_TOKEN": "tok", "RG_INSTALL": "", "RG_DEVICE": "cpu",
                "HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1", **extra})
    return env


def run_action(mode: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ACTION_SCRIPT), mode], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


def test_push_mode_keeps_each_run_in_the_results_branch_and_builds_the_site(tmp_path: Path) -> None:
    remote, work = user_repo(tmp_path)
    env = action_env(tmp_path, work, RG_SITE_DIR=str(tmp_path / "site"), RG_BASE_URL="/proj/")
    for i in range(2):
        proc = run_action("push", env, work)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "USDT" not in proc.stderr + proc.stdout  # third-party lines stay in the run's log
        runs = git(remote, "ls-tree", "--name-only", "reportgen-results").split()
        runs = [r for r in runs if r != ".catalog"]  # the catalog of runs travels with them
        assert len(runs) == i + 1
    bundle = runs[0]
    files = git(remote, "ls-tree", "-r", "--name-only", "reportgen-results", bundle).split()
    assert f"{bundle}/run.json" in files and f"{bundle}/profile.log" in files
    run = json.loads(git(remote, "show", f"reportgen-results:{bundle}/run.json"))
    assert run["environment"]["machine"] == "ci-box" and run["label"].startswith("main ")
    site = tmp_path / "site"
    manifest = (site / "manifest.json").read_text()
    assert '"base_url": "/proj/"' in manifest and all(r in manifest for r in runs)
    assert f"site={site}" in (tmp_path / "runner-temp" / "output").read_text()
    assert git(work, "worktree", "list").count("\n") == 0  # the results worktree is cleaned up


def test_pull_request_mode_runs_ab_comments_once_and_gates(tmp_path: Path, api: tuple[str, FakeGitHub]) -> None:
    """The head breaks the in-place fused kernel: `reportgen ab` (each side importing its own tree's package)
    finds it OK in base and wrong in head, a correctness verdict whatever the timing: exit 1, one comment."""
    url, state = api
    remote, work = user_repo(tmp_path)
    base_sha = git(work, "rev-parse", "HEAD")
    kernels = work / "mykernels" / "__init__.py"
    kernels.write_text(kernels.read_text().replace("residual.add_(x)", "residual.add_(x).add_(1.0)"))  # a bug
    git(work, "commit", "--quiet", "-am", "head: break the fused kernel")
    head_sha = git(work, "rev-parse", "HEAD")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"sha": base_sha}}}))
    state.comments.append({"id": 5, "body": f"{MARKER}\nold", "user": {"type": "Bot"}})
    env = action_env(tmp_path, work, GITHUB_EVENT_PATH=str(event), GITHUB_API_URL=url, RG_THRESHOLD="50",
                     RG_AB_ARGS="--rounds 2 --max-seconds 2 --samples 3")
    proc = run_action("pull-request", env, work)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "::error::reportgen: a variant is significantly slower, or broken in the head" in proc.stdout
    assert "reportgen ab: " in proc.stderr  # ab's progress lines go to the job log
    assert [m for m, _p, _a in state.requests] == ["GET", "PATCH"] and len(state.comments) == 1
    body = state.comments[0]["body"]
    assert body.startswith(MARKER + "\n") and body.count(MARKER) == 1 and "<!-- reportgen-ab -->" not in body
    assert "### :x: reportgen A/B: time regression: fused\\_inplace" in body
    assert "| fused\\_inplace | — | — | — | — | :red_circle: broken in head: wrong result against the reference |" in body
    assert "Scenario **add\\_rmsnorm** (shape 4\\,64, float32) on **cpu**" in body  # found through the config
    assert f"base {base_sha[:12]} vs head {head_sha[:12]}" in body
    assert "Threshold 50 %; a *no change* waits, within the budget, for an interval at most ±1 % wide." in body
    assert re.search(r"\*\*6 sessions\*\* \(fresh pairs of worker processes\) of 2 rounds, "
                     r"\*\*12 rounds\*\* in all, in ABBA order, 3 samples per variant", body)
    comment_file = Path((tmp_path / "runner-temp" / "output").read_text().split("comment=")[1].strip())
    assert comment_file.read_text() == body
    assert git(work, "worktree", "list").count("\n") == 0  # the base worktree is removed


def test_calibrate_mode_keeps_an_aa_that_pull_request_comments_then_state(tmp_path: Path,
                                                                         api: tuple[str, FakeGitHub]) -> None:
    """A job in calibrate mode keeps the A/A pair in the results branch (its report in the log, inert); a pull
    request's job on the same runner reads the branch, states the runner's figures, and pushes nothing."""
    url, state = api
    remote, work = user_repo(tmp_path)
    flags = "--rounds 2 --samples 3 --max-seconds 2"
    proc = run_action("calibrate", action_env(tmp_path, work, RG_AB_ARGS=flags), work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "### reportgen A/B calibration: scenario add\\_rmsnorm on cpu" in proc.stdout
    assert proc.stdout.startswith("::stop-commands::rg-")  # the report is the repository's data: inert in the log
    runs = [r for r in git(remote, "ls-tree", "--name-only", "reportgen-results").split() if r != ".catalog"]
    assert len(runs) == 2
    assert all(json.loads(git(remote, "show", f"reportgen-results:{r}/run.json"))["ab"]["calibration"] for r in runs)
    base_sha = git(work, "rev-parse", "HEAD")
    (work / "NOTES.md").write_text("a change that touches no kernel\n")
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "-m", "head: notes")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 8, "base": {"sha": base_sha}}}))
    env = action_env(tmp_path, work, GITHUB_EVENT_PATH=str(event), GITHUB_API_URL=url, RG_THRESHOLD="50",
                     RG_AB_ARGS=flags)
    proc = run_action("pull-request", env, work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    body = state.comments[0]["body"]
    assert "On this runner (A/A calibration " in body and "20 sessions, replayed for this pair's gate" in body
    after = [r for r in git(remote, "ls-tree", "--name-only", "reportgen-results").split() if r != ".catalog"]
    assert after == runs  # the pull request's pairs are not kept
    assert git(work, "worktree", "list").count("\n") == 0  # both worktrees removed


def test_pull_request_mode_takes_the_scenarios_from_the_input_else_the_head_config(tmp_path: Path) -> None:
    """pr_scenarios (the script sourced): RG_SCENARIOS word by word, else `reportgen scenarios --names` in the head."""
    _remote, work = user_repo(tmp_path)
    (work / "bench" / "other.py").write_text("")
    script = f'source "{ACTION_SCRIPT}"; pr_scenarios'
    env = action_env(tmp_path, work)
    from_config = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert from_config.returncode == 0, from_config.stderr
    assert from_config.stdout.splitlines() == ["add_rmsnorm", "other"]
    given = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                           env={**env, "RG_SCENARIOS": " softmax  bench/x.py *"})
    assert given.stdout.splitlines() == ["softmax", "bench/x.py", "*"]


# --- hostile inputs and checkouts ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["--upload-pack=touch {pwned};git-upload-pack", "-b", "refs/heads/reportgen-results",
                                   "a..b", "@{-1}", "@", "x y", "HEAD", "a;touch {pwned}", "$(touch {pwned})",
                                   "pages\u202e"])
def test_action_results_branch_is_a_branch_name_never_a_git_option(tmp_path: Path, value: str) -> None:
    """RG_RESULTS_BRANCH is checked as a branch name before any git call: one line, exit 2, no command run,
    the remote and the checkout unchanged."""
    remote, work = user_repo(tmp_path)
    pwned = tmp_path / "pwned"
    before = (tree_hash(remote), tree_hash(work))
    env = action_env(tmp_path, work, RG_RESULTS_BRANCH=value.replace("{pwned}", str(pwned)), RG_SITE_DIR=str(tmp_path / "site"))
    proc = run_action("push", env, work)
    assert not pwned.exists()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("reportgen-action: RG_RESULTS_BRANCH: ")
    assert "branch name" in proc.stderr
    assert (tree_hash(remote), tree_hash(work)) == before and not (tmp_path / "site").exists()


@pytest.mark.parametrize(("name", "value"), [("RG_MACHINE", "ci-box\n--dtype\nbfloat16"),
                                             ("RG_SCENARIOS", "add_rmsnorm\n--dtype bfloat16"),
                                             ("RG_DEVICE", "cpu\r"), ("RG_RESULTS_BRANCH", "main\n")])
def test_action_input_with_a_line_break_is_refused(tmp_path: Path, name: str, value: str) -> None:
    """A line break in an input would become extra arguments: refused in one line naming the input."""
    remote, work = user_repo(tmp_path)
    before = (tree_hash(remote), tree_hash(work))
    proc = run_action("push", action_env(tmp_path, work, **{name: value}), work)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == f"reportgen-action: {name}: contains a line break; give the value on one line\n"
    assert (tree_hash(remote), tree_hash(work)) == before


def test_action_inputs_are_single_words_never_globbed_or_options(tmp_path: Path) -> None:
    """profile_args (the script sourced): `*` stays `*` (not the checkout's file names), and each value is one
    `--flag=value` word, so a value starting with '-' is never read as an option."""
    _remote, work = user_repo(tmp_path)
    script = f'source "{ACTION_SCRIPT}"; profile_args; printf "%s\\n" "${{PROFILE_ARGS[@]}}"'
    env = action_env(tmp_path, work, RG_SCENARIOS="* bench/*.py", RG_MACHINE="--dtype bfloat16", RG_DEVICE="-h")
    proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["--quiet", "--device=-h", "--machine=--dtype bfloat16", "--scenario=*",
                                        "--scenario=bench/*.py"]


@pytest.mark.parametrize(("event", "missing"), [(None, "pull_request.base.sha (FileNotFoundError)"),
                                                ("[]", "pull_request.base.sha (TypeError)"),
                                                ('{"pull_request": {}}', "pull_request.base.sha (KeyError)"),
                                                ("{not json", "pull_request.base.sha (JSONDecodeError)"),
                                                ('{"pull_request": {"base": {"sha": "%s"}}}' % ("0" * 40),
                                                 "pull_request.number (KeyError)")])
def test_action_pull_request_event_that_is_not_one_is_one_line(tmp_path: Path, event: str | None,
                                                                missing: str) -> None:
    """An event file that is missing, not JSON, or without the fields the mode reads: one line naming the file
    and the field, exit 2, never a Python traceback; the remote and the checkout unchanged."""
    remote, work = user_repo(tmp_path)
    path = tmp_path / "event.json"
    if event is not None:
        path.write_text(event)
    before = (tree_hash(remote), tree_hash(work))
    proc = run_action("pull-request", action_env(tmp_path, work, GITHUB_EVENT_PATH=str(path)), work)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert proc.stderr == (f"reportgen-action: {path}: no {missing}; run this mode on pull_request events\n")
    assert (tree_hash(remote), tree_hash(work)) == before


HOSTILE_SCENARIO_NAMES = ["-[click](https:evil.example)", "-@octocat", "![x](x.png)", "<img src=x>", "x" * 252]


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm (GitHub's renderer) is not installed")
def test_action_comment_shows_checkout_names_as_text(tmp_path: Path, api: tuple[str, FakeGitHub]) -> None:
    """A head whose scenario files are named as Markdown (a link, a mention, an image, HTML) that `reportgen ab`
    cannot compare: each "not compared" line shows the name as text; GitHub's renderer makes no link, image or
    mention of it."""
    url, state = api
    _remote, work = user_repo(tmp_path)
    git(work, "rm", "--quiet", "bench/add_rmsnorm.py")
    (work / "bench").mkdir(exist_ok=True)
    for name in HOSTILE_SCENARIO_NAMES:
        (work / "bench" / f"{name}.py").write_text("")  # declares nothing: ab fails on both sides (exit 3)
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "-m", "base: hostile scenario names")
    base_sha = git(work, "rev-parse", "HEAD")
    (work / "README.md").write_text("head\n")
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "-m", "head")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"sha": base_sha}}}))
    env = action_env(tmp_path, work, GITHUB_EVENT_PATH=str(event), GITHUB_API_URL=url)
    proc = run_action("pull-request", env, work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    body = state.comments[0]["body"]
    assert body.count(": not compared (reportgen ab exit ") == len(HOSTILE_SCENARIO_NAMES)
    assert "@\u2060octocat" in body and "@octocat" not in body
    html = subprocess.run(["cmark-gfm", "--extension", "autolink", "--extension", "table"], input=body,
                          capture_output=True, text=True, check=True).stdout
    assert "<a " not in html and "<img" not in html and "evil.example\">" not in html
    for name in HOSTILE_SCENARIO_NAMES:
        shown = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("@", "@\u2060")
        assert f"<strong>{shown}</strong>: not compared" in html
