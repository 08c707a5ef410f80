"""Scenarios are plug-ins: a second workload (layernorm) runs through the same CLI by file alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from reportgen.errors import ScenarioError
from reportgen.scenario.loader import SCENARIOS_DIR, load_scenario
from reportgen.store.loader import load_store


def test_layernorm_scenario_profiles_through_the_cli(tmp_path: Path) -> None:
    proc = run_cli("profile", "--scenario", "layernorm", "--device", "cpu", "--shape", "2,8,64", "--samples", "4",
                   "--quiet", "--store", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (run,) = load_store(tmp_path)
    assert run.scenario.name == "layernorm" and [v.name for v in run.variants] == ["naive", "fused"]
    fused_ops = {r.name for r in run.variant("fused").ops}
    assert "aten::native_layer_norm" in fused_ops or "aten::layer_norm" in fused_ops
    assert all(v.correctness and v.correctness.passed for v in run.variants)


def test_a_wrong_variant_is_marked_not_dropped(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text((SCENARIOS_DIR / "layernorm.py").read_text()
                   .replace("return centred * torch.rsqrt(var + EPS) * weight + bias",
                            "return centred * torch.rsqrt(var + EPS) * weight + bias + 1.0")
                   .replace("def fused(", "def fused_(")
                   .replace('Variant("fused", "torch.nn.functional.layer_norm (aten::native_layer_norm)", fused)',
                            'Variant("boom", "raises", lambda *a: (_ for _ in ()).throw(MemoryError("out of memory")))'))
    proc = run_cli("profile", "--scenario", str(bad), "--device", "cpu", "--shape", "2,32", "--samples", "3",
                   "--quiet", "--store", str(tmp_path / "store"))
    assert proc.returncode == 4, proc.stderr
    (run,) = load_store(tmp_path / "store")
    naive, boom = run.variants
    assert naive.status.value == "incorrect" and naive.error.startswith("wrong result: FAILED (beyond atol=")
    assert len(naive.samples_us) == 3  # still timed, and marked
    assert boom.status.value == "failed" and boom.error.startswith("MemoryError: out of memory")
    assert "WRONG RESULT" in proc.stdout and "FAILED  MemoryError: out of memory" in proc.stdout


def test_scenario_file_without_scenario_object(tmp_path: Path) -> None:
    f = tmp_path / "empty.py"
    f.write_text("X = 1\n")
    with pytest.raises(ScenarioError, match=r"empty.py: must define SCENARIO = reportgen.scenario.loader.Scenario"):
        load_scenario(str(f))


def test_scenario_file_that_raises_is_a_one_line_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text("import nosuchmodule_xyz\n")
    with pytest.raises(ScenarioError, match=r"broken.py:1: failed to load \(ModuleNotFoundError: No module named "
                                            r"'nosuchmodule_xyz'\); fix the scenario file"):
        load_scenario(str(f))
