"""The shipped GitHub Actions workflow: valid YAML and schema, the right triggers, jobs and
permissions, real actions, shell that parses, and reportgen commands the CLI accepts."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from reportgen.cli import build_parser
from reportgen.compare.report import MARKER

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "reportgen.yml"
ACTION = WORKFLOW.parent.parent.parent / "action.yml"
ACTION_SCRIPT = WORKFLOW.parent.parent.parent / "reportgen" / "ci" / "action.sh"
EXPRESSION = re.compile(r"\$\{\{.*?\}\}")
SAMPLE_VALUES = {"REPORTGEN_DEVICE": "auto", "REPORTGEN_THRESHOLD": "5", "RG_THRESHOLD": "5", "RG_DEVICE": "cpu",
                 "fail": "--fail-on-step"}  # report_steps in action.sh
"""Values for the workflow's shell variables whose content the CLI checks; any other becomes X."""


@pytest.fixture(scope="module")
def wf() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def triggers(wf: dict[Any, Any]) -> dict[str, Any]:
    return wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as true


def steps(wf: dict[Any, Any], job: str) -> list[dict[str, Any]]:
    return wf["jobs"][job]["steps"]


def run_scripts(wf: dict[Any, Any]) -> list[str]:
    """The shell the workflow runs: its own run steps, and the action's (uses: ./), whose logic is action.sh."""
    action = yaml.safe_load(ACTION.read_text())
    return [s["run"] for job in wf["jobs"].values() for s in job.get("steps", []) if "run" in s] + [
        s["run"] for s in action["runs"]["steps"] if "run" in s] + [ACTION_SCRIPT.read_text()]


def local_action_step(wf: dict[Any, Any], job: str) -> dict[str, Any]:
    return next(s for s in wf["jobs"][job]["steps"] if s.get("uses") == "./")


def test_triggers_and_runner_parameter(wf: dict[Any, Any]) -> None:
    on = triggers(wf)
    assert on["push"] == {"branches": ["main"]} and "pull_request" in on
    assert "runner" in on["workflow_dispatch"]["inputs"]
    runner = "${{ inputs.runner || vars.REPORTGEN_RUNNER || 'ubuntu-latest' }}"
    assert wf["jobs"]["profile-and-build"]["runs-on"] == runner
    assert wf["jobs"]["compare"]["runs-on"] == "${{ vars.REPORTGEN_RUNNER || 'ubuntu-latest' }}"
    assert wf["permissions"] == {"contents": "read"}


