"""Arguments that were accepted but should not be: each refused in one line naming the flag, before any work.

Duplicates (``--variants naive,naive``, a sweep shape given twice), empty or hidden values (``--scenario ''``, a
newline inside ``--sweep``), sizes past a stated bound (``--shape`` over 8 dimensions, ``latest~N`` over 9
digits, ``doctor --timeout-s`` not finite or over a week), and a run name that reads as an option.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import synthetic_run, write_synthetic
from hostile import one_error, snapshot

from reportgen.cli import main
from reportgen.scenario.loader import MAX_DIMS

RUN_A = "20261130T000000Z-cpu-test-abc123"


PROFILE_CASES = {
    "a variant named twice": (("--variants", "naive,naive"),
                              "--variants 'naive,naive': 'naive' is named twice; name each variant once"),
    "an empty scenario": (("--scenario", ""), "--scenario '': use a name from "),
    "a newline inside the sweep": (("--sweep", "4,64\n8,64"),
                                   "--sweep '4,64\\n8,64': has the control character '\\n'; separate shapes with ';'"),
    "a sweep shape given eight times": (("--sweep", ";".join(["4,64"] * 8)),
                                        "--sweep: shape 4,64 is given more than once; give each shape once"),
    "an empty dtype": (("--dtype", ""), "--dtype '': choose one of float32, bfloat16, float16"),
    "a variant with a trailing newline": (("--variants", "naive\n"), "--variants 'naive\\n': unknown ['naive\\n']"),
    "a shape of 40 dimensions": (("--shape", ",".join(["2"] * 40)),
                                 f"--shape '2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,...': more than {MAX_DIMS} dimensions; "
                                 f"give at most {MAX_DIMS}"),
}


@pytest.mark.parametrize("case", list(PROFILE_CASES))
def test_profile_arguments_are_refused_before_profiling(case: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    extra, message = PROFILE_CASES[case]
    store = tmp_path / "store"
    code = main(["profile", "--device", "cpu", "--quiet", "--samples", "2", "--store", str(store), *extra])
    assert code == 2
    assert one_error(capsys).startswith(message)
    assert not store.exists()


def test_a_shape_of_eight_dimensions_is_still_taken() -> None:
    from reportgen.scenario.loader import parse_shape

    assert parse_shape(",".join(["2"] * MAX_DIMS)) == (2,) * MAX_DIMS


@pytest.mark.parametrize(("ref", "message"), [
    ("-h", "'-h': a run name cannot start with '-' (it reads as an option); write a folder as ./NAME"),
    ("latest~" + "9" * 5000, "'latest~9999999999999…': N in latest~N has more than 9 digits; no store has that many "
     "runs"),
])
def test_a_run_reference_that_is_an_option_or_an_absurd_count_is_refused(
        ref: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run(run_id=RUN_A))
    before = snapshot(store)
    assert main(["compare", "--store", str(store), "--", ref, "latest"]) == 3
    assert one_error(capsys) == message
    assert main(["rm", "--store", str(store), "--reason", "x", "--", ref]) == 3
    assert one_error(capsys) == message
    assert snapshot(store) == before


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-5", "0", "604801"])
def test_doctor_timeout_must_be_finite_positive_and_at_most_a_week(value: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "doctor"
    assert main(["doctor", "--device", "neuron", "--out", str(out), "--timeout-s", value]) == 2
    shown = f"{float(value):g}"
    assert one_error(capsys) == f"--timeout-s {shown}: expected seconds above 0 and at most 604800"
    assert not out.exists()


@pytest.mark.parametrize("argv", [["runs", "--store", ""], ["runs", "--store", "  "], ["rm", "x", "--reason", "r",
                                                                                        "--store", ""]])
def test_an_empty_store_is_refused_not_read_as_the_current_folder(argv: list[str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").mkdir()
    before = snapshot(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--store is empty (it would mean the current folder)" in err, err
    assert snapshot(tmp_path) == before
