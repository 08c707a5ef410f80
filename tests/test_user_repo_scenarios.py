"""The scenario API for real kernels: structured outputs checked leaf by leaf, in-place variants with fresh
inputs outside the timing, typed parameters, the user's project on sys.path, the scenario's own errors
reported with file and line, and `reportgen scenarios`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import run_cli

from reportgen.errors import ScenarioError
from reportgen.scenario.loader import Param, Scenario, Tolerance, Variant, call_scenario, load_scenario

torch = pytest.importorskip("torch")

TOL = Tolerance(atol=1e-6, rtol=1e-6)


def test_outputs_checked_leaf_by_leaf() -> None:
    from reportgen.profile.correctness import check_correctness, first_bad_leaf

    a, b = torch.ones(3), torch.arange(3.0)
    ref = (a.double(), {"res": b.double()})
    ok = check_correctness((a, {"res": b}), ref, TOL)
    assert ok.passed and ok.max_abs_error == 0.0
    bad = check_correctness((a, {"res": b + 0.5}), ref, TOL)
    assert not bad.passed and bad.max_abs_error == pytest.approx(0.5)
    assert first_bad_leaf((a, {"res": b + 0.5}), ref, TOL) == "[1]['res']"
    assert check_correctness([a, {"res": b}], ref, TOL).passed  # a list where the reference has a tuple
    for wrong in ((a,), (a, {"other": b}), a, (a, {"res": b[:2]})):
        c = check_correctness(wrong, ref, TOL)
        assert not c.passed and c.max_abs_error is None
    assert check_correctness(a, a.double(), TOL).passed and first_bad_leaf(a, a.double(), TOL) is None


def _inplace_double(x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    residual.add_(x)
    return x.mul_(2.0), residual


def test_inplace_variant_gets_fresh_inputs_and_leaves_the_originals_alone(tmp_path: Path) -> None:
    from reportgen.devices.cpu import CpuBackend
    from reportgen.profile.measure import MeasureContext, MeasureSettingsIn, VariantInputs, measure_variant

    x, r = torch.arange(4.0), torch.ones(4)
    originals = (x.clone(), r.clone())
    ref = ((x * 2).double(), (r + x).double())
    inputs = VariantInputs((x, r), ref, TOL, 32, 4)
    settings = MeasureSettingsIn(samples=3, warmup=1, calls_per_sample=2, profile_active=1)
    out = measure_variant(MeasureContext(CpuBackend(), inputs, settings, lambda _m: None),
                          Variant("ip", "in place", _inplace_double, inplace=True), tmp_path / "w")
    assert out.result.status.value == "ok", out.result.error
    assert torch.equal(x, originals[0]) and torch.equal(r, originals[1])  # never written: every call had clones


def test_inplace_clones_are_made_before_each_sample_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from reportgen.profile import timing

    events: list[str] = []

    class Backend:
        def synchronize(self) -> None:
            events.append("sync")

        def cache_flush_bytes(self) -> int:
            return 0  # a device that flushes its cache is timed one call per sample (tests/test_sweep.py)

    monkeypatch.setattr(timing, "clone_args", lambda a: events.append("clone") or a)
    args = timing.CallArgs((torch.zeros(1),), fresh=True)
    timing.time_samples(Backend(), lambda *_: events.append("call"), args, n=2, calls=3)  # type: ignore[arg-type]
    assert events == ["clone"] * 3 + ["sync"] + ["call"] * 3 + ["sync"] + ["clone"] * 3 + ["sync"] + ["call"] * 3 \
        + ["sync"]
    events.clear()
    timing.time_samples(Backend(), lambda *_: events.append("call"), timing.CallArgs((1,)), n=1, calls=2)  # type: ignore[arg-type]
    assert events == ["sync", "call", "call", "sync"]  # not in place: no copies at all


def _scenario(**kw: object) -> Scenario:
    base: dict[str, object] = dict(name="s", description="d", default_shape=(2,), default_dtype="float32",
                                   make_inputs=lambda *a: a, reference=lambda *a: a, variants=(),
                                   bytes_per_call=lambda *a: 0, flops_per_call=lambda *a: 0)
    base.update(kw)
    return Scenario(**base)  # type: ignore[arg-type]


def test_parameters_are_typed_and_checked() -> None:
    sc = _scenario(params=(Param("eps", float, 1e-6, "epsilon"), Param("causal", bool, False),
                           Param("dim", int, -1)))
    assert sc.resolve_params({"eps": "1e-5"}, {"dim": "0", "other": "x"}) == {"eps": 1e-5, "causal": False, "dim": 0}
    assert [p.show(v) for p, v in zip(sc.params, (1e-5, True, 0), strict=True)] == ["1e-05", "true", "0"]
    with pytest.raises(ScenarioError, match=r"--param nope: scenario 's' declares no such parameter \(it declares: "
                                            r"eps, causal, dim\)"):
        sc.resolve_params({"nope": "1"}, {}, flag="--param")
    with pytest.raises(ScenarioError, match=r"--param eps='small': expected float \(epsilon\)"):
        sc.resolve_params({"eps": "small"}, {}, flag="--param")
    with pytest.raises(ScenarioError, match=r"--param causal='maybe': expected bool"):
        sc.resolve_params({"causal": "maybe"}, {}, flag="--param")
    seen: list[object] = []
    sc2 = _scenario(params=(Param("eps", float, 1.0),), make_inputs=lambda *a: seen.extend(a) or (1,))
    assert sc2.make((2,), "float32", 0, "cpu", {"eps": 2.0}) == (1,) and seen[-1] == {"eps": 2.0}


def test_scenario_imports_the_users_package_from_the_project_root(tmp_path: Path) -> None:
    (tmp_path / "mykernels").mkdir()
    (tmp_path / "mykernels" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "helpers.py").write_text("NAME = 'helped'\n")
    (tmp_path / "bench" / "dbl.py").write_text(
        "from mykernels import double\nfrom helpers import NAME\nfrom reportgen.scenario.loader import Scenario, Variant\n"
        "SCENARIO = Scenario(name=NAME, description='d', default_shape=(2,), default_dtype='float32',\n"
        "    make_inputs=lambda *a: (1,), reference=lambda x: 2 * x, variants=(Variant('v', 'd', double),),\n"
        "    bytes_per_call=lambda *a: 0, flops_per_call=lambda *a: 0)\n")
    saved = list(sys.path)
    try:
        sc = load_scenario("dbl", config_sources=[tmp_path / "bench"], project_root=tmp_path)
    finally:
        sys.path[:] = saved
        sys.modules.pop("mykernels", None)
        sys.modules.pop("helpers", None)
    assert sc.name == "helped" and sc.variants[0].fn(3) == 6 and sc.source_file == str(tmp_path / "bench" / "dbl.py")


def test_an_error_in_the_scenarios_own_function_names_its_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "sc.py"
    f.write_text("def helper(x):\n    return x / 0\n\ndef reference(x):\n    return helper(x)\n")
    ns: dict[str, object] = {}
    exec(compile(f.read_text(), str(f), "exec"), ns)
    sc = _scenario(source_file=str(f))
    with pytest.raises(ScenarioError, match=rf"^{f}:2: reference raised ZeroDivisionError: division by zero; "
                                            "fix the scenario file$"):
        call_scenario(ns["reference"], "reference", 1, source_file=sc.source_file)


BROKEN_REFERENCE = '''
import torch
from reportgen.scenario.loader import Scenario, Variant

def make_inputs(shape, dtype, seed, device):
    return (torch.ones(shape, dtype=dtype),)

def reference(x):
    return x.double() @ torch.ones(3, 3, dtype=torch.float64)

def boom(x):
    raise RuntimeError("kernel exploded")

SCENARIO = Scenario(name="broken", description="d", default_shape=(2, 4), default_dtype="float32",
    make_inputs=make_inputs, reference=reference, variants=(Variant("v", "d", boom),),
    bytes_per_call=lambda shape, itemsize: 0, flops_per_call=lambda shape: 0)
'''


def test_reference_bug_is_the_scenarios_error_not_an_internal_one(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text(BROKEN_REFERENCE)
    proc = run_cli("profile", "--scenario", str(f), "--device", "cpu", "--quiet", "--store", str(tmp_path / "s"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "internal error" not in proc.stderr
    assert proc.stderr.startswith(f"reportgen: error: {f}:9: reference raised RuntimeError: ")
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


def test_a_failing_variant_names_its_line_in_the_scenario(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text(BROKEN_REFERENCE.replace("x.double() @ torch.ones(3, 3, dtype=torch.float64)", "x.double()"))
    proc = run_cli("profile", "--scenario", str(f), "--device", "cpu", "--samples", "2", "--quiet",
                   "--store", str(tmp_path / "s"))
    assert proc.returncode == 4, proc.stderr
    assert f"RuntimeError: kernel exploded (at {f}:12)" in proc.stdout


def test_scenarios_command_lists_config_and_builtin_scenarios(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "softer.py").write_text(
        "from reportgen.scenario.loader import Param, Scenario, Variant\n"
        "SCENARIO = Scenario(name='softer', description='a softmax', default_shape=(2,), default_dtype='float32',\n"
        "    make_inputs=lambda *a: (1,), reference=lambda x: x,\n"
        "    variants=(Variant('a', 'first', abs), Variant('b', 'second', abs, inplace=True)),\n"
        "    bytes_per_call=lambda *a: 0, flops_per_call=lambda *a: 0,\n"
        "    params=(Param('eps', float, 1e-05, 'added to the sum'),))\n")
    (tmp_path / "reportgen.toml").write_text('scenarios = ["bench"]\n')
    proc = run_cli("scenarios", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:4] == [f"softer [{tmp_path / 'bench' / 'softer.py'}]: a softmax (shape 2, float32)",
                         "    variant a: first", "    variant b (in-place): second",
                         "    --param eps=1e-05 (float): added to the sum"]
    assert any(ln.startswith("rmsnorm [built-in]: ") for ln in lines)
    assert "    variant compiled (compiled): the naive function under torch.compile (inductor; neuron on Trainium)" \
        in lines
