"""``reportgen ab`` end to end through the CLI: one real small A/B run of two checkouts (each importing its
own package), a scenario present on one side only, and a side that fails to import."""

from __future__ import annotations

import re
import subprocess
from itertools import islice
from pathlib import Path

import pytest
from conftest import run_cli

from reportgen.ab.session import session_orders
from reportgen.store.loader import load_store
from reportgen.text.markdown import md_escape

TINY = '''"""A tiny RMSNorm for A/B tests; its description names the checkout whose package it imported."""
import torch

from abpkg import SIDE
from reportgen.scenario.loader import Scenario, Variant

print("a scenario that prints on import")  # must not corrupt the worker's protocol on stdout

def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen).to(dtype).to(device), torch.ones(shape[-1], dtype=dtype, device=device))


def naive(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


def fused(x, w):
    return torch.rms_norm(x, (x.shape[-1],), w, 1e-6)


def reference(x, w):
    x64 = x.double()
    return x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-6) * w.double()


SCENARIO = Scenario(
    name="tiny", description=f"tiny rmsnorm from the {SIDE} tree", default_shape=(4, 64), default_dtype="float32",
    make_inputs=make_inputs, reference=reference,
    variants=(Variant("naive", "eager ops", naive), Variant("fused", "torch.rms_norm", fused),
              Variant("compiled", "naive under torch.compile", naive, compile=True)),
    bytes_per_call=lambda shape, itemsize: 2 * shape[0] * shape[1] * itemsize,
    flops_per_call=lambda shape: 4 * shape[0] * shape[1],
)
'''
EXIT_BY_HEADLINE = {"no change": 0, "faster": 0, "time regression": 1, "memory regression": 1,
                    "time and memory regression": 1, "inconclusive after the time budget": 7}


def checkout(root: Path, side: str, scenario: str | None = TINY) -> str:
    """A git checkout holding scenarios/tiny.py and its own package ``abpkg``; returns its commit sha."""
    (root / "abpkg").mkdir(parents=True)
    (root / "abpkg" / "__init__.py").write_text(f"SIDE = {side!r}\n")
    if scenario is not None:
        (root / "scenarios").mkdir()
        (root / "scenarios" / "tiny.py").write_text(scenario)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", side]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_real_small_ab_run_of_two_checkouts(tmp_path: Path) -> None:
    shas = {side: checkout(tmp_path / side, side) for side in ("base", "head")}
    store, out = tmp_path / "store", tmp_path / "comment.md"
    proc = run_cli("ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--scenario", "tiny",
                   "--shape", "4,64", "--variants", "naive,fused", "--sessions", "6", "--rounds", "2", "--max-seconds", "2",
                   "--samples", "4", "--discard", "1", "--threads", "1", "--clock", "cpu", "--order-seed", "4242",
                   "--store", str(store), "--output", str(out), "--quiet", env={"MALLOC_ARENA_MAX": "2"}, timeout=600)
    assert proc.stderr == "" and proc.stdout == ""
    text = out.read_text()
    headline = re.search(r"^### :[a-z_]+: reportgen A/B: ([a-z ]+)", text, re.M)
    assert headline is not None and proc.returncode == EXIT_BY_HEADLINE[headline.group(1)]
    base, head = load_store(store)
    assert base.ab is not None and head.ab is not None and base.ab.pair_id == head.ab.pair_id
    assert (base.ab.side, head.ab.side) == ("base", "head")
    # each worker imported its own checkout's package
    assert base.scenario.description == "tiny rmsnorm from the base tree"
    assert head.scenario.description == "tiny rmsnorm from the head tree"
    assert (base.git.sha, head.git.sha) == (shas["base"], shas["head"])
    # both workers ran with the threads asked for (torch's default here is one per core) and the comment says so
    assert base.environment.torch_threads == head.environment.torch_threads == 1
    assert md_escape("1 thread (--threads)") in text
    # timed by each worker's CPU time: the method says so, and so does each stored run
    assert md_escape("samples timed by each worker's CPU time (user + system, all its threads)") in text
    assert all(any("not wall-clock time (reportgen ab --clock cpu)" in n for n in r.notes) for r in (base, head))
    # the allocator setting of the job's environment reached both workers: their fingerprints and the comment say so
    assert base.environment.allocator_env["MALLOC_ARENA_MAX"] == head.environment.allocator_env["MALLOC_ARENA_MAX"] == "2"
    assert md_escape("allocator MALLOC_ARENA_MAX=2") in text
    rounds = len(base.ab.rounds)
    assert rounds == 12 and len(head.ab.rounds) == rounds  # the minimum 6 sessions of 2 rounds: the budget is spent
    assert [(r.session, r.index) for r in head.ab.rounds] == [(s, i) for s in range(6) for i in range(2)]
    # the sessions ran in the order the seed asked for, and both runs record it
    orders = tuple(islice(session_orders(4242), 6))
    assert base.ab.order_seed == head.ab.order_seed == 4242 and base.ab.orders == head.ab.orders == orders
    assert [r.first_side for r in head.ab.rounds] == [o.opens if i == 0 else ("head" if o.opens == "base" else "base")
                                                      for o in orders for i in range(2)]
    assert [v.name for v in base.variants] == ["naive", "fused"]
    assert all(len(v.samples_us) == 4 * rounds and v.status.value == "ok" for v in (*base.variants, *head.variants))
    assert ("**6 sessions** (fresh pairs of worker processes) of 2 rounds, **12 rounds** in all, in ABBA order, "
            "4 samples per variant per side per round") in text
    assert md_escape("block of 4 samples after 1 untimed per variant per round") in text  # --discard 1 was used
    assert f"base {shas['base'][:12]} vs head {shas['head'][:12]}" in text
    assert "Scenario **tiny** (shape 4\\,64, float32) on **cpu**" in text
    assert f"base run {md_escape(base.run_id)}, head run {md_escape(head.run_id)}" in text


