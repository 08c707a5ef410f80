"""`reportgen init`: writes a config, an example scenario and a workflow; never overwrites; next steps."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from hostile import snapshot

from reportgen.ci.init import DEFAULT_ACTION_REF, FILES
from reportgen.cli import main
from reportgen.config import load_config

WRITTEN = ["reportgen.toml", "bench/example_scenario.py", ".github/workflows/reportgen.yml"]


def test_init_writes_three_files_and_prints_next_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [f.rel for f in FILES] == WRITTEN
    assert main(["init", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [f"wrote {tmp_path / rel}" for rel in WRITTEN]
    assert "next steps:" in out and "reportgen profile" in out and "reportgen build" in out
    cfg = load_config(tmp_path, environ={})
    assert cfg.file == tmp_path.resolve() / "reportgen.toml"
    assert cfg.scenarios == (tmp_path.resolve() / "bench",) and cfg.threshold_pct == 5.0
    wf = yaml.safe_load((tmp_path / WRITTEN[2]).read_text())
    uses = [s["uses"] for job in wf["jobs"].values() for s in job["steps"] if "uses" in s]
    assert uses.count(DEFAULT_ACTION_REF) == 3 and "actions/deploy-pages@v4" in uses  # profile, compare, calibrate
    modes = [s["with"]["mode"] for job in wf["jobs"].values() for s in job["steps"] if "with" in s and "mode" in s["with"]]
    assert sorted(modes) == ["calibrate", "pull-request", "push"]
    compile((tmp_path / WRITTEN[1]).read_text(), WRITTEN[1], "exec")


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / WRITTEN[2]).write_text("mine\n")
    assert main(["init", "--dir", str(tmp_path)]) == 6
    err = capsys.readouterr().err
    assert err == (f"reportgen: error: {tmp_path / WRITTEN[2]}: already exists; reportgen init never overwrites a "
                   "file (move it away or edit it by hand)\n")
    assert (tmp_path / WRITTEN[2]).read_text() == "mine\n"
    assert not (tmp_path / "reportgen.toml").exists() and not (tmp_path / "bench").exists()


def test_init_refuses_when_pyproject_already_configures_reportgen(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.reportgen]\nthreshold = 3\n")
    assert main(["init", "--dir", str(tmp_path)]) == 6
    assert "pyproject.toml: already has [tool.reportgen]" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_init_action_ref_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--dir", str(tmp_path), "--action-ref", "me/reportgen@v1\n  evil: 1"]) == 2
    assert "--action-ref" in capsys.readouterr().err and not any(tmp_path.iterdir())
    assert main(["init", "--dir", str(tmp_path), "--action-ref", "me/reportgen@abc123"]) == 0
    assert "uses: me/reportgen@abc123" in (tmp_path / WRITTEN[2]).read_text()


@pytest.mark.skipif(shutil.which("check-jsonschema") is None and not Path(".venv/bin/check-jsonschema").exists(),
                    reason="check-jsonschema is not installed")
def test_written_workflow_matches_githubs_schema(tmp_path: Path) -> None:
    assert main(["init", "--dir", str(tmp_path)]) == 0
    exe = shutil.which("check-jsonschema") or ".venv/bin/check-jsonschema"
    proc = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(tmp_path / WRITTEN[2])],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflow_leaves_the_cpu_runner_to_abs_measured_defaults(tmp_path: Path) -> None:
    """The pull-request job runs on a hosted CPU runner; reportgen ab's own defaults are the ones measured for one
    (one thread, huge pages where the kernel gives them), so the workflow passes no flags that a kernel without huge
    pages would refuse."""
    assert main(["init", "--dir", str(tmp_path)]) == 0
    wf = yaml.safe_load((tmp_path / WRITTEN[2]).read_text())
    compare = wf["jobs"]["compare"]
    assert compare["runs-on"] == "ubuntu-latest"
    (step,) = [s for s in compare["steps"] if s.get("with", {}).get("mode") == "pull-request"]
    assert "ab-args" not in step["with"]
    push_steps = [s for s in wf["jobs"]["profile"]["steps"] if s.get("with", {}).get("mode") == "push"]
    assert push_steps and "ab-args" not in push_steps[0]["with"]


def test_workflow_calibrates_the_pull_request_runner_weekly_and_on_request(tmp_path: Path) -> None:
    """The calibrate job runs the action's calibrate mode on the compare job's runner, on the schedule and when a
    dispatch ticks "calibrate"; neither profiles or deploys, and a push never calibrates."""
    assert main(["init", "--dir", str(tmp_path)]) == 0
    wf = yaml.safe_load((tmp_path / WRITTEN[2]).read_text())
    on = wf.get("on", wf.get(True))
    assert on["schedule"] == [{"cron": "17 4 * * 1"}]
    assert on["workflow_dispatch"]["inputs"]["calibrate"] == {
        "description": "Calibrate the pull-request runner instead of profiling", "type": "boolean", "default": False}
    job = wf["jobs"]["calibrate"]
    assert job["runs-on"] == wf["jobs"]["compare"]["runs-on"]
    assert job["permissions"] == {"contents": "write"}
    assert job["concurrency"] == wf["jobs"]["profile"]["concurrency"]  # one writer of the results branch at a time
    (step,) = [s for s in job["steps"] if "with" in s and "mode" in s["with"]]
    assert step["with"]["mode"] == "calibrate" and step["uses"] == wf["jobs"]["compare"]["steps"][1]["uses"]

    def runs(job_name: str, event: str, calibrate: bool = False) -> bool:
        """The job's `if:` evaluated for one event (its expressions are ==, &&, || and ! over these two names)."""
        expr = wf["jobs"][job_name]["if"].replace("&&", " and ").replace("||", " or ").replace("!inputs", " not inputs")
        return bool(eval(expr, {}, {"github": type("G", (), {"event_name": event}),
                                    "inputs": type("I", (), {"calibrate": calibrate})}))

    assert [runs("calibrate", e, c) for e, c in (("schedule", False), ("workflow_dispatch", True),
                                                 ("workflow_dispatch", False), ("push", False))] == [
        True, True, False, False]
    assert [runs("profile", e, c) for e, c in (("schedule", False), ("workflow_dispatch", True),
                                               ("workflow_dispatch", False), ("push", False))] == [
        False, False, True, True]