def test_pages_flow_uploads_and_deploys(wf: dict[Any, Any]) -> None:
    build, deploy = wf["jobs"]["profile-and-build"], wf["jobs"]["deploy"]
    assert build["if"] == "github.event_name != 'pull_request'"
    assert local_action_step(wf, "profile-and-build")["with"]["mode"] == "push"
    action_steps = yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    uses = [s.get("uses", "") for s in action_steps]
    assert "actions/upload-pages-artifact@v3" in uses and "actions/configure-pages@v5" in uses
    upload = next(s for s in action_steps if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "${{ runner.temp }}/reportgen-site"
    assert deploy["needs"] == "profile-and-build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert [s["uses"] for s in deploy["steps"]] == ["actions/deploy-pages@v4"]


def test_pull_request_flow_runs_ab_and_comments(wf: dict[Any, Any]) -> None:
    job = wf["jobs"]["compare"]
    assert job["if"].startswith("github.event_name == 'pull_request'")
    assert job["permissions"]["pull-requests"] == "write"
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"] == {"ref": "${{ github.event.pull_request.head.sha }}", "fetch-depth": 0}
    assert local_action_step(wf, "compare")["with"]["mode"] == "pull-request"
    script = ACTION_SCRIPT.read_text()  # the action's logic; tests/test_action.py runs it
    assert 'worktree add --quiet --detach -- "$base" "$base_sha"' in script
    assert f'echo "{MARKER}"' in script and "python -m reportgen.ci.comment" in script
    assert 'reportgen ab "--base=$base" "--head=$workspace" "--scenario=$scenario"' in script
    assert 'if [ "$rc" -eq 1 ]; then gate=1; fi' in script and 'if [ "$gate" -eq 1 ]; then' in script
    assert "reportgen compare" not in script  # runs measured apart cannot gate on timing


def test_only_known_actions_pinned_to_a_major_version(wf: dict[Any, Any]) -> None:
    known = {"actions/checkout", "actions/setup-python", "actions/configure-pages", "actions/upload-pages-artifact",
             "actions/deploy-pages", "actions/github-script", "actions/cache/restore", "actions/cache/save"}
    steps = [s for job in wf["jobs"].values() for s in job["steps"]]
    steps += yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    for s in steps:
        if "uses" in s and s["uses"] != "./":
            name, _, version = s["uses"].partition("@")
            assert name in known and re.fullmatch(r"v\d+", version), s["uses"]


def _reportgen_commands(script: str) -> list[list[str]]:
    """Every ``reportgen ...`` command line in a shell script, as argv with shell variables filled in."""
    script = script.replace("\\\n", " ")
    commands = []
    for line in script.splitlines():
        m = re.search(r"(?:^|[;&|]\s*)reportgen\s+(.*)$", line.strip())
        if not m:
            continue
        text = EXPRESSION.sub("X", m.group(1)).replace('"${PROFILE_ARGS[@]}"', "--quiet --device=cpu")  # profile_args
        text = re.sub(r'\$\{(\w+)\[@\]\+"\$\{\1\[@\]\}"\}', "", text)  # ${extra[@]+"${extra[@]}"}: none
        text = re.sub(r"\$\{\w+:\+(.*?)\}", r"\1", text)  # ${VAR:+--opt "$VAR"} -> --opt "$VAR"
        text = re.sub(r"\)\s*(?=\|\||&&|;|$)", " ", text)  # (cd DIR && reportgen ...): the subshell's end
        text = re.sub(r"\)\"\s*(?=\|\||&&|;|$)", " ", text)  # x="$(cd DIR && reportgen ...)": a substitution's end
        text = re.sub(r"\$\{?(\w+)[^}\s\"]*\}?", lambda v: SAMPLE_VALUES.get(v.group(1), "X"), text)
        argv = shlex.split(text)
        ends = [i for i, tok in enumerate(argv) if tok in ("||", "&&", ";", "|")]
        commands.append(argv[: ends[0]] if ends else argv)
    return commands


def test_device_choices_match_the_cli(wf: dict[Any, Any]) -> None:
    device = triggers(wf)["workflow_dispatch"]["inputs"]["device"]
    assert device["type"] == "choice" and device["options"] == ["auto", "neuron", "cuda", "cpu"]
    assert wf["env"]["REPORTGEN_DEVICE"].endswith("|| 'auto' }}")


def test_every_reportgen_command_is_accepted_by_the_cli(wf: dict[Any, Any]) -> None:
    seen = []
    for script in run_scripts(wf):
        for argv in _reportgen_commands(script):
            build_parser().parse_args(argv)  # raises UsageError on an unknown command or option
            seen.append(argv[0])
    assert sorted(set(seen)) == ["ab", "build", "history", "profile", "scenarios"]


def test_command_extraction_catches_a_bad_option() -> None:
    (argv,) = _reportgen_commands('reportgen compare a b --treshold "$T"')
    with pytest.raises(Exception, match="unrecognized arguments: --treshold"):
        build_parser().parse_args(argv)


def test_run_scripts_are_valid_bash(wf: dict[Any, Any]) -> None:
    for script in run_scripts(wf):
        proc = subprocess.run(["bash", "-n"], input=EXPRESSION.sub("X", script), capture_output=True, text=True)
        assert proc.returncode == 0, (script, proc.stderr)


@pytest.mark.skipif(shutil.which("check-jsonschema") is None and not Path(".venv/bin/check-jsonschema").exists(),
                    reason="check-jsonschema is not installed")
def test_workflow_matches_githubs_workflow_schema(tmp_path: Path) -> None:
    exe = shutil.which("check-jsonschema") or ".venv/bin/check-jsonschema"
    cmd = [exe, "--builtin-schema", "vendor.github-workflows"]
    ok = subprocess.run([*cmd, str(WORKFLOW)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"))
    assert subprocess.run([*cmd, str(broken)], capture_output=True, text=True).returncode != 0


def test_profile_steps_keep_going_when_a_variant_fails() -> None:
    """exit 4 (a variant failed; the run is stored) must reach compare / the site, not end the job."""
    for code, expected in ((0, 0), (4, 0), (3, 3), (2, 2)):
        script = (f'reportgen() {{ return {code}; }}; source "{ACTION_SCRIPT}"; rc=0; profile . store label 2>/dev/null '
                  '|| rc=$?; echo "rc=$rc"')
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert proc.stdout.strip().endswith(f"rc={expected}"), (code, proc.stdout, proc.stderr)
