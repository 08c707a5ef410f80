"""The trace reader: every real trace in tests/data/traces, inline traces for each rule, every bad input."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import REAL_TRACES_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

from reportgen.devices.lanes import Lane
from reportgen.errors import TraceError
from reportgen.traces import reader as trace_mod
from reportgen.traces.events import TraceEvent, is_device_work, lane_of
from reportgen.traces.reader import events_in_window, max_trace_bytes, profiler_steps, read_trace, read_trace_bytes

REAL_TRACES = sorted(REAL_TRACES_DIR.glob("*.json.gz"))
EXPECTED_HINT = {
    "amd_trace.trace.json.gz": "rocm",
    "cpu_only.trace.json.gz": "cpu",
    "critical_path.trace.json.gz": "cuda",
    "cupti_profiler.trace.json.gz": "cuda",
    "triton_example.trace.json.gz": "cuda",
}


def _raw_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _trace(*events: dict, **top: object) -> bytes:
    return json.dumps({"traceEvents": list(events), **top}).encode()


def _x(name: str, ts: float, dur: float, cat: str = "cpu_op", pid: object = 1, tid: object = 1, **args: object
       ) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def test_every_shared_trace_is_there() -> None:
    assert [p.name for p in REAL_TRACES] == sorted(EXPECTED_HINT)


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_real_trace_keeps_every_complete_event(path: Path) -> None:
    raw = [e for e in _raw_events(path) if e.get("ph") == "X"]
    trace = read_trace(path)
    assert len(trace.events) == len(raw)
    assert Counter(e.name for e in trace.events) == Counter(e["name"] for e in raw)
    assert sum(e.duration_us for e in trace.events) == pytest.approx(sum(e["dur"] for e in raw), rel=1e-12)
    assert Counter(e.category for e in trace.events) == Counter(e.get("cat", "") for e in raw)
    keys = [(e.start_us, -e.duration_us) for e in trace.events]
    assert keys == sorted(keys)
    assert trace.device_kind_hint == EXPECTED_HINT[path.name]
    assert trace.has_device_lane == any(lane_of(e.get("cat", "")) is Lane.DEVICE for e in raw)
    assert trace.source == str(path)


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_real_trace_correlations_come_from_args(path: Path) -> None:
    raw = [e for e in _raw_events(path) if e.get("ph") == "X"]
    expected = Counter(e.get("args", {}).get("correlation") for e in raw if "correlation" in e.get("args", {}))
    got = Counter(e.correlation for e in read_trace(path).events if e.correlation is not None)
    assert got == expected


def test_real_trace_lanes_and_top_level_fields() -> None:
    amd = read_trace(REAL_TRACES_DIR / "amd_trace.trace.json.gz")
    assert Counter(e.lane for e in amd.events) == {Lane.FRAMEWORK: 73, Lane.RUNTIME: 21, Lane.DEVICE: 18,
                                                   Lane.OTHER: 1}
    assert amd.base_time_ns == 1735632360000000000
    assert amd.device_names[0] == "AMD Radeon Graphics"
    assert [e.name for e in profiler_steps(amd)] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert sum(is_device_work(e) for e in amd.events) == 16  # 14 kernels + 2 memcpy; not the 2 annotations
    cpu = read_trace(REAL_TRACES_DIR / "cpu_only.trace.json.gz")
    assert not cpu.has_device_lane
    assert (cpu.rank, cpu.world_size) == (34, 300)
    crit = read_trace(REAL_TRACES_DIR / "critical_path.trace.json.gz")
    assert crit.base_time_ns is None


def test_times_are_microseconds_whatever_display_time_unit_says() -> None:
    data = _trace(_x("a", 10.5, 2.25), displayTimeUnit="ns", baseTimeNanoseconds=1_700_000_000_000_000_000)
    trace = read_trace_bytes(data, "t.json")
    assert (trace.events[0].start_us, trace.events[0].duration_us) == (10.5, 2.25)
    assert trace.base_time_ns == 1_700_000_000_000_000_000


def test_begin_end_pairs_nest_per_thread_and_merge_args() -> None:
    data = _trace(
        {"ph": "B", "name": "outer", "cat": "cpu_op", "ts": 0, "pid": 1, "tid": 1},
        {"ph": "B", "name": "inner", "cat": "cpu_op", "ts": 2, "pid": 1, "tid": 1, "args": {"External id": 7}},
        {"ph": "B", "name": "other", "cat": "cpu_op", "ts": 3, "pid": 1, "tid": 2},
        {"ph": "E", "ts": 5, "pid": 1, "tid": 1, "args": {"correlation": 9}},
        {"ph": "E", "ts": 6, "pid": 1, "tid": 2},
        {"ph": "E", "ts": 10, "pid": 1, "tid": 1},
    )
    events = read_trace_bytes(data, "t.json").events
    assert [(e.name, e.start_us, e.duration_us, e.tid, e.correlation, e.external_id) for e in events] == [
        ("outer", 0.0, 10.0, "1", None, None),
        ("inner", 2.0, 3.0, "1", 9, 7),
        ("other", 3.0, 3.0, "2", None, None),
    ]


def test_flow_events_supply_missing_correlation_ids() -> None:
    data = _trace(
        _x("op", 0, 10),
        _x("launch", 1, 2, cat="cuda_runtime"),
        _x("kern", 5, 3, cat="kernel", pid=0, tid=7),
        {"ph": "s", "id": 42, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 1},
        {"ph": "f", "id": 42, "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 7, "ts": 5, "bp": "e"},
        {"ph": "s", "id": 43, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 0},
    )
    events = {e.name: e for e in read_trace_bytes(data, "t.json").events}
    assert (events["launch"].correlation, events["kern"].correlation, events["op"].correlation) == (42, 42, None)


def test_bare_array_format_and_metadata_and_instants() -> None:
    data = json.dumps([
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 3, "args": {"name": "main"}},
        {"ph": "i", "name": "mark", "ts": 4, "pid": 1, "tid": 3, "s": "t"},
        _x("a", 1, 1, tid=3),
    ]).encode()
    trace = read_trace_bytes(data, "t.json")
    assert [e.name for e in trace.events] == ["a"]
    assert trace.device_kind_hint == "cpu"


def test_gzip_and_plain_give_the_same_trace(tmp_path: Path) -> None:
    data = _trace(_x("a", 1, 2), _x("b", 1.5, 0.5))
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    assert read_trace(plain).events == read_trace(packed).events
    assert read_trace_bytes(gzip.compress(data), "x").events == read_trace(plain).events


@settings(max_examples=40, deadline=None)
@given(chunk=st.integers(min_value=1, max_value=97))
def test_chunk_boundaries_never_change_the_result(chunk: int) -> None:
    data = (REAL_TRACES_DIR / "triton_example.trace.json.gz").read_bytes()
    whole = read_trace_bytes(data, "t")
    old = trace_mod.CHUNK_BYTES
    trace_mod.CHUNK_BYTES = chunk
    try:
        split = read_trace_bytes(data, "t")
    finally:
        trace_mod.CHUNK_BYTES = old
    assert split == whole
    assert split.base_time_ns == 1727743122000000000


def test_multibyte_utf8_names_survive_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_mod, "CHUNK_BYTES", 3)
    data = "\ufeff".encode() + _trace(_x("µs→é 🙂", 1, 2), _x("\\u00e9", 2, 1))
    assert [e.name for e in read_trace_bytes(data, "t").events] == ["µs→é 🙂", "\\u00e9"]


def test_lane_classification() -> None:
    assert [lane_of(c) for c in ("cpu_op", "User_Annotation", "python_function", "Operator")] == [Lane.FRAMEWORK] * 4
    assert [lane_of(c) for c in ("cuda_runtime", "cuda_driver", "privateuse1_runtime", "Runtime")] == [
        Lane.RUNTIME] * 4
    assert [lane_of(c) for c in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "Kernel")] == [
        Lane.DEVICE] * 5
    assert [lane_of(c) for c in ("Trace", "", "ac2g", "overhead")] == [Lane.OTHER] * 4


def test_events_in_window_keeps_overlaps() -> None:
    trace = read_trace_bytes(_trace(_x("long", 0, 100), _x("before", 1, 2), _x("inside", 20, 5),
                                    _x("edge", 30, 0), _x("after", 30, 4)), "t")
    assert [e.name for e in events_in_window(trace, 10, 30)] == ["long", "inside"]
    assert [e.name for e in events_in_window(trace, 30, 31)] == ["long", "after", "edge"]


def test_event_end() -> None:
    assert TraceEvent("a", "cpu_op", Lane.FRAMEWORK, 1.5, 2.0, "1", "1", None, None).end_us == 3.5


def test_max_trace_bytes_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPORTGEN_MAX_TRACE_BYTES", raising=False)
    assert max_trace_bytes() == 2 * 1024**3
    monkeypatch.setenv("REPORTGEN_MAX_TRACE_BYTES", "1000")
    assert max_trace_bytes() == 1000
    monkeypatch.setenv("REPORTGEN_MAX_TRACE_BYTES", "lots")
    with pytest.raises(TraceError, match=r"^environment variable REPORTGEN_MAX_TRACE_BYTES='lots' is not a positive"):
        max_trace_bytes()


GOOD = _trace(_x("a", 1, 2))
BAD_INPUTS = {
    "truncated gzip": (gzip.compress(GOOD * 20, mtime=0)[:40],
                       "f: gzip data is truncated (the file ends before the gzip end marker); copy the file again"),
    "corrupt gzip": (gzip.compress(GOOD, mtime=0)[:10] + b"\xff" * 30,
                     "f: corrupt gzip data (Error -3 while decompressing data: invalid block type); "
                     "copy the file again"),
    "invalid json": (b'{"traceEvents": [{"ph": "X",, }]}',
                     "f: invalid or truncated JSON (Expecting property name enclosed in double quotes) "
                     "at character 28"),
    "truncated json": (GOOD[:-5], f"f: invalid or truncated JSON (Expecting value) at character {len(GOOD) - 5}"),
    "not a trace": (b'{"a": 1}', "f: has no 'traceEvents' list; this JSON is not a Chrome/Kineto trace"),
    "scalar": (b"42", "f: does not start with '{' or '['; expected a Chrome/Kineto trace (a JSON object with "
               "'traceEvents')"),
    "events not a list": (b'{"traceEvents": {}}', "f: field 'traceEvents' is not a list; this is not a Chrome/Kineto "
                          "trace"),
    "empty": (b"", "f: is empty; expected a Chrome trace (a JSON object with 'traceEvents')"),
    "extra data": (GOOD + b" x", f"f: has extra data after the JSON value at character {len(GOOD) + 1}"),
    "negative dur": (_trace(_x("a", 1, -2)),
                     "f: event #1 ('a'): field 'dur' is negative (-2.0); durations must be >= 0"),
    "missing dur": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1}]}',
                    "f: event #1 ('k'): field 'dur' is missing"),
    "missing ts": (b'{"traceEvents": [{"ph": "X", "name": "k", "dur": 1}]}',
                   "f: event #1 ('k'): field 'ts' is missing"),
    "nan dur": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": NaN}]}',
                "f: event #1 ('k'): field 'dur' is nan, expected a finite number"),
    "string ts": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": "1", "dur": 1}]}',
                  "f: event #1 ('k'): field 'ts' is '1', expected a number of microseconds"),
    "no phase": (b'{"traceEvents": [{"name": "k"}]}',
                 "f: event #1 ('k'): field 'ph' is missing; every Chrome trace event has a phase"),
    "event not object": (b'{"traceEvents": [{"ph": "i", "ts": 0}, 3]}',
                         "f: event #2: is int, not an object; this is not a Chrome trace event"),
    "unclosed B": (b'{"traceEvents": [{"ph": "B", "name": "op", "ts": 5, "pid": 1, "tid": 2}]}',
                   "f: 'B' event 'op' at ts 5.0 on pid 1 tid 2 is never closed by an 'E' event; "
                   "the trace is truncated"),
    "E without B": (b'{"traceEvents": [{"ph": "E", "ts": 5, "pid": 1, "tid": 2}]}',
                    "f: event #1: 'E' event on pid 1 tid 2 has no matching 'B' event"),
    "E before B": (b'{"traceEvents": [{"ph": "B", "name": "op", "ts": 5, "pid": 1, "tid": 2},'
                   b'{"ph": "E", "ts": 4, "pid": 1, "tid": 2}]}',
                   "f: event #2: 'E' event ends before its 'B' event began (negative duration -1.0)"),
    "not utf-8": (b'{"traceEvents": [{"ph": "X", "name": "\xff", "ts": 1, "dur": 2}]}',
                  "f: not UTF-8 text (bad byte near offset 38); a trace must be UTF-8 JSON"),
    "deeply nested": (b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
                      "f: JSON nested too deeply; this is not a trace"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_trace_error(case: str) -> None:
    data, message = BAD_INPUTS[case]
    with pytest.raises(TraceError) as info:
        read_trace_bytes(data, "f")
    assert info.value.message == message
    assert "\n" not in info.value.message


def test_gzip_bomb_is_refused_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * 5_000_000 + b"]}"))
    assert len(path.read_bytes()) < 10_000
    with pytest.raises(TraceError) as info:
        read_trace(path, max_uncompressed_bytes=1_000_000)
    assert info.value.message == (f"{path}: expands past 1000000 bytes uncompressed; refusing it (raise the limit "
                                  "with REPORTGEN_MAX_TRACE_BYTES if the trace is genuine)")
    assert len(read_trace(path, max_uncompressed_bytes=6_000_000).events) == 0


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"^.*nope\.json: no such file$"):
        read_trace(tmp_path / "nope.json")
    with pytest.raises(TraceError, match=r"is a folder; pass a trace file \(\.json or \.json\.gz\)$"):
        read_trace(tmp_path)


def test_an_invalid_event_deep_in_a_big_trace_fails_without_reading_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_mod, "CHUNK_BYTES", 64)
    good = [_x(f"op{i}", i, 1) for i in range(50)]
    text = json.dumps({"traceEvents": good})
    broken = text.replace('"op25", ', '"op25" ', 1)
    at = broken.index('"op25" ') + len('"op25" ')
    with pytest.raises(TraceError) as info:
        read_trace_bytes(broken.encode(), "f")
    assert info.value.message == f"f: invalid or truncated JSON (Expecting ',' delimiter) at character {at}"