def test_a_scenario_only_in_head_is_new_not_a_failure(tmp_path: Path) -> None:
    checkout(tmp_path / "base", "base", scenario=None)
    checkout(tmp_path / "head", "head")
    proc = run_cli("ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--scenario", "tiny",
                   "--store", str(tmp_path / "store"))
    assert proc.returncode == 0, proc.stderr
    assert "reportgen A/B: scenario tiny is new in head" in proc.stdout
    assert not (tmp_path / "store").exists()


def test_a_side_that_fails_to_import_is_named_and_exits_3(tmp_path: Path) -> None:
    checkout(tmp_path / "base", "base")
    checkout(tmp_path / "head", "head", scenario=TINY.replace("from abpkg import SIDE", "from abpkg import GONE"))
    proc = run_cli("ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--scenario", "tiny",
                   "--store", str(tmp_path / "store"), "--quiet", timeout=600)
    assert proc.returncode == 3, proc.stderr
    assert "> The **head** side failed (import): " in proc.stdout
    assert "ImportError" in proc.stdout and "GONE" in proc.stdout
    assert proc.stderr.count("\n") == 1
    head = tmp_path / "head"
    assert re.match(re.escape(f"reportgen: error: the head side ({head}) failed in load: "
                              f"{head / 'scenarios' / 'tiny.py'}") + r":\d+: failed to load \(ImportError", proc.stderr)
    assert str(head / "abpkg" / "__init__.py") in proc.stderr  # the head's own package was the one imported
    assert not (tmp_path / "store").exists()


def config_checkout(root: Path, side: str, folder: str, scenario: str = TINY, pyproject: bool = False) -> None:
    """A checkout whose config names ``<folder>/`` as its scenarios (no ``scenarios/`` folder)."""
    (root / folder).mkdir(parents=True)
    (root / folder / "tiny.py").write_text(scenario)
    if pyproject:
        (root / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.reportgen]\nscenarios = ["{folder}/"]\n')
    else:
        (root / "reportgen.toml").write_text(f'scenarios = ["{folder}/"]\n')
    checkout(root, side, scenario=None)


def test_a_scenario_name_resolves_through_each_checkouts_own_config(tmp_path: Path) -> None:
    from reportgen.ab.worker import scenario_path

    base, head, plain = tmp_path / "base", tmp_path / "head", tmp_path / "plain"
    config_checkout(base, "base", "bench")
    config_checkout(head, "head", "perf", pyproject=True)
    checkout(plain, "plain")
    assert scenario_path(base, "tiny") == base / "bench" / "tiny.py"
    assert scenario_path(head, "tiny") == head / "perf" / "tiny.py"
    assert scenario_path(head, "other") == head / "scenarios" / "other.py"  # not in the config: scenarios/
    assert scenario_path(plain, "tiny") == plain / "scenarios" / "tiny.py"  # no config
    assert scenario_path(head, "bench/tiny.py") == head / "bench" / "tiny.py"  # a path: relative to the checkout


