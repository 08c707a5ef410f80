"""Storage faults and input limits: full, read-only or misplaced stores, a scenario that exits, numbers out of range,
FIFOs where files belong.

Each test here failed on the code before the fix: a hang, an "internal error" (exit 70), a silent success
that stored a bundle its own loader rejects, or a leftover folder. Faults that need a full disk or a
read-only folder are injected in-process (the suite runs as root, which ignores chmod).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, write_synthetic
from hostile import one_error, snapshot, stray_temp_entries, write_trace

from reportgen.cli import main
from reportgen.errors import BundleError, ScenarioError, UsageError
from reportgen.model.run import SCHEMA_VERSION
from reportgen.scenario import loader as scenario_mod
from reportgen.store import writer
from reportgen.store.layout import RUN_FILE
from reportgen.store.loader import load_store, load_store_tolerant
from reportgen.store.runjson import run_to_json
from reportgen.store.writer import STAGING_DIR, temp_owner_tag
from reportgen.traces import staging

RUN_A = "20261130T000000Z-cpu-test-abc123"
RUN_B = "20261201T000000Z-cpu-test-bbb222"
HANG_LIMIT_S = 120.0
"""A command that has not finished after this long is hung (they take well under a second here)."""


def _finishes(fn: Callable[[], object]) -> object:
    """Run ``fn`` on a thread; fail the test (instead of hanging the suite) if it never returns."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_LIMIT_S)
    assert not thread.is_alive(), "hung"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def _left_out(capsys: pytest.CaptureFixture[str], site: Path, run_id: str = RUN_B) -> str:
    """A build with one bad bundle exits 0, names it in one warning line and publishes only the other run."""
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("reportgen: warning: "), err
    assert "internal error" not in err
    suffix = f" (run {run_id} left out of this build)\n"
    assert err.endswith(suffix), err
    runs = json.loads((site / "manifest.json").read_text())["runs"]["run_id"]
    assert runs == [RUN_A]
    return err.removeprefix("reportgen: warning: ").removesuffix(suffix)


def _enospc(path: object) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def _store_with_a(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run(run_id=RUN_A))
    return store


