"""Timeline tracks: a track per host thread and per device stream, labelled, and no two bars of a row overlapping."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REAL_TRACES_DIR

from reportgen.analysis.timeline import (
    FOLDED_TRACK,
    LANE_ROW_BUDGET,
    MAX_DEPTH,
    TimelineLayout,
    iteration_window,
    representative_step,
    timeline_layout,
)
from reportgen.devices.lanes import Lane
from reportgen.render import timeline_plot
from reportgen.traces.reader import events_in_window, profiler_steps, read_trace


@dataclass(frozen=True)
class Ev:
    """A minimal stand-in for reportgen.traces.reader.TraceEvent."""

    name: str
    lane: str
    start_us: float
    duration_us: float
    tid: str = "100"
    pid: str = "100"
    correlation: int | None = None


def _overlaps(spans: list[tuple[object, float, float]]) -> list[tuple[object, tuple[float, float], tuple[float, float]]]:
    """Pairs of spans of one row that overlap in time (an end equal to the next start is not an overlap)."""
    by_row: dict[object, list[tuple[float, float]]] = defaultdict(list)
    for row, start, end in spans:
        by_row[row].append((start, end))
    found = []
    for row, row_spans in by_row.items():
        row_spans.sort()
        for a, b in zip(row_spans, row_spans[1:], strict=False):
            if b[0] < a[1] - 1e-9:
                found.append((row, a, b))
    return found


def assert_no_bars_overlap(layout: TimelineLayout) -> None:
    """No two bars drawn on one row overlap: not in the layout, and not as the chart draws them (minimum widths)."""
    row_of = {key: i for i, key in enumerate(layout.rows)}
    assert len(row_of) == len(layout.rows), "two rows share a key"
    drawn, _ = timeline_plot.timeline_bars(layout, row_of)
    assert all(b.row in range(len(row_of)) for b in drawn)
    assert _overlaps([(b.row, b.start_us, b.start_us + b.duration_us) for b in drawn]) == []
    extents = timeline_plot.drawn_extents(drawn, layout.window_us * 0.0015)
    assert _overlaps([(b.row, x0, x1) for b, (x0, x1) in zip(drawn, extents, strict=True)]) == []
    assert all(x1 >= b.start_us + b.duration_us for b, (_, x1) in zip(drawn, extents, strict=True))


def _compute_and_comm() -> list[Ev]:
    """A step of two host threads; compute kernels on stream 7 while NCCL kernels run on stream 20 at the same time."""
    events = [
        Ev("ProfilerStep#4", "framework", 0.0, 500.0),
        Ev("aten::linear", "framework", 10.0, 100.0),
        Ev("aten::addmm", "framework", 20.0, 50.0),
        Ev("cudaLaunchKernel", "runtime", 30.0, 5.0, correlation=1),
        Ev("c10d::allreduce_", "framework", 15.0, 60.0, tid="200"),  # the comm thread
        Ev("cudaLaunchKernel", "runtime", 40.0, 5.0, tid="200", correlation=2),
        Ev("record_param_comms", "framework", 120.0, 30.0, tid="200"),
    ]
    for i in range(6):  # compute: back to back on stream 7
        events.append(Ev(f"sm80_xmma_gemm_{i}", "device", 50.0 + 40.0 * i, 40.0, tid="7", pid="0"))
    for i in range(3):  # communication: long kernels on stream 20, each across several compute kernels
        events.append(Ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                         "device", 60.0 + 80.0 * i, 75.0, tid="20", pid="0"))
    # messy: two kernels of one stream that overlap (a clock skew in the exporter), and a zero-length one
    events += [Ev("skewed_a", "device", 400.0, 20.0, tid="7", pid="0"),
               Ev("skewed_b", "device", 410.0, 20.0, tid="7", pid="0"),
               Ev("marker", "device", 431.0, 0.0, tid="7", pid="0"),
               Ev("next", "device", 431.0, 10.0, tid="7", pid="0")]
    return events


def test_compute_and_communication_kernels_on_two_streams_get_their_own_rows() -> None:
    layout = timeline_layout(_compute_and_comm(), 0.0, 500.0, "ProfilerStep#4")
    assert [(t.title, t.depth) for t in layout.tracks] == [
        ("framework ops · thread 100", 2), ("framework ops · thread 200", 1),
        ("runtime · thread 100", 1), ("runtime · thread 200", 1),
        ("device · stream 7", 2), ("device · stream 20", 1),
    ]
    rows = {b.name: (b.lane, b.track, b.depth) for b in layout.bars}
    comm = [k for name, k in rows.items() if name.startswith("nccl")]
    compute = [k for name, k in rows.items() if name.startswith("sm80")]
    assert set(comm) == {(Lane.DEVICE, "0/20", 0)} and set(compute) == {(Lane.DEVICE, "0/7", 0)}
    assert rows["skewed_b"] == (Lane.DEVICE, "0/7", 1)  # overlaps skewed_a: one row lower
    assert rows["next"] == (Lane.DEVICE, "0/7", 0)
    assert_no_bars_overlap(layout)


def test_the_old_layout_would_have_drawn_the_kernels_over_each_other() -> None:
    """Not vacuous: on one row per lane, the NCCL kernels do overlap the compute kernels."""
    events = [e for e in _compute_and_comm() if e.lane == "device"]
    spans = [("device", e.start_us, e.start_us + e.duration_us) for e in events]
    assert _overlaps(spans)


def test_many_streams_fold_into_one_row_and_the_chart_says_so(tmp_path: Path) -> None:
    events = [Ev(f"k{s}_{i}", "device", 10.0 * i + s, 8.0, tid=str(s), pid="0") for s in range(40) for i in range(5)]
    events += [Ev(f"t{t}", "framework", float(t), 30.0, tid=str(1000 + t)) for t in range(30)]
    layout = timeline_layout(events, 0.0, 100.0)
    assert layout.event_count == len(events)
    device = [t for t in layout.tracks if t.lane is Lane.DEVICE]
    assert len(device) == LANE_ROW_BUDGET[Lane.DEVICE]  # one row each, and the folded row
    assert device[-1].key == FOLDED_TRACK and device[-1].depth == 1
    assert device[-1].title == f"device · {device[-1].members} other streams" and device[-1].members == 40 - 12
    busy = [(b.start_us, b.duration_us, b.name) for b in layout.bars if b.track == FOLDED_TRACK
            and b.lane is Lane.DEVICE]
    assert busy == [(12.0, 75.0, "")]  # streams 12..39 kept one after the other busy from 12 to 87 µs
    framework = [t for t in layout.tracks if t.lane is Lane.FRAMEWORK]
    assert len(framework) == LANE_ROW_BUDGET[Lane.FRAMEWORK] and framework[-1].members == 30 - 12
    assert len(layout.rows) <= sum(LANE_ROW_BUDGET.values())
    assert_no_bars_overlap(layout)
    timeline_plot.timeline_chart(layout, tmp_path / "t.svg", "folded")
    root = ET.parse(tmp_path / "t.svg").getroot()
    texts = set(root.itertext())
    assert "device · 28 other streams" in texts and "framework ops · 18 other threads" in texts
    assert "framework ops · 18 other threads: one row, busy when any of them is" in " ".join(texts)
    assert (tmp_path / "t.svg").stat().st_size < 100_000


def test_the_busiest_threads_keep_their_tracks() -> None:
    events = [Ev(f"op{t}_{d}", "framework", float(d), 100.0 - 2 * d, tid=str(t)) for t in range(5) for d in range(6)]
    events.append(Ev("main", "framework", 0.0, 1000.0, tid="4"))
    layout = timeline_layout(events, 0.0, 1000.0)
    assert [t.title for t in layout.tracks] == ["framework ops · thread 0", "framework ops · thread 4",
                                                "framework ops · 3 other threads"]
    assert [t.depth for t in layout.tracks] == [6, 6, 1]


def test_calls_nested_too_deep_are_not_drawn_over_their_parent() -> None:
    events = [Ev(f"op{i}", "framework", float(i), 100.0 - 2 * i) for i in range(MAX_DEPTH + 2)]
    layout = timeline_layout(events, 0.0, 100.0)
    drawn, note = timeline_plot.timeline_bars(layout, {key: i for i, key in enumerate(layout.rows)})
    assert len(drawn) == MAX_DEPTH and note == f"2 calls nested deeper than {MAX_DEPTH} levels not drawn"
    assert_no_bars_overlap(layout)


def test_track_labels_name_devices_streams_and_odd_ids(tmp_path: Path) -> None:
    events = [Ev("a", "device", 0.0, 1.0, tid="7", pid="0"), Ev("b", "device", 0.0, 1.0, tid="7", pid="1"),
              Ev("sync", "device", 2.0, 1.0, tid="-1", pid="0"),
              Ev("c", "framework", 0.0, 1.0, tid="<b>x</b>/y"), Ev("d", "framework", 0.0, 1.0, tid="<b>x</b>", pid="100/y"),
              Ev("e", "runtime", 0.0, 1.0, tid="t\x1b[31m" + "w" * 60)]
    layout = timeline_layout(events, 0.0, 3.0)
    assert [t.title for t in layout.tracks] == [
        "framework ops · pid 100 · <b>x</b>/y", "framework ops · pid 100/y · <b>x</b>",
        "runtime · t\x1b[31m" + "w" * 60, "device 0 · all streams", "device 0 · stream 7", "device 1 · stream 7"]
    assert len({t.key for t in layout.tracks}) == len(layout.tracks)
    timeline_plot.timeline_chart(layout, tmp_path / "t.svg", "odd")
    data = (tmp_path / "t.svg").read_bytes()
    texts = set(ET.fromstring(data).itertext())  # well-formed: the ESC became U+FFFD
    assert {"framework ops · pid 100 · <b>x</b>/y", "device 0 · all streams"} <= texts and b"<b>" not in data
    clipped = [t for t in texts if t.startswith("runtime · t\ufffd")]
    assert clipped == ["runtime · t\ufffd[31m" + "w" * (timeline_plot.MAX_ROW_LABEL_CHARS - 17) + "…"]


def _layout_of(name: str) -> TimelineLayout:
    trace = read_trace(REAL_TRACES_DIR / name)
    step = representative_step(profiler_steps(trace))
    if step is None:
        start = min(e.start_us for e in trace.events)
        end = max(e.end_us for e in trace.events)
    else:
        start, end = iteration_window(trace.events, step.start_us, step.start_us + step.duration_us)
    return timeline_layout(events_in_window(trace, start, end), start, end)


def _whole_trace(name: str) -> TimelineLayout:
    trace = read_trace(REAL_TRACES_DIR / name)
    start = min(e.start_us for e in trace.events)
    end = max(e.end_us for e in trace.events)
    return timeline_layout(trace.events, start, end)


def test_a_real_two_stream_cuda_trace_has_a_track_per_stream_and_no_overlaps(tmp_path: Path) -> None:
    """AlexNet on CUDA: kernels and memcpys on streams 7 and 20, device-wide syncs on Kineto's tid -1."""
    layout = _whole_trace("critical_path.trace.json.gz")
    device = [t.title for t in layout.tracks if t.lane is Lane.DEVICE]
    assert device == ["device · all streams", "device · stream 7", "device · stream 20"]
    assert "framework ops · thread 2869224" in [t.title for t in layout.tracks]
    assert_no_bars_overlap(layout)
    timeline_plot.timeline_chart(layout, tmp_path / "t.svg", "alexnet")
    texts = set(ET.parse(tmp_path / "t.svg").getroot().itertext())
    assert {"device · stream 7", "device · stream 20", "framework ops · thread 2869224"} <= texts
    assert (tmp_path / "t.svg").stat().st_size < 400_000