def test_each_worker_loads_the_scenario_its_checkouts_config_names(tmp_path: Path) -> None:
    """The base finds bench/tiny.py through its reportgen.toml, the head perf/tiny.py through its pyproject.toml
    (which fails to import): only the head side fails, and its error names its own file."""
    base, head = tmp_path / "base", tmp_path / "head"
    config_checkout(base, "base", "bench")
    config_checkout(head, "head", "perf", TINY.replace("from abpkg import SIDE", "from abpkg import GONE"), True)
    proc = run_cli("ab", "--base", str(base), "--head", str(head), "--scenario", "tiny",
                   "--store", str(tmp_path / "store"), "--quiet", timeout=600)
    assert proc.returncode == 3, proc.stderr
    assert "> The **head** side failed (import): " in proc.stdout and "**base** side failed" not in proc.stdout
    assert proc.stderr.startswith(f"reportgen: error: the head side ({head}) failed in load: {head / 'perf' / 'tiny.py'}:")
    assert str(head / "abpkg" / "__init__.py") in proc.stderr


def test_a_worker_puts_its_checkout_and_its_src_folder_first_on_sys_path(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from reportgen.ab.worker import _enter_checkout

    launch, root = tmp_path / "launch", tmp_path / "checkout"
    (root / "src").mkdir(parents=True)
    launch.mkdir()
    monkeypatch.chdir(launch)
    monkeypatch.setattr(sys, "path", ["", str(launch), "/site-packages", str(root / "src")])
    _enter_checkout(root)
    assert sys.path == [str(root), str(root / "src"), "/site-packages"] and Path.cwd() == root
    (root / "src").rmdir()
    monkeypatch.setattr(sys, "path", ["", "/site-packages"])
    _enter_checkout(root)
    assert sys.path == [str(root), "/site-packages"]


def test_a_scenario_the_base_config_does_not_name_is_new_in_head(tmp_path: Path) -> None:
    (tmp_path / "base" / "bench").mkdir(parents=True)
    (tmp_path / "base" / "reportgen.toml").write_text('scenarios = ["bench/"]\n')
    checkout(tmp_path / "base", "base", scenario=None)
    config_checkout(tmp_path / "head", "head", "bench")
    proc = run_cli("ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--scenario", "tiny",
                   "--store", str(tmp_path / "store"))
    assert proc.returncode == 0, proc.stderr
    assert "reportgen A/B: scenario tiny is new in head" in proc.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sessions", "5"], "--sessions 5: must be at least 6"),
        (["--rounds", "3"], "--rounds 3: must be an even number >= 2"),
        (["--threads", "0"], "--threads 0: must be at least 1"),
        (["--order-seed", "-1"], "--order-seed -1: must be between 0 and 4294967295"),
        (["--shape", "4,x"], "shape '4,x': expected comma-separated positive integers"),
        (["--base", "/nonexistent/x"], "--base /nonexistent/x: not a folder"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(tmp_path: Path, extra: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from reportgen.cli import main

    code = main(["ab", "--base", str(tmp_path), "--head", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_huge_pages_are_allowed_where_the_kernel_gives_them_on_request() -> None:
    from reportgen.ab.command import check_huge_pages

    for mode in ("madvise", "always"):
        check_huge_pages(mode)  # no exception


@pytest.mark.parametrize("mode, refused", [("never", "(/sys/kernel/mm/transparent_hugepage/enabled says never)"),
                                           (None, "(no /sys/kernel/mm/transparent_hugepage/enabled)")])
def test_huge_pages_are_refused_where_the_kernel_gives_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str], mode: str | None,
                                                            refused: str) -> None:
    from reportgen.ab import command
    from reportgen.cli import main

    monkeypatch.setattr(command, "read_thp_mode", lambda: mode)
    code = main(["ab", "--base", str(tmp_path), "--head", str(tmp_path), "--huge-pages", "--store", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"--huge-pages: this machine gives no transparent huge pages on request {refused}; drop it" in err
    assert not (tmp_path / "s").exists()


def test_huge_pages_reach_the_workers_environment_and_their_fingerprint(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable is set in the workers only (torch reads it at its first allocation), and each worker records it."""
    import os

    from reportgen.ab.process import ProcessWorker, worker_environment
    from reportgen.ab.settings import AbSettings

    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert worker_environment(AbSettings(), os.environ) == {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the caller's own choice is kept
    assert worker_environment(AbSettings(), os.environ)["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert "THP_MEM_ALLOC_ENABLE" not in worker_environment(AbSettings(huge_pages=False, thp_on_request=True), {})
    assert worker_environment(AbSettings(thp_on_request=True), {})["THP_MEM_ALLOC_ENABLE"] == "1"  # the default
    env = worker_environment(AbSettings(huge_pages=True), os.environ)
    assert env is not None and env["THP_MEM_ALLOC_ENABLE"] == "1" and env["PATH"] == os.environ["PATH"]
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "0"  # this process's own environment untouched
    checkout(tmp_path / "c", "base")
    worker = ProcessWorker("base", env=env)
    try:
        worker.send({"cmd": "load", "root": str(tmp_path / "c"), "scenario": "tiny", "device": "cpu",
                     "threads": None, "clock": "wall"})
        reply = worker.receive()
    finally:
        worker.close()
    assert reply["event"] == "loaded" and reply["environment"]["allocator_env"] == {"THP_MEM_ALLOC_ENABLE": "1"}
    assert reply["environment"]["torch_threads"] == 1  # no --threads: the CPU default


@pytest.mark.parametrize("mode, wanted", [("madvise", True), ("always", True), ("never", False), (None, False)])
def test_by_default_huge_pages_follow_the_kernel_and_a_missing_mode_is_no_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str | None, wanted: bool) -> None:
    from reportgen.ab import command
    from reportgen.ab.pair import PairResult
    from reportgen.cli import main

    seen = []

    def measure(request: command.AbRequest, roots: dict[str, Path]) -> PairResult:
        seen.append(request.settings)
        raise command.UsageError("stop here", field="scenario")

    monkeypatch.setattr(command, "read_thp_mode", lambda: mode)
    monkeypatch.setattr(command, "_measure", measure)
    for side in ("base", "head"):
        checkout(tmp_path / side, side)
    assert main(["ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--scenario", "tiny",
                 "--device", "cpu", "--store", str(tmp_path / "s")]) == 2
    (settings,) = seen
    assert settings.huge_pages is None and settings.thp_on_request is wanted and settings.wants_huge_pages is wanted
    assert settings.threads is None  # the worker sets the CPU default (above)


PARAM_TINY = TINY.replace("from reportgen.scenario.loader import Scenario, Variant",
                          "from reportgen.scenario.loader import Param, Scenario, Variant").replace(
    '''def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
''', '''def make_inputs(shape, dtype, seed, device, params):
    if params["scale"] == 3.0:
        raise ValueError(f"scale {params['scale']} is not supported")
    gen = torch.Generator().manual_seed(seed)
''').replace('''    flops_per_call=lambda shape: 4 * shape[0] * shape[1],
)''', '''    flops_per_call=lambda shape: 4 * shape[0] * shape[1],
    params=(Param("scale", float, 1.0, "a value make_inputs checks"),),
)''')


def test_scenario_parameters_reach_both_workers_from_the_flag_and_the_config(tmp_path: Path) -> None:
    """A scenario that declares parameters gets them in make_inputs (as `reportgen profile` gives them): the config's
    default, overridden by --param; each stored run records the value, and a bad value is the user's error."""
    for side in ("base", "head"):
        checkout(tmp_path / side, side, scenario=PARAM_TINY)
    work = tmp_path / "work"
    work.mkdir()
    (work / "reportgen.toml").write_text('params = { scale = "2" }\n')
    common = ["ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--scenario", "tiny",
              "--shape", "4,64", "--variants", "fused", "--sessions", "6", "--rounds", "2", "--max-seconds", "2",
              "--threads", "1", "--quiet"]
    proc = run_cli(*common, "--store", str(tmp_path / "s1"), "--output", str(tmp_path / "c.md"), cwd=work)
    assert proc.returncode in (0, 7), proc.stderr  # measured: no change or inconclusive, never a failure
    base, head = load_store(tmp_path / "s1")
    assert base.scenario.parameters["scale"] == head.scenario.parameters["scale"] == "2.0"  # the config's default
    assert "Scenario **tiny** (shape 4\\,64, float32, scale\\=2\\.0) on **cpu**" in (tmp_path / "c.md").read_text()
    # --param overrides it; 3.0 makes the scenario's make_inputs raise: its file and line are named
    proc = run_cli(*common, "--param", "scale=3", "--store", str(tmp_path / "s2"), cwd=work)
    assert proc.returncode == 3 and "> The **base** side failed (compile/warm-up)" in proc.stdout.replace("\\", "")
    assert "failed in warm: ValueError: scale 3.0 is not supported (at tiny.py:11)" in proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "s2").exists()
    # a parameter the scenario does not declare: one line naming it and what is declared
    proc = run_cli(*common, "--param", "nope=1", "--store", str(tmp_path / "s3"), cwd=work)
    assert proc.returncode == 3
    assert "--param nope: scenario 'tiny' declares no such parameter (it declares: scale)" in proc.stderr


def test_the_comment_names_each_sides_parameters_where_they_differ() -> None:
    from reportgen.ab.report import _params_text

    assert _params_text({}, {}) == ""
    assert _params_text({"eps": "1e-05", "dim": "-1"}, {"dim": "-1", "eps": "1e-05"}) == "dim=-1, eps=1e-05"
    assert _params_text({"eps": "1e-05"}, {"eps": "1e-06"}) == "base eps=1e-05; head eps=1e-06"
    assert _params_text({}, {"eps": "1e-06"}) == "eps=1e-06"  # a side that failed before warming reports none