def _bundle_b(store: Path, mutate: Callable[[dict], object] | None = None, text: str | None = None) -> Path:
    if text is None:
        data = json.loads(run_to_json(synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z")))
        if mutate is not None:
            mutate(data)
        text = json.dumps(data)
    (store / RUN_B).mkdir()
    (store / RUN_B / RUN_FILE).write_text(text, encoding="utf-8", errors="surrogatepass")
    return store / RUN_B / RUN_FILE


# ---------------------------------------------------------------------------------------------
# Item 3: a full disk or a read-only folder


def test_import_does_not_hang_when_the_disk_fills_while_the_gzip_copy_closes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.json", chrome_trace())
    store = _store_with_a(tmp_path)
    before = snapshot(store)

    class FullDiskGzip(gzip.GzipFile):
        def close(self) -> None:  # the last compressed block is flushed here: the disk is full by then
            raise _enospc(getattr(self.fileobj, "name", "?"))

    monkeypatch.setattr(staging.gzip, "GzipFile", FullDiskGzip)
    code = _finishes(lambda: main(["import", str(trace), "--store", str(store)]))
    msg = one_error(capsys)
    assert code == 3
    assert msg.startswith(f"{store}/{STAGING_DIR}/.tmp-") and "No space left on device" in msg
    assert snapshot(store) == before


def test_import_into_a_full_store_is_one_line_naming_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.json", chrome_trace())
    store = _store_with_a(tmp_path)
    before = snapshot(store)
    real = writer._write_member

    def full(root: Path, rel: str, content: object) -> None:
        if rel == RUN_FILE:
            raise _enospc(root / rel)
        real(root, rel, content)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_write_member", full)
    assert main(["import", str(trace), "--store", str(store)]) == 3
    msg = one_error(capsys)
    assert msg.startswith(f"{store}/{STAGING_DIR}/.tmp-") and msg.endswith(
        "/run.json: cannot write (No space left on device); free some space or choose another folder")
    assert snapshot(store) == before


def test_import_into_a_read_only_store_is_one_line_naming_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.json", chrome_trace())
    store = _store_with_a(tmp_path)
    before = snapshot(store)

    def read_only(*args: object, **kwargs: object) -> str:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(kwargs.get("dir")))

    monkeypatch.setattr(writer.tempfile, "mkdtemp", read_only)
    assert main(["import", str(trace), "--store", str(store)]) == 3
    assert one_error(capsys) == (f"{store}/{STAGING_DIR}: cannot write (Read-only file system); choose another folder")
    assert snapshot(store) == before  # the staging folder made for the import is removed again


def test_import_into_a_store_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.json", chrome_trace())
    (tmp_path / "store").write_text("mine\n")
    assert main(["import", str(trace), "--store", str(tmp_path / "store")]) == 3
    assert one_error(capsys) == f"{tmp_path}/store: is not a folder; pass --store a results folder"
    assert (tmp_path / "store").read_text() == "mine\n"


# ---------------------------------------------------------------------------------------------
# Profile: a tiny scenario, so that a real profile takes a second or two


SCENARIO_TEMPLATE = '''
import torch
from reportgen.scenario.loader import Scenario, Variant

{pre}

def make_inputs(shape, dtype, seed, device):
    {make}
    return (torch.ones(shape, dtype=dtype, device=device),)

def double(x):
    return x * 2

SCENARIO = Scenario(
    name="tiny", description={description!r}, default_shape=(4, 8), default_dtype="float32",
    make_inputs=make_inputs, reference=lambda x: x.double() * 2,
    variants=({variants}),
    bytes_per_call=lambda shape, itemsize: 2 * shape[0] * shape[1] * itemsize,
    flops_per_call=lambda shape: shape[0] * shape[1],
)
'''


def _scenario(tmp_path: Path, pre: str = "", make: str = "pass", description: str = "tiny",
              variants: str = 'Variant("double", "x*2", double),') -> Path:
    path = tmp_path / "tiny_scenario.py"
    path.write_text(SCENARIO_TEMPLATE.format(pre=pre, make=make, description=description, variants=variants))
    return path


def _profile(scenario: Path, store: Path, *extra: str) -> list[str]:
    return ["profile", "--device", "cpu", "--scenario", str(scenario), "--samples", "2", "--warmup", "0",
            "--quiet", "--store", str(store), *extra]


@pytest.fixture()
def fast_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPORTGEN_PEAK_BANDWIDTH_GBPS", "10")


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_profile_with_a_full_store_keeps_the_measurement_and_says_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fast_peak: None) -> None:
    store = _store_with_a(tmp_path)
    scenario = _scenario(tmp_path)
    system_tmp = tmp_path / "systmp"
    system_tmp.mkdir()
    before = snapshot(store)
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    real = writer._write_member

    def full(root: Path, rel: str, content: object) -> None:
        if root.parent == store / STAGING_DIR:
            raise _enospc(root / rel)
        real(root, rel, content)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_write_member", full)
    assert main(_profile(scenario, store)) == 3
    msg = one_error(capsys)
    assert snapshot(store) == before
    kept = system_tmp / "reportgen-unsaved-runs"
    (run,) = load_store(kept)
    assert [v.name for v in run.variants] == ["double"]
    assert msg.startswith(f"{store}/{STAGING_DIR}/.tmp-") and msg.endswith(
        f"cannot write (No space left on device); the run was saved to {kept / run.run_id} instead: move that "
        "folder into the store when there is room")
    assert stray_temp_entries(system_tmp, store) == []