@pytest.mark.parametrize("name", ["amd_trace.trace.json.gz", "cpu_only.trace.json.gz", "critical_path.trace.json.gz",
                                  "cupti_profiler.trace.json.gz", "triton_example.trace.json.gz"])
def test_no_bars_overlap_on_real_traces(name: str) -> None:
    for layout in (_layout_of(name), _whole_trace(name)):
        assert_no_bars_overlap(layout)
        assert len(layout.rows) <= sum(LANE_ROW_BUDGET.values())


def test_real_multi_thread_cpu_trace_has_a_track_per_thread() -> None:
    layout = _whole_trace("cpu_only.trace.json.gz")
    assert [t.title for t in layout.tracks] == ["framework ops · thread 1074", "framework ops · thread 3553",
                                                "framework ops · thread 3554", "other · PyTorch Profiler"]


def test_concurrent_all_reduces_of_two_real_threads_get_two_rows() -> None:
    """cpu_only's representative step: gloo all_reduce on threads 3553 and 3554 at once (one row before)."""
    layout = _layout_of("cpu_only.trace.json.gz")
    reduces = [b for b in layout.bars if b.name == "gloo:all_reduce"]
    assert len(reduces) == 2 and _overlaps([(0, b.start_us, b.start_us + b.duration_us) for b in reduces])
    assert {b.track for b in reduces} == {"1074/3553", "1074/3554"} and {b.depth for b in reduces} == {0}
    assert_no_bars_overlap(layout)


