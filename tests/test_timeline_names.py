"""Timeline row labels from Kineto's thread_name / process_name metadata."""

from __future__ import annotations

import json

from factories import chrome_trace

from reportgen.analysis.timeline import TrackNames, timeline_layout
from reportgen.traces.reader import read_trace_bytes


def _with_names(names: list[dict]) -> bytes:
    trace = chrome_trace()
    trace["traceEvents"] = names + trace["traceEvents"]
    return json.dumps(trace).encode()


def test_timeline_rows_take_kinetos_thread_and_process_names() -> None:
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (reportgen)"}},
            {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 1, "args": {"sort_index": 1}}]
    tr = read_trace_bytes(_with_names(meta), "t.json")
    assert tr.thread_names == {("1", "1"): "thread 1 (reportgen)"} and tr.process_names == {"1": "python"}
    layout = timeline_layout(tr.events, 1000.0, 1100.0, "ProfilerStep#0", TrackNames(tr.thread_names, tr.process_names))
    assert [t.title for t in layout.tracks] == ["framework ops · thread 1 (reportgen)"]
    plain = timeline_layout(tr.events, 1000.0, 1100.0, "ProfilerStep#0")
    assert [t.title for t in plain.tracks] == ["framework ops · thread 1"]  # no metadata: as before


def test_a_thread_name_without_its_id_is_added_and_a_process_name_only_across_processes() -> None:
    names = TrackNames({("7", "3"): "pt_autograd_0"}, {"7": "GPU 0"})
    assert names.titled("framework ops · thread 3", "7", "3", pids=1) == "framework ops · thread 3 (pt_autograd_0)"
    assert names.titled("device 7 · stream 3", "7", "3", pids=2) == "device 7 · stream 3 (pt_autograd_0) · GPU 0"
    hostile = TrackNames({("1", "1"): "<b>x</b>\x1b[2J"})
    assert "<b>x</b>" in hostile.titled("framework ops · thread 1", "1", "1", 1)  # escaped where drawn (svg_text, html)
