"""The one reader of JSON and TOML, and the config's values: every document reportgen reads (a config file,
``run.json``, ``withdrawn.json``, ``manifest.json``) within limits of size, depth and digits, decoding errors named,
and every config value checked for its type and for control characters, echoed clipped.

Each case here was an internal error (exit 70), a RecursionError, or a value silently accepted before the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, write_synthetic
from hostile import one_error, snapshot, write_trace

from reportgen.cli import main
from reportgen.errors import ReportgenError
from reportgen.store.layout import RUN_FILE
from reportgen.text.documents import Limits, load_json, load_toml
from reportgen.traces.reader import read_trace_bytes

RUN_A = "20261130T000000Z-cpu-test-abc123"
RUN_B = "20261201T000000Z-cpu-test-bbb222"

HOSTILE_BYTES = {
    "UTF-16 with a byte-order mark": ("\ufeff" + '{"a": 1}').encode("utf-16-le"),
    "UTF-8 with a byte-order mark": b"\xef\xbb\xbf{}",
    "Latin-1 bytes": b'{"a": "caf\xe9"}',
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "nested 200 deep": b"[" * 200 + b"]" * 200,
    "a 5,000-digit integer": b'{"a": ' + b"9" * 5000 + b"}",
}
EXPECTED = {
    "UTF-16 with a byte-order mark": "starts with a UTF-16 byte-order mark: not UTF-8",
    "UTF-8 with a byte-order mark": "starts with a byte-order mark",
    "Latin-1 bytes": "not UTF-8 (byte 10)",
    "nested 100,000 deep": "nested deeper than",
    "nested 200 deep": "nested deeper than",
    "a 5,000-digit integer": "a number with more than 1000 digits",
}
TOML_BYTES = {
    "UTF-16 with a byte-order mark": ("\ufeff" + 'machine = "a"\n').encode("utf-16-le"),
    "UTF-8 with a byte-order mark": b'\xef\xbb\xbfmachine = "a"\n',
    "Latin-1 bytes": b'machine = "caf\xe9"\n',
    "nested 100,000 deep": b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "nested 200 deep": b"x = " + b"[" * 200 + b"]" * 200 + b"\n",
    "a 5,000-digit integer": b"threshold = " + b"9" * 5000 + b"\n",
}
TOML_EXPECTED = {**EXPECTED, "Latin-1 bytes": "not UTF-8 (byte 14)"}


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run(run_id=RUN_A))
    write_synthetic(store, synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z"))
    return store


# --- the reader itself, on every kind of document ------------------------------------------------------


@pytest.mark.parametrize("case", list(HOSTILE_BYTES))
def test_json_documents_are_read_within_limits_or_refused_naming_the_file(case: str) -> None:
    with pytest.raises(ReportgenError) as info:
        load_json(HOSTILE_BYTES[case], "x/doc.json", Limits(max_bytes=10**7), fix="restore it")
    assert str(info.value).startswith("x/doc.json: ") and EXPECTED[case] in str(info.value)
    assert str(info.value).endswith("restore it")


@pytest.mark.parametrize("case", list(TOML_BYTES))
def test_toml_documents_are_read_within_limits_or_refused_naming_the_file(case: str) -> None:
    with pytest.raises(ReportgenError) as info:
        load_toml(TOML_BYTES[case], "x/reportgen.toml", Limits(max_bytes=10**7, max_depth=16), fix="fix it")
    assert str(info.value).startswith("x/reportgen.toml: ") and TOML_EXPECTED[case] in str(info.value)


def test_a_document_larger_than_its_limit_is_refused_before_parsing() -> None:
    with pytest.raises(ReportgenError, match=r"^d.json: larger than 100 bytes; fix it$"):
        load_json(b"[" + b"1," * 100 + b"1]", "d.json", Limits(max_bytes=100), fix="fix it")


def _write_withdrawn(store: Path, raw: bytes) -> Path:
    (store / "withdrawn.json").write_bytes(raw)
    return store / "withdrawn.json"


def _write_run_json(store: Path, raw: bytes) -> Path:
    (store / RUN_B / RUN_FILE).write_bytes(raw)
    return store / RUN_B / RUN_FILE


@pytest.mark.parametrize("case", ["UTF-16 with a byte-order mark", "Latin-1 bytes", "nested 100,000 deep",
                                  "a 5,000-digit integer"])
@pytest.mark.parametrize("kind", ["withdrawn.json", "run.json", "manifest.json"])
def test_store_and_site_documents_go_through_the_one_reader(kind: str, case: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    site = tmp_path / "site"
    if kind == "manifest.json":
        assert main(["build", "--runs", str(store), "--out", str(site)]) == 0
        (site / "manifest.json").write_bytes(HOSTILE_BYTES[case])
        path, argv = site / "manifest.json", ["build", "--runs", str(store), "--out", str(site)]
    elif kind == "withdrawn.json":
        path, argv = _write_withdrawn(store, HOSTILE_BYTES[case]), ["runs", "--store", str(store)]
    else:
        path, argv = _write_run_json(store, HOSTILE_BYTES[case]), ["compare", RUN_A, RUN_B, "--store", str(store)]
    capsys.readouterr()
    before = snapshot(store, site)
    assert main(argv) == 3
    message = one_error(capsys)
    assert message.startswith(f"{path}: ") and EXPECTED[case] in message
    assert snapshot(store, site) == before


# --- the config file ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(TOML_BYTES))
def test_a_config_file_is_read_within_limits_or_refused_naming_it(case: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "reportgen.toml").write_bytes(TOML_BYTES[case])
    monkeypatch.chdir(tmp_path)
    assert main(["config"]) == 3
    message = one_error(capsys)
    assert message.startswith(f"{tmp_path / 'reportgen.toml'}: ") and TOML_EXPECTED[case] in message


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_an_unreadable_pyproject_of_another_project_in_a_parent_folder_is_skipped(
        encoding: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It has no [tool.reportgen] (the word is nowhere in its bytes, in UTF-8 or UTF-16): not ours to refuse."""
    (tmp_path / "pyproject.toml").write_bytes('[project]\nname = "café"\n'.encode(encoding))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["config"]) == 0
    assert "config file: (none found" in capsys.readouterr().out


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_an_unreadable_pyproject_that_may_hold_reportgens_table_is_refused(
        encoding: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_bytes('[tool.reportgen]\nmachine = "café"\n'.encode(encoding))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["config"]) == 3
    assert one_error(capsys).startswith(f"{tmp_path / 'pyproject.toml'}: ")


