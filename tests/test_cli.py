"""The CLI edge: help everywhere, version, one-line errors with documented exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from reportgen import __version__
from reportgen.cli import build_parser, main

COMMANDS = ["profile", "runs", "build", "compare", "publish", "import", "ab", "doctor", "machine", "rm", "scenarios", "config",
            "init", "history"]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"reportgen {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert f"usage: reportgen {command}" in capsys.readouterr().out


def test_parser_knows_exactly_the_documented_commands() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["profile", "--shape", "4,x"], 2, "shape '4,x': expected comma-separated positive integers"),
        (["profile", "--shape", "4,0"], 2, "shape '4,0': every dimension must be a positive integer"),
        (["profile", "--dtype", "int8"], 2, "--dtype 'int8': choose one of float32, bfloat16, float16"),
        (["profile", "--variants", "naive,turbo"], 2, "--variants 'naive,turbo': unknown ['turbo']"),
        (["profile", "--scenario", "nosuch"], 2, "nosuch.py: no such scenario file; known scenarios: layernorm, rmsnorm"),
        (["profile", "--scenario", "../etc"], 2, "--scenario '../etc': use a name from"),
        (["profile", "--samples", "1"], 2, "--samples 1: must be at least 2"),
        (["profile", "--device", "tpu"], 2, "argument --device: invalid choice: 'tpu'"),
        (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_code(argv: list[str], code: int, message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("reportgen: error: ")
    assert message in err


def test_runs_on_empty_and_corrupt_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--store", str(tmp_path / "none")]) == 0
    assert "no runs in" in capsys.readouterr().out
    bad = tmp_path / "store" / "r1"
    bad.mkdir(parents=True)
    (bad / "run.json").write_text('{"schema_version": 7}')
    assert main(["runs", "--store", str(tmp_path / "store")]) == 3
    err = capsys.readouterr().err
    assert "run.json: field 'schema_version' is 7, newer than this reportgen reads (6); upgrade reportgen" in err


def test_neuron_without_torch_neuronx_is_one_line_exit_5(tmp_path: Path) -> None:
    proc = run_cli("profile", "--device", "neuron", "--store", str(tmp_path))
    assert proc.returncode == 5
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("reportgen: error: --device neuron: torch_neuronx cannot be imported")
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_cuda_without_gpu_is_one_line_exit_5(tmp_path: Path) -> None:
    proc = run_cli("profile", "--device", "cuda", "--store", str(tmp_path))
    assert proc.returncode == 5
    assert proc.stderr.strip() == ("reportgen: error: --device cuda: torch.cuda.is_available() is False here; "
                                   "use the cpu device or a machine with an NVIDIA GPU and a CUDA build of torch")


# --- terminal escapes from data are shown, never executed (issue 12, item 9) ------------------------------------

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil"
"""An OSC retitle ended by BEL, a screen clear, a C1 CSI and a bidi override."""


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"]


def _escape_store(tmp_path: Path) -> Path:
    import dataclasses

    from factories import synthetic_run, variant, write_synthetic

    store = tmp_path / "store"
    names = (f"naive{ESCAPES}", "fused")
    write_synthetic(store, synthetic_run(variants=tuple(variant(n, 100.0) for n in names), label=f"base{ESCAPES}"))
    head = synthetic_run(run_id="20261130T000100Z-cpu-head-def456", created_utc="2026-11-30T00:01:00Z",
                         variants=tuple(variant(n, 300.0) for n in names), label=f"head{ESCAPES}")
    write_synthetic(store, dataclasses.replace(
        head, environment=dataclasses.replace(head.environment, torch_version=f"2.14{ESCAPES}")))
    return store


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_compare_stdout_and_warnings_show_escapes_visibly(fmt: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    store = _escape_store(tmp_path)
    capsys.readouterr()
    assert main(["compare", "latest~1", "latest", "--store", str(store), "--format", fmt]) == 0
    captured = capsys.readouterr()
    assert _raw_controls(captured.out) == [] and _raw_controls(captured.err) == []
    shown = ("\\\\x1b\\]0", "\\\\x9b31m", "\\u202eevil") if fmt == "markdown" else ("\\u001b]0;owned", "\\u009b31m",
                                                                                   "\\u202eevil")
    assert all(s in captured.out for s in shown), shown  # shown, not dropped
    if fmt == "json":
        import json

        doc = json.loads(captured.out)  # the escapes are JSON's own: the data is unchanged
        assert doc["head"]["label"] == f"head{ESCAPES}"


def test_error_messages_show_escapes_visibly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _escape_store(tmp_path)
    capsys.readouterr()
    assert main(["compare", f"nope{ESCAPES}", "latest", "--store", str(store)]) == 3
    err = capsys.readouterr().err
    assert _raw_controls(err) == [] and err.count("\n") == 1
    assert "nope\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202eevil" in err


def test_profile_summary_shows_escapes_visibly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    from factories import synthetic_run, variant

    from reportgen.model.run import VariantStatus
    from reportgen.profile.command import _print_summary

    failed = dataclasses.replace(variant(f"broken{ESCAPES}", 1.0, status=VariantStatus.FAILED),
                                 error=f"RuntimeError: {ESCAPES}")
    run = synthetic_run(variants=(variant(f"naive{ESCAPES}", 100.0), variant("fused", 50.0), failed))
    _print_summary(run, tmp_path / f"store{ESCAPES}")
    out = capsys.readouterr().out
    assert _raw_controls(out) == []
    assert out.count("naive\\x1b]0;owned\\x07") == 3  # its row, and "vs <baseline>" on both timed rows
    assert "RuntimeError: \\x1b]0;owned" in out and "store\\x1b]0;owned" in out
