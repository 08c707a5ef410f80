"""Everything after profiling works from bundles alone: build, runs, compare, import never import torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REAL_TRACES_DIR
from factories import synthetic_run, write_synthetic

BLOCK_TORCH = (
    "import sys\n"
    "sys.modules['torch'] = None  # any 'import torch' now raises ImportError\n"
    "from reportgen.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH, *args], capture_output=True, text=True, timeout=300)


def test_build_runs_compare_and_import_need_no_torch(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run(run_id="r1", created_utc="2026-11-01T00:00:00Z", with_traces=True))
    write_synthetic(store, synthetic_run(run_id="r2", created_utc="2026-11-02T00:00:00Z", with_traces=True))
    for args in (["import", str(REAL_TRACES_DIR / "triton_example.trace.json.gz"), "--store", str(store)],
                 ["runs", "--store", str(store)],
                 ["compare", "r1", "r2", "--store", str(store)],
                 ["build", "--runs", str(store), "--out", str(tmp_path / "site")]):
        proc = _run(*args)
        assert proc.returncode == 0, (args[0], proc.stderr)
    assert (tmp_path / "site" / "runs" / "r2" / "index.html").is_file()


def test_profile_without_torch_is_a_one_line_error(tmp_path: Path) -> None:
    proc = _run("profile", "--device", "cpu", "--store", str(tmp_path))
    assert proc.returncode == 5
    assert proc.stderr.startswith("reportgen: error: torch is not installed; profiling needs it: pip install torch==2.13.0")
    assert proc.stderr.count("\n") == 1


def test_scenario_names_need_no_torch(tmp_path: Path) -> None:
    """`reportgen scenarios --names` (what the action's pull-request mode runs) lists without loading."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "mine.py").write_text("import torch\n")
    (tmp_path / "reportgen.toml").write_text('scenarios = ["bench/"]\n')
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH, "scenarios", "--names"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "mine\n", "")