@pytest.mark.parametrize("ref", ["", " ", "me/reportgen@", "me/reportgen@v1\n", "@v1"])
def test_init_action_ref_must_name_a_ref(tmp_path: Path, capsys: pytest.CaptureFixture[str], ref: str) -> None:
    """An empty or ref-less --action-ref would write `uses: ...@`: refused, nothing written."""
    assert main(["init", "--dir", str(tmp_path), "--action-ref", ref]) == 2
    err = capsys.readouterr().err
    assert err.startswith("reportgen: error: --action-ref ") and "expected OWNER/REPO@REF" in err
    assert not any(tmp_path.iterdir())


def test_init_writes_all_or_nothing_when_a_folder_cannot_be_made(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`.github` is a file, so the workflow's folder cannot be made after two files were written: those two
    (and bench/) are removed again; one line names the path; the folder is as it was."""
    (tmp_path / ".github").write_text("mine\n")
    before = snapshot(tmp_path)
    assert main(["init", "--dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"reportgen: error: {tmp_path / '.github'}: cannot be written (File exists); reportgen "
                            "init wrote nothing; use a writable folder with free space\n")
    assert snapshot(tmp_path) == before


def test_init_writes_all_or_nothing_when_the_disk_is_full(tmp_path: Path) -> None:
    """A real write failure (a 1,000-byte file size limit: EFBIG, as a full disk gives ENOSPC) while writing the
    second file: exit 2, one line, no file or folder of init's left behind."""
    import resource
    import signal
    import sys

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    before = snapshot(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "reportgen", "init", "--dir", str(tmp_path)], capture_output=True,
                          text=True, preexec_fn=limit, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"reportgen: error: {tmp_path / 'bench'}") and proc.stderr.count("\n") == 1
    assert "cannot be written (File too large); reportgen init wrote nothing" in proc.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_init_files_get_the_umask_mode(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        assert main(["init", "--dir", str(tmp_path)]) == 0
    finally:
        os.umask(old)
    assert {rel: stat.S_IMODE((tmp_path / rel).stat().st_mode) for rel in WRITTEN} == dict.fromkeys(WRITTEN, mode)