def test_profile_with_a_read_only_temp_folder_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fast_peak: None) -> None:
    store = _store_with_a(tmp_path)
    scenario = _scenario(tmp_path)
    system_tmp = tmp_path / "systmp"
    system_tmp.mkdir()
    before = snapshot(store)
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))

    def read_only(*args: object, **kwargs: object) -> str:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(kwargs.get("dir")))

    monkeypatch.setattr(writer.tempfile, "mkdtemp", read_only)
    assert main(_profile(scenario, store)) == 3
    assert one_error(capsys) == f"{system_tmp}: cannot write (Read-only file system); choose another folder"
    assert snapshot(store) == before


def test_a_killed_profiles_work_folder_is_removed_by_the_next_profile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fast_peak: None) -> None:
    system_tmp = tmp_path / "systmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    host = temp_owner_tag().rsplit("-p", 1)[0]
    stale = system_tmp / f".tmp-work-{host}-p{_dead_pid()}-profile-abcd"
    (stale / "double").mkdir(parents=True)
    (stale / "double" / "raw.pt.trace.json").write_text("{}")
    live = system_tmp / f".tmp-work-{host}-p1-profile-abcd"  # pid 1 is alive: left alone
    live.mkdir()
    store = tmp_path / "store"
    assert main(_profile(_scenario(tmp_path), store)) == 0
    capsys.readouterr()
    assert sorted(p.name for p in system_tmp.iterdir()) == [live.name]
    assert len(load_store(store)) == 1


@pytest.mark.parametrize(("variants", "description", "message"), [
    ('Variant("a\\x00b", "x", double),', "tiny", "variant 1: name 'a\\x00b' contains a NUL character"),
    ('Variant("a", "x\\x00y", double),', "tiny", "variant 'a': description contains a NUL character"),
    ('Variant("a", "x", double), Variant("a", "y", double),', "tiny", "variant name 'a' appears twice; "
     "variant names must be unique"),
    ('Variant("a", "x", double),', "nul\x00here", "description contains a NUL character"),
])
def test_profile_refuses_a_scenario_whose_run_could_not_be_loaded(
        variants: str, description: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store_with_a(tmp_path)
    scenario = _scenario(tmp_path, variants=variants, description=description)
    before = snapshot(store)
    assert main(_profile(scenario, store)) == 2
    assert one_error(capsys) == f"{scenario}: {message}; fix the scenario file"
    assert snapshot(store) == before
    assert main(["runs", "--store", str(store)]) == 0


def test_write_bundle_refuses_what_its_loader_would_reject(tmp_path: Path) -> None:
    from dataclasses import replace

    from factories import variant
    run = synthetic_run(variants=(variant("a", 10.0), replace(variant("b", 10.0), description="x\x00y")))
    with pytest.raises(BundleError, match=r"run\.json: field 'variants\[1\]\.description': contains a NUL "
                                          r"character; the run was not stored"):
        writer.write_bundle(tmp_path / "store", run, {})
    assert not (tmp_path / "store").exists() or list((tmp_path / "store").iterdir()) == []


@pytest.mark.parametrize(("pre", "make", "where", "what"), [
    ("import sys\nsys.exit(0)", "pass", 6, "failed to load (SystemExit: 0)"),
    ("", "raise ValueError('bad shape')", 8, "make_inputs raised ValueError: bad shape"),
    ("", "import sys; sys.exit(3)", 8, "make_inputs raised SystemExit: 3"),
])
def test_a_scenario_that_exits_or_raises_is_its_error_with_file_and_line(
        pre: str, make: str, where: int, what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        fast_peak: None) -> None:
    store = tmp_path / "store"
    scenario = _scenario(tmp_path, pre=pre, make=make)
    assert main(_profile(scenario, store)) == 2
    assert one_error(capsys) == f"{scenario}:{where}: {what}; fix the scenario file"
    assert not store.exists()


def test_a_variant_that_calls_sys_exit_fails_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   fast_peak: None) -> None:
    pre = "import sys\ndef leave(x):\n    sys.exit(0)\n"
    scenario = _scenario(tmp_path, pre=pre, variants='Variant("leave", "exits", leave), Variant("double", "x", double),')
    store = tmp_path / "store"
    assert main(_profile(scenario, store)) == 4
    capsys.readouterr()
    (run,) = load_store(store)
    assert [(v.name, v.status.value) for v in run.variants] == [("leave", "failed"), ("double", "ok")]
    assert run.variants[0].error is not None and run.variants[0].error.startswith("SystemExit: 0")


