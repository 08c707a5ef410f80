"""docs/using-in-your-repo.md runs as written: every ```sh block marked <!-- test --> runs, in order, in a
fresh folder (with the files of the blocks marked <!-- test: file PATH --> written when the doc reaches
them), with this environment's `reportgen` console script on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

DOC = ROOT / "docs" / "using-in-your-repo.md"
BLOCK = re.compile(r"<!-- test(?:: file (?P<file>\S+))? -->\n```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)


def doc_steps() -> list[tuple[str | None, str, str]]:
    """``(file or None, language, body)`` of every marked block, in the doc's order."""
    return [(m["file"], m["lang"], m["body"]) for m in BLOCK.finditer(DOC.read_text())]


def test_the_doc_marks_its_commands() -> None:
    steps = doc_steps()
    commands = "\n".join(body for file, _lang, body in steps if file is None)
    for needed in ("reportgen init", "reportgen config", "reportgen scenarios", "reportgen profile",
                   "reportgen build", "reportgen compare", "reportgen runs", "reportgen rm"):
        assert needed in commands, needed
    assert [f for f, _l, _b in steps if f] == ["mykernels/__init__.py", "bench/softmax.py"]
    assert all(lang == ("python" if f else "sh") for f, lang, _b in steps)


def test_the_doc_runs_as_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPORTGEN_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path / "home")})
    repo = tmp_path / "myrepo"
    repo.mkdir()
    for file, _lang, body in doc_steps():
        if file is not None:
            (repo / file).parent.mkdir(parents=True, exist_ok=True)
            (repo / file).write_text(body)
            continue
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, (body, proc.stdout[-2000:], proc.stderr[-3000:])
        if "reportgen profile" in body:
            assert "USDT" not in proc.stderr and "profiler_start" not in proc.stderr  # only reportgen's lines
        if "reportgen compare" in body:
            assert "\n<!-- reportgen-compare -->\n" in proc.stdout
    assert (repo / "site" / "index.html").is_file()
    assert (repo / "results" / "withdrawn.json").is_file()