CONFIG_VALUES = {
    "machine with a trailing newline": ('machine = "ci-box\\n"\n', "machine 'ci-box\\n': has the control character"),
    "baseline with a trailing newline": ('baseline = "naive\\n"\n', "baseline 'naive\\n': has the control character"),
    "param with a trailing newline": ('[params]\neps = "1e-5\\n"\n', "params.eps '1e-5\\n': has the control character"),
    "store with a NUL": ('store = "res\\u0000ults"\n', "store 'res\\x00ults': has the control character"),
    "sweep with a newline": ('sweep = ["1,4096\\n64,4096"]\n', "sweep '1,4096\\n64,4096': has the control character"),
    "machine as a number": ("machine = 5.5\n", "machine 5.5: expected a machine name"),
    "baseline as a list": ('baseline = ["naive"]\n', "baseline ['naive']: expected the name of a variant"),
}


@pytest.mark.parametrize("case", list(CONFIG_VALUES))
def test_a_config_value_of_the_wrong_type_or_with_a_control_character_is_refused(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = CONFIG_VALUES[case]
    (tmp_path / "reportgen.toml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["config"]) == 3
    assert one_error(capsys) == f"{tmp_path / 'reportgen.toml'}: " + expected + _rest(expected)


def _rest(expected: str) -> str:
    if "control character" in expected:
        return " '\\x00'; remove it" if "\\x00" in expected else " '\\n'; remove it"
    if "machine name" in expected:
        return " of letters, digits, '.', '_' or '-' (e.g. \"ci-cpu\")"
    return ", e.g. \"naive\""


def test_a_machine_from_the_environment_with_a_trailing_newline_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REPORTGEN_MACHINE", "ci-box\n")
    assert main(["config"]) == 3
    assert one_error(capsys) == "$REPORTGEN_MACHINE 'ci-box\\n': has the control character '\\n'; remove it"


def test_a_huge_config_value_is_clipped_in_the_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "reportgen.toml").write_text(f'machine = "{"x" * 10_000_000}"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["config"]) == 3
    message = one_error(capsys)
    assert len(message) < 400 and "machine 'xxxx" in message and "\u2026'" in message


# --- run.json fields and traces -------------------------------------------------------------------------


@pytest.mark.parametrize("created", ["2026-13-45T25:61:61Z", "0000-00-00T00:00:00Z", "2023-02-29T00:00:00Z"])
def test_a_run_whose_created_utc_is_no_real_time_is_refused_naming_the_field(
        created: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    data = json.loads((store / RUN_B / RUN_FILE).read_text())
    data["created_utc"] = created
    path = _write_run_json(store, json.dumps(data).encode())
    before = snapshot(store)
    assert main(["compare", RUN_A, RUN_B, "--store", str(store)]) == 3
    assert one_error(capsys) == (f"{path}: field 'created_utc' {created!r} is not a UTC time like "
                                  "2026-11-30T04:55:00Z")
    assert snapshot(store) == before


def test_trace_input_dims_nested_deeper_than_a_shape_are_not_kept(tmp_path: Path) -> None:
    trace = chrome_trace()
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[0].setdefault("args", {})["Input Dims"] = json.loads("[" * 900 + "]" * 900)
    ops[1].setdefault("args", {})["Input Dims"] = [[4, 8], []]
    path = write_trace(tmp_path / "t.json", trace)
    parsed = read_trace_bytes(path.read_bytes(), str(path))
    shapes = parsed.input_shapes
    assert ops[0]["name"] not in shapes
    assert shapes[ops[1]["name"]] == "[[4, 8], []]"