# ---------------------------------------------------------------------------------------------
# Item 5: shape, seed and threads are validated before anything is allocated (messages name no flag)


@pytest.mark.parametrize(("text", "message"), [
    ("", "shape '': expected comma-separated positive integers, e.g. 4,2048,4096"),
    ("9223372036854775808", "shape '9223372036854775808': dimension 9223372036854775808 is larger than "
                            "2147483647; use a smaller shape"),
    ("4,x", "shape '4,x': expected comma-separated positive integers, e.g. 4,2048,4096"),
    ("1" + "0" * 5000, "shape '100000000000000000000000000000...': expected comma-separated positive integers, "
                       "e.g. 4,2048,4096"),
])
def test_parse_shape_refuses_nonsense(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        scenario_mod.parse_shape(text)
    assert info.value.message == message


def test_input_size_is_checked_against_memory_before_allocating() -> None:
    with pytest.raises(ScenarioError) as info:
        scenario_mod.check_input_size((100000, 100000, 100000), "float32", memory_bytes=16 * 1024**3)
    assert info.value.message == ("shape 100000,100000,100000: one float32 input of 1e+15 elements is 4,000,000 GB, "
                                  "more than half of this machine's 17 GB of memory; use a smaller shape")
    scenario_mod.check_input_size((8, 1024, 1024), "float32", memory_bytes=16 * 1024**3)


@pytest.mark.parametrize(("value", "message"), [
    (2**70, "seed 1180591620717411303424: must be between -9223372036854775808 and 18446744073709551615"),
    (-(2**63) - 1, "seed -9223372036854775809: must be between -9223372036854775808 and 18446744073709551615"),
])
def test_seed_out_of_range_is_refused(value: int, message: str) -> None:
    with pytest.raises(UsageError) as info:
        scenario_mod.check_seed(value)
    assert info.value.message == message
    scenario_mod.check_seed(0)
    scenario_mod.check_seed(2**64 - 1)


def test_threads_are_capped() -> None:
    limit = 4 * (os.cpu_count() or 1)
    with pytest.raises(UsageError) as info:
        scenario_mod.check_threads(100000)
    assert info.value.message == (f"threads 100000: at most {limit} (4 per CPU here); use fewer")
    with pytest.raises(UsageError):
        scenario_mod.check_threads(0)
    scenario_mod.check_threads(limit)
    scenario_mod.check_threads(None)


@pytest.mark.parametrize(("extra", "message"), [
    (("--shape", ""), "--shape '': expected comma-separated positive integers, e.g. 4,2048,4096"),
    (("--shape", "100000,100000,100000"), "--shape 100000,100000,100000: one float32 input of 1e+15 elements is "),
    (("--seed", str(2**70)), "--seed 1180591620717411303424: must be between"),
    (("--threads", "100000"), "--threads 100000: at most "),
    (("--shape", "9223372036854775808"), "--shape '9223372036854775808': dimension 9223372036854775808 is larger "),
])
def test_profile_refuses_bad_numbers_in_one_line(extra: tuple[str, ...], message: str, tmp_path: Path, fast_peak: None,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert main(_profile(_scenario(tmp_path), store, *extra)) == 2
    assert one_error(capsys).startswith(message)
    assert not store.exists()


# ---------------------------------------------------------------------------------------------
# Items 4, 5, 12: run.json values the loader used to accept (or crash on)


BAD_RUN_JSON: dict[str, tuple[Callable[[dict], object] | None, str | None, str]] = {
    "400-digit integer in a float field": (
        lambda d: d["variants"][0].update(samples_us=[10**400]), None,
        "field 'variants[0].samples_us[0]': expected a finite number, got 1" + "0" * 36 + "..."),
    "400-digit integer in an int field": (
        lambda d: d["variants"][0]["ops"][0].update(calls=10**400), None,
        "field 'variants[0].ops[0].calls': expected an integer below 2**63, got 1" + "0" * 36 + "..."),
    "1e308 sample": (lambda d: d["variants"][0].update(samples_us=[1e308, 1e308]), None,
                     "field 'variants[0].samples_us': must be at most 1e+18, got 1e+308"),
    "lone surrogate in a parameters key": (
        None, run_to_json(synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z")).replace(
            '"dtype":', '"\\ud800":', 1),
        "field 'scenario.parameters' key '\\ud800': contains a lone surrogate (a \\ud800-\\udfff escape), which is "
        "not text; write the character itself or remove it"),
    "NUL in a parameters key": (lambda d: d["scenario"]["parameters"].update({"a\x00b": "x"}), None,
                                "field 'scenario.parameters' key 'a\\x00b': contains a NUL character"),
    "negative calls": (lambda d: d["variants"][0]["ops"][0].update(calls=-1), None,
                       "field 'variants[0].ops[0].calls': must not be negative, got -1"),
    "negative profiled_steps": (lambda d: d["variants"][0].update(profiled_steps=-2), None,
                                "field 'variants[0].profiled_steps': must not be negative, got -2"),
    "duplicate JSON key": (None, run_to_json(synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z")).replace(
        '"label": "test"', '"label": "test", "label": "other"', 1),
        "key 'label' appears twice in one object; the bundle is corrupt, re-run or re-import it"),
}


@pytest.mark.parametrize("name", list(BAD_RUN_JSON))
def test_bad_run_json_values_are_one_line_and_the_other_runs_still_list(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mutate, text, problem = BAD_RUN_JSON[name]
    store = _store_with_a(tmp_path)
    path = _bundle_b(store, mutate, text)
    site = tmp_path / "site"
    assert main(["build", "--runs", str(store), "--out", str(site)]) == 0
    assert _left_out(capsys, site) == f"{path}: {problem}"
    assert main(["runs", "--store", str(store)]) == 3
    out, err = capsys.readouterr()
    assert err == f"reportgen: error: {path}: {problem}\n"
    assert [line.split("\t")[0] for line in out.splitlines()] == ["run_id", RUN_A]


def test_a_member_path_inside_another_member_file_is_refused(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``traces/a.gz`` and ``traces/a.gz/x.neff`` cannot both be files: build said "internal error" (exit 70)."""
    store = _store_with_a(tmp_path)
    path = _bundle_b(store, lambda d: d["variants"][0].update(
        trace_path="traces/a.gz", artifacts=[{"path": "traces/a.gz/x.neff", "kind": "neff", "size_bytes": 3}]))
    (store / RUN_B / "traces").mkdir()
    (store / RUN_B / "traces" / "a.gz").write_bytes(gzip.compress(json.dumps(chrome_trace()).encode(), mtime=0))
    (tmp_path / "out").mkdir()
    site = tmp_path / "out" / "site"
    before = snapshot(store)
    assert main(["build", "--runs", str(store), "--out", str(site)]) == 0
    assert _left_out(capsys, site) == (f"{path}: field 'variants[0].artifacts[0].path' 'traces/a.gz/x.neff' lies "
                                       "inside 'traces/a.gz', which is a file of the bundle")
    assert snapshot(store) == before


def test_profile_into_a_store_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             fast_peak: None) -> None:
    (tmp_path / "store").write_text("mine\n")
    assert main(_profile(_scenario(tmp_path), tmp_path / "store")) == 3
    assert one_error(capsys) == f"{tmp_path}/store: is not a folder; pass --store a results folder"
    assert (tmp_path / "store").read_text() == "mine\n"


def test_load_store_tolerant_returns_the_good_runs_and_names_the_bad(tmp_path: Path) -> None:
    store = _store_with_a(tmp_path)
    path = _bundle_b(store, lambda d: d.update(schema_version=9))
    runs, problems = load_store_tolerant(store)
    assert [r.run_id for r in runs] == [RUN_A]
    assert [p.message for p in problems] == [f"{path}: field 'schema_version' is 9, newer than this reportgen "
                                             f"reads ({SCHEMA_VERSION}); upgrade reportgen"]
    with pytest.raises(BundleError):
        load_store(store)


# ---------------------------------------------------------------------------------------------
# Traces: numbers that overflow, FIFOs, non-folders


def _event_trace(**fields: object) -> bytes:
    return json.dumps({"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, **fields}]}).encode()


@pytest.mark.parametrize(("data", "message"), [
    (_event_trace(ts=1e308, dur=1e308), "event #1 ('k'): field 'ts' is 1e+308, beyond 1e+18 µs; not a real time"),
    (_event_trace(ts=0, dur=1e308), "event #1 ('k'): field 'dur' is 1e+308, beyond 1e+18 µs; not a real time"),
    (_event_trace(ts=10**400, dur=1), "event #1 ('k'): field 'ts' is 1" + "0" * 26 + "..., beyond 1e+18 µs; "
                                      "not a real time"),
    (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1' + b"0" * 5000 + b', "dur": 1}]}',
     "invalid JSON (an integer of more than 4300 digits) in the value at character 17"),
])
def test_trace_numbers_that_overflow_are_refused_at_import(data: bytes, message: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.json").write_bytes(data)
    store = tmp_path / "store"
    assert main(["import", str(tmp_path / "t.json"), "--store", str(store)]) == 3
    assert one_error(capsys) == f"{tmp_path}/t.json: {message}"
    assert not store.exists()


def test_a_fifo_as_run_json_does_not_hang_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store_with_a(tmp_path)
    (store / RUN_B).mkdir()
    os.mkfifo(store / RUN_B / RUN_FILE)
    code = _finishes(lambda: main(["build", "--runs", str(store), "--out", str(tmp_path / "site")]))
    assert code == 0
    assert _left_out(capsys, tmp_path / "site") == f"{store}/{RUN_B}/run.json: is not a regular file; the bundle is corrupt"


def test_a_fifo_as_a_stored_trace_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store_with_a(tmp_path)
    folder = write_synthetic(store, synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z", with_traces=True))
    (folder / "traces" / "fused.pt.trace.json.gz").unlink()
    os.mkfifo(folder / "traces" / "fused.pt.trace.json.gz")
    (tmp_path / "out").mkdir()
    code = _finishes(lambda: main(["build", "--runs", str(store), "--out", str(tmp_path / "out" / "site")]))
    assert code == 0
    assert _left_out(capsys, tmp_path / "out" / "site") == (f"{folder}/traces/fused.pt.trace.json.gz: is not a regular "
                                                            "file; the bundle is corrupt")


def test_a_fifo_as_a_trace_does_not_hang_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "t.json")
    code = _finishes(lambda: main(["import", str(tmp_path / "t.json"), "--store", str(tmp_path / "store")]))
    assert code == 3
    assert one_error(capsys) == (f"{tmp_path}/t.json: is not a regular file or a folder; pass a trace file "
                                  "(.json, .json.gz) or a profile_output/ folder")
    assert not (tmp_path / "store").exists()


def test_the_trace_reader_refuses_a_fifo(tmp_path: Path) -> None:
    from reportgen.errors import TraceError
    from reportgen.traces.reader import read_trace

    os.mkfifo(tmp_path / "t.json")
    with pytest.raises(TraceError, match="t.json: is not a regular file; pass a trace file"):
        _finishes(lambda: read_trace(tmp_path / "t.json"))