def test_communication_kernels_are_coloured_apart_from_compute_and_the_chart_says_so(tmp_path: Path) -> None:
    layout = timeline_layout(_compute_and_comm(), 0.0, 500.0, "ProfilerStep#4")
    drawn, note = timeline_plot.timeline_bars(layout, {key: i for i, key in enumerate(layout.rows)})
    colours = {b.name: timeline_plot.bar_colour(b) for b in drawn if b.name}
    comm = {c for name, c in colours.items() if name.startswith("nccl")}
    assert comm == {timeline_plot.COMMUNICATION_COLOUR}
    assert colours["sm80_xmma_gemm_0"] == timeline_plot.LANE_COLOURS[Lane.DEVICE]
    # host-side c10d ops are framework ops, not device kernels: their lane's colour
    assert colours["c10d::allreduce_"] == timeline_plot.LANE_COLOURS[Lane.FRAMEWORK]
    assert timeline_plot.COMMUNICATION_NOTE in note
    compute_only = [e for e in _compute_and_comm() if not e.name.startswith("nccl")]
    layout = timeline_layout(compute_only, 0.0, 500.0, "ProfilerStep#4")
    drawn, note = timeline_plot.timeline_bars(layout, {key: i for i, key in enumerate(layout.rows)})
    assert timeline_plot.COMMUNICATION_NOTE not in note
    assert timeline_plot.COMMUNICATION_COLOUR not in {timeline_plot.bar_colour(b) for b in drawn}
