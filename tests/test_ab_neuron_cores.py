"""ab on Trainium: each worker takes its own NeuronCore, since the runtime reserves every core it initialises for
the process that initialised it; too few cores is a refusal naming what to set."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import NEURON_CAPTURES_DIR

from reportgen.ab import process
from reportgen.ab.command import with_neuron_cores
from reportgen.ab.settings import AbSettings
from reportgen.devices.neuron import hardware
from reportgen.devices.neuron.cores import ab_core_pair, parse_core_list
from reportgen.errors import DeviceUnavailable, ExitCode, UsageError
from reportgen.model.run import SessionOrder


def _real_ls(name: str) -> hardware.NeuronLs:
    return hardware.parse_neuron_ls((NEURON_CAPTURES_DIR / name).read_bytes())


@pytest.mark.parametrize(("text", "cores"), [("3", (3,)), ("1-3", (1, 2, 3)), ("0,2-3", (0, 2, 3)),
                                             (" 4 - 5 ", (4, 5)), ("1,1,0", (0, 1))])
def test_visible_cores_are_read_as_the_runtime_documents_them(text: str, cores: tuple[int, ...]) -> None:
    assert parse_core_list(text) == cores


@pytest.mark.parametrize("text", ["3-1", "a", "0-", "-1", "1;2", "99999", "0-99999999", "١"])
def test_a_malformed_visible_cores_value_is_refused_naming_the_variable(text: str) -> None:
    with pytest.raises(UsageError, match=r"\$NEURON_RT_VISIBLE_CORES="):
        parse_core_list(text)


def test_the_two_sides_take_the_first_two_visible_cores() -> None:
    assert ab_core_pair({"NEURON_RT_VISIBLE_CORES": "4-7"}, cores_total=1) == (4, 5)  # the variable wins


def test_a_real_trn2_gives_the_workers_cores_0_and_1() -> None:
    ls = _real_ls("neuron-ls-j.trn2.3xlarge.json")  # 4 logical NeuronCores at LNC 2
    settings = with_neuron_cores(AbSettings(device="neuron"), {}, lambda: ls)
    assert settings.neuron_cores == (0, 1)


@pytest.mark.parametrize(("environ", "total", "says"), [
    ({"NEURON_RT_VISIBLE_CORES": "3"}, 8, "NEURON_RT_VISIBLE_CORES=3 gives one"),
    ({}, 1, "this machine reports 1"),
    ({}, None, "neither neuron-ls nor neuron-monitor reported"),
])
def test_fewer_than_two_cores_is_a_refusal_naming_the_fix(environ: dict[str, str], total: int | None,
                                                          says: str) -> None:
    with pytest.raises(DeviceUnavailable) as caught:
        ab_core_pair(environ, total)
    assert caught.value.exit_code == ExitCode.DEVICE_UNAVAILABLE
    assert says in caught.value.message and "two NeuronCores, one per side" in caught.value.message


def test_sides_swap_cores_every_session_and_never_share_one() -> None:
    settings = AbSettings(neuron_cores=(4, 5))
    environ = {"PATH": "/bin", "NEURON_RT_NUM_CORES": "8", "NEURON_RT_VISIBLE_CORES": "4-5"}
    seen = []
    for session in range(4):
        envs = {side: process.worker_environment(settings, environ, side, session) for side in ("base", "head")}
        cores = {side: env["NEURON_RT_VISIBLE_CORES"] for side, env in envs.items() if env is not None}
        assert sorted(cores.values()) == ["4", "5"]  # disjoint in every session
        assert all(env is not None and "NEURON_RT_NUM_CORES" not in env and env["PATH"] == "/bin"
                   for env in envs.values())
        seen.append(cores["base"])
    assert seen == ["4", "5", "4", "5"]  # base alternates, so a difference between the cores cancels
    assert environ["NEURON_RT_VISIBLE_CORES"] == "4-5"  # the caller's mapping untouched


def test_the_spawner_starts_each_session_with_that_sessions_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, str]] = []

    class Recorder:
        def __init__(self, side: str, env: dict[str, str] | None = None) -> None:
            started.append((side, (env or {}).get("NEURON_RT_VISIBLE_CORES", "")))

    monkeypatch.setattr(process, "ProcessWorker", Recorder)
    spawner = process.PairSpawner(AbSettings(neuron_cores=(0, 1)), {})
    spawner(SessionOrder(0, "base", "head"))
    spawner(SessionOrder(1, "head", "head"))
    assert started == [("base", "0"), ("head", "1"), ("head", "0"), ("base", "1")]  # in the order's spawn order


def test_no_neuron_device_leaves_auto_and_cpu_settings_unchanged() -> None:
    nothing = hardware.parse_neuron_ls(b"[]")
    assert with_neuron_cores(AbSettings(device="auto"), {}, lambda: nothing).neuron_cores is None
    assert with_neuron_cores(AbSettings(device="cpu"), {"NEURON_RT_VISIBLE_CORES": "3"},
                             lambda: nothing).neuron_cores is None


def test_the_method_names_the_cores_the_comment_and_stored_runs_show() -> None:
    from reportgen.ab.settings import method_text

    text = method_text(2, 0, neuron_cores=(4, 5))
    assert "each worker on its own NeuronCore (NEURON_RT_VISIBLE_CORES 4 and 5)" in text
    assert "swapping cores every session" in text
    assert "NeuronCore" not in method_text(2, 0)


def test_ab_on_neuron_with_one_visible_core_exits_5_with_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    for side in ("base", "head"):
        (tmp_path / side / "scenarios").mkdir(parents=True)
        (tmp_path / side / "scenarios" / "s.py").write_text("x = 1\n")
    env = {**os.environ, "NEURON_RT_VISIBLE_CORES": "3"}
    proc = subprocess.run([sys.executable, "-m", "reportgen", "ab", "--base", str(tmp_path / "base"), "--head",
                           str(tmp_path / "head"), "--scenario", "s", "--device", "neuron",
                           "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == ExitCode.DEVICE_UNAVAILABLE, proc.stderr
    assert proc.stderr.count("\n") == 1 and "NEURON_RT_VISIBLE_CORES=3 gives one" in proc.stderr
    assert not (tmp_path / "store").exists()
