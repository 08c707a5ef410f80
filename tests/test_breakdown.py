"""Breakdowns (reportgen.traces.breakdown): every figure of every real trace recomputed here from the raw JSON.

The reference below is a separate, deliberately plain implementation: gzip + json, an
elementary-segment sweep over all interval boundaries, brute-force searches. It does not call
reportgen. Sums of float durations are compared with a tight relative tolerance (summation order
differs); counts, names, kinds, minima and maxima are compared exactly.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import REAL_TRACES_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

from reportgen.analysis.breakdown import breakdown_view, rank_summary
from reportgen.model.breakdown import MAX_STORED_STEPS, STEP_PARTS, TraceBreakdown, WorkKind
from reportgen.traces.breakdown import build_breakdown, step_spread
from reportgen.traces.optable import build_op_table
from reportgen.traces.reader import read_trace, read_trace_bytes

REAL_TRACES = sorted(REAL_TRACES_DIR.glob("*.json.gz"))
HOST_CATS = {"cpu_op", "user_annotation", "python_function"}
WORK_CATS = {"kernel": "compute", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
STEP_RE = re.compile(r"ProfilerStep#\d+")
COMM_RE = re.compile(r"nccl|rccl|msccl|c10d::|gloo", re.IGNORECASE)
Ev = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# The independent reference


def _load(path: Path) -> list[Ev]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    assert not [e for e in events if e.get("ph") in ("B", "E")], "the reference reads X events only"
    return [e for e in events if e.get("ph") == "X"]


def _end(e: Ev) -> float:
    return float(e["ts"]) + float(e["dur"])


def _is_runtime(e: Ev) -> bool:
    cat = str(e.get("cat", ""))
    return cat.endswith(("_runtime", "_driver"))


def _kind(e: Ev) -> str:
    base = WORK_CATS[e["cat"]]
    return "communication" if base == "compute" and COMM_RE.search(e["name"]) else base


def _is_step(e: Ev) -> bool:
    return e.get("cat") in HOST_CATS and bool(STEP_RE.fullmatch(e["name"]))


class Reference:
    """One trace's figures, computed the slow, obvious way."""

    def __init__(self, events: list[Ev]) -> None:
        self.events = events
        self.work = [e for e in events if e.get("cat") in WORK_CATS]
        self.host = [e for e in events if e.get("cat") in HOST_CATS]
        # in time order (start, longest first, then file order): a repeated correlation id means its last call
        self.runtime = sorted((e for e in events if _is_runtime(e)), key=lambda e: (float(e["ts"]), -float(e["dur"])))
        self.steps = sorted((e for e in self.host if _is_step(e)), key=lambda e: e["ts"])
        self.launch = {e["args"]["correlation"]: float(e["ts"]) for e in self.runtime
                       if isinstance((e.get("args") or {}).get("correlation"), int)}
        classes: list[tuple[str, list[Ev]]] = [
            ("kernel_us", [e for e in self.work if _kind(e) == "compute"]),
            ("memcpy_us", [e for e in self.work if _kind(e) == "memcpy"]),
            ("memset_us", [e for e in self.work if _kind(e) == "memset"]),
            ("communication_us", [e for e in self.work if _kind(e) == "communication"]),
            ("runtime_us", self.runtime),
            ("cpu_us", [e for e in self.host if not _is_step(e)]),
        ]
        self.classes = classes
        self.segments = self._sweep()

    def _sweep(self) -> list[tuple[float, float, str | None, bool]]:
        """Elementary segments (a, b, first active class or None, device busy) between all boundaries."""
        marks: dict[float, list[tuple[str, int]]] = defaultdict(list)
        for name, evs in self.classes:
            for e in evs:
                marks[float(e["ts"])].append((name, 1))
                marks[_end(e)].append((name, -1))
        count = dict.fromkeys((n for n, _ in self.classes), 0)
        out = []
        times = sorted(marks)
        for a, b in itertools.pairwise(times):
            for name, delta in marks[a]:
                count[name] += delta
            active = next((n for n, _ in self.classes if count[n] > 0), None)
            busy = any(count[n] > 0 for n in ("kernel_us", "memcpy_us", "memset_us", "communication_us"))
            out.append((a, b, active, busy))
        return out

    def windows(self) -> list[tuple[str, float, float]]:
        out = []
        for i, s in enumerate(self.steps):
            start, end = float(s["ts"]), _end(s)
            ext = end
            for w in self.work:
                launched = self.launch.get((w.get("args") or {}).get("correlation"))
                if launched is not None and start <= launched < end:
                    ext = max(ext, _end(w))
            if i + 1 < len(self.steps):
                ext = min(ext, float(self.steps[i + 1]["ts"]))
            out.append((s["name"], start, max(ext, start)))
        return out

    def whole(self) -> tuple[float, float]:
        return min(float(e["ts"]) for e in self.events), max(_end(e) for e in self.events)

    def gap_cause(self, t: float) -> str:
        """Why the device is idle at instant ``t``: from the device work that ends this gap (zero-length work
        neither fills nor ends a gap)."""
        timed = [w for w in self.work if float(w["dur"]) > 0]
        after = [w for w in timed if float(w["ts"]) >= t]
        if not after:
            return "host"
        first = min(after, key=lambda w: (float(w["ts"]), -float(w["dur"])))  # min() keeps file order on ties
        gap_start = max((_end(w) for w in timed if _end(w) <= t), default=-math.inf)
        launched = self.launch.get((first.get("args") or {}).get("correlation"))
        if launched is None:
            return "unknown"
        return "host" if launched >= gap_start else "between"

    def window(self, lo: float, hi: float) -> dict[str, float]:
        fig: dict[str, float] = defaultdict(float)
        fig["wall_us"] = hi - lo
        swept = 0.0
        for a, b, active, busy in self.segments:
            a2, b2 = max(a, lo), min(b, hi)
            if b2 <= a2:
                continue
            swept += b2 - a2
            fig[active or "other_us"] += b2 - a2
            if busy:
                fig["device_busy_us"] += b2 - a2
        fig["other_us"] += (hi - lo) - swept  # before the first and after the last boundary
        # Idle: the window minus busy segments; segments outside any event count too.
        idle_points = sorted({lo, hi, *(p for a, b, _, busy in self.segments if busy for p in (a, b) if lo < p < hi)})
        for a, b in itertools.pairwise(idle_points):
            mid = (a + b) / 2
            if not any(float(w["ts"]) <= mid < _end(w) for w in self.work):
                cause = self.gap_cause(mid)
                fig[{"host": "idle_host_wait_us", "between": "idle_between_kernels_us",
                     "unknown": "idle_unknown_us"}[cause]] += b - a
        fig["device_idle_us"] = (hi - lo) - fig["device_busy_us"]
        return fig

    def launcher(self, w: Ev) -> str:
        """The op that launched ``w``: innermost host op open at its launch, else its External id's op."""
        args = w.get("args") or {}
        corr, ext = args.get("correlation"), args.get("External id")
        rt = next((r for r in reversed(self.runtime) if (r.get("args") or {}).get("correlation") == corr), None)
        if rt is not None:
            t = float(rt["ts"])
            around = [h for h in self.host if (h["pid"], h["tid"]) == (rt["pid"], rt["tid"])
                      and float(h["ts"]) <= t < _end(h)]
            if around:
                return max(around, key=lambda h: (float(h["ts"]), -float(h["dur"])))["name"]
        if ext is not None and ext != corr:
            op = next((h for h in sorted(self.host, key=lambda h: (float(h["ts"]), -float(h["dur"])))
                       if (h.get("args") or {}).get("External id") == ext), None)
            if op is not None:
                return op["name"]
        return ""


def _union_length(evs: list[Ev]) -> float:
    total, cur_s, cur_e = 0.0, -math.inf, -math.inf
    for e in sorted(evs, key=lambda e: float(e["ts"])):
        s, t = float(e["ts"]), _end(e)
        if s > cur_e:
            total += cur_e - cur_s if cur_e > -math.inf else 0.0
            cur_s, cur_e = s, t
        else:
            cur_e = max(cur_e, t)
    return total + (cur_e - cur_s if cur_e > -math.inf else 0.0)


def _close(a: float, b: float) -> bool:
    return a == pytest.approx(b, rel=1e-9, abs=1e-6)


# ---------------------------------------------------------------------------------------------
# Every real trace


def _ours(path: Path) -> TraceBreakdown:
    trace = read_trace(path)
    table = build_op_table(trace)
    return build_breakdown(trace, table.device_launchers, table.steps)


def test_every_shared_trace_is_covered() -> None:
    assert len(REAL_TRACES) == 5


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_kernel_breakdown_matches_the_raw_json(path: Path) -> None:
    ref = Reference(_load(path))
    ours = _ours(path)
    by_name: dict[str, list[Ev]] = defaultdict(list)
    for w in ref.work:
        by_name[w["name"]].append(w)
    total = sum(float(w["dur"]) for w in ref.work)
    assert ours.device_work_count == len(ref.work)
    assert _close(ours.device_sum_us, total)
    assert _close(ours.device_busy_us, _union_length(ref.work))
    assert ours.stream_count == len({(w["pid"], w["tid"]) for w in ref.work})
    assert ours.hidden_kernel_count == 0 and [k.name for k in ours.kernels] == sorted(
        by_name, key=lambda n: (-sum(float(w["dur"]) for w in by_name[n]), n))
    for k in ours.kernels:
        evs = by_name[k.name]
        durs = [float(w["dur"]) for w in evs]
        assert (k.count, k.min_us, k.max_us, k.kind.value) == (len(evs), min(durs), max(durs), _kind(evs[0]))
        assert _close(k.total_us, sum(durs)) and _close(k.mean_us, sum(durs) / len(durs))
        assert _close(k.share_of_device_sum, sum(durs) / total)
        time_by_op: dict[str, float] = defaultdict(float)
        for w in evs:
            time_by_op[ref.launcher(w)] += float(w["dur"])
        assert k.launcher == min(time_by_op.items(), key=lambda t: (-t[1], t[0]))[0]
    per_op: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for w in ref.work:
        if op := ref.launcher(w):
            per_op[op][w["name"]].append(float(w["dur"]))
    assert {o.op for o in ours.op_kernels} == set(per_op)
    for o in ours.op_kernels:
        assert {k.name: k.count for k in o.kernels} == {n: len(d) for n, d in per_op[o.op].items()}
        assert _close(o.total_us, sum(sum(d) for d in per_op[o.op].values()))


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_temporal_breakdown_matches_the_raw_json(path: Path) -> None:
    ref = Reference(_load(path))
    ours = _ours(path)
    windows = ref.windows()
    assert [s.name for s in ours.steps] == [n for n, _, _ in windows]
    lo, hi = ref.whole()
    for got, (lo_, hi_) in [(ours.whole, (lo, hi)), *zip(ours.steps, [(a, b) for _, a, b in windows], strict=True)]:
        want = ref.window(lo_, hi_)
        for field in ("wall_us", "device_busy_us", "device_idle_us", "idle_host_wait_us", "idle_between_kernels_us",
                      "idle_unknown_us", *STEP_PARTS):
            assert _close(got.part(field), want[field]), (got.name, field, got.part(field), want[field])
        assert _close(sum(got.part(p) for p in STEP_PARTS), got.wall_us)
        assert _close(got.idle_host_wait_us + got.idle_between_kernels_us + got.idle_unknown_us, got.device_idle_us)


def test_shared_traces_as_a_folder_of_ranks() -> None:
    named = [(p.name, _ours(p)) for p in REAL_TRACES]
    summary = rank_summary(named)
    assert summary is not None
    step_time = {}
    for p in REAL_TRACES:
        ref = Reference(_load(p))
        walls = [b - a for _, a, b in ref.windows()]
        lo, hi = ref.whole()
        step_time[p.name] = statistics.median(walls) if walls else hi - lo
    assert {line.variant: line.median_step_us for line in summary.lines} == pytest.approx(step_time, rel=1e-12)
    assert summary.straggler == max(step_time, key=lambda n: step_time[n])
    assert summary.median_step_us == pytest.approx(statistics.median(step_time.values()), rel=1e-12)
    assert [line.is_straggler for line in summary.lines].count(True) == 1
    assert rank_summary(named[:1]) is None


# ---------------------------------------------------------------------------------------------
# Inline traces with hand-computed answers


def _ev(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1, pid: int = 1, **args: object) -> Ev:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


TWO_STREAMS = {"traceEvents": [
    _ev("ProfilerStep#1", 0, 100, cat="user_annotation"),
    _ev("aten::mm", 10, 20),
    _ev("cudaLaunchKernel", 12, 4, cat="cuda_runtime", correlation=1),
    _ev("c10d::allreduce_", 40, 10),
    _ev("cudaLaunchKernel", 42, 4, cat="cuda_runtime", correlation=2),
    _ev("cudaMemcpyAsync", 60, 30, cat="cuda_runtime", correlation=3),
    _ev("gemm", 20, 40, cat="kernel", pid=0, tid=7, correlation=1),  # stream 7: 20-60
    _ev("ncclDevKernel_AllReduce_Sum_f32", 50, 30, cat="kernel", pid=0, tid=20, correlation=2),  # stream 20: 50-80
    _ev("Memcpy DtoH", 85, 10, cat="gpu_memcpy", pid=0, tid=7, correlation=3),  # launched at 60, before the gap
    _ev("ProfilerStep#2", 100, 50, cat="user_annotation"),
]}


def test_two_streams_union_priority_idle_and_overlap() -> None:
    trace = read_trace_bytes(json.dumps(TWO_STREAMS).encode(), "t")
    b = build_breakdown(trace, build_op_table(trace).device_launchers)
    assert (b.device_sum_us, b.device_busy_us, b.stream_count) == (80.0, 70.0, 2)  # 40+30+10 summed; 20-80 and 85-95
    assert (b.communication_busy_us, b.overlap_us, b.overlap_fraction) == (30.0, 10.0, 1 / 3)
    s1, s2 = b.steps
    assert (s1.wall_us, s2.wall_us) == (100.0, 50.0)
    # 0-10 other, 10-12 cpu, 12-16 runtime, 16-20 cpu, 20-60 kernel, 60-80 communication, 80-85 runtime,
    # 85-95 memcpy, 95-100 other
    assert {p: s1.part(p) for p in STEP_PARTS} == {
        "kernel_us": 40.0, "memcpy_us": 10.0, "memset_us": 0.0, "communication_us": 20.0, "runtime_us": 9.0,
        "cpu_us": 6.0, "other_us": 15.0}
    # idle 0-20: gemm launched at 12 >= -inf: host; 80-85: memcpy launched at 60 < 80: between; 95-100: host
    assert (s1.device_idle_us, s1.idle_host_wait_us, s1.idle_between_kernels_us) == (30.0, 25.0, 5.0)
    assert {k.name: (k.kind, k.launcher) for k in b.kernels} == {
        "gemm": (WorkKind.COMPUTE, "aten::mm"),
        "ncclDevKernel_AllReduce_Sum_f32": (WorkKind.COMMUNICATION, "c10d::allreduce_"),
        "Memcpy DtoH": (WorkKind.MEMCPY, "ProfilerStep#1"),
    }
    spread = {p.part: p for p in b.spread}
    assert b.spread == step_spread(b.steps)
    assert (spread["wall_us"].median_us, spread["wall_us"].min_us, spread["wall_us"].max_us) == (75.0, 50.0, 100.0)
    assert spread["kernel_us"].share == 40.0 / 150.0


def test_a_step_window_extends_to_the_device_work_it_launched() -> None:
    data = {"traceEvents": [
        _ev("ProfilerStep#1", 0, 10, cat="user_annotation"),
        _ev("cudaLaunchKernel", 2, 2, cat="cuda_runtime", correlation=1),
        _ev("k", 5, 20, cat="kernel", pid=0, tid=7, correlation=1),  # runs until 25
        _ev("ProfilerStep#2", 15, 10, cat="user_annotation"),
        _ev("cudaLaunchKernel", 16, 2, cat="cuda_runtime", correlation=2),
        _ev("k2", 30, 10, cat="kernel", pid=0, tid=7, correlation=2),  # the last step: extends to 40
    ]}
    trace = read_trace_bytes(json.dumps(data).encode(), "t")
    b = build_breakdown(trace, build_op_table(trace).device_launchers)
    assert [(s.name, s.wall_us) for s in b.steps] == [("ProfilerStep#1", 15.0), ("ProfilerStep#2", 25.0)]
    assert [s.device_busy_us for s in b.steps] == [10.0, 20.0]  # k is split at the next step's start
    # step 2: 25-30 idle, k2 launched at 16 < 25: between kernels
    assert b.steps[1].idle_between_kernels_us == 5.0


def test_unlinked_device_work_has_an_unknown_idle_cause_and_no_launcher() -> None:
    data = {"traceEvents": [_ev("aten::x", 0, 5), _ev("k", 10, 5, cat="kernel", pid=0, tid=7)]}
    trace = read_trace_bytes(json.dumps(data).encode(), "t")
    b = build_breakdown(trace, build_op_table(trace).device_launchers)
    assert (b.whole.wall_us, b.whole.idle_unknown_us, b.whole.device_busy_us) == (15.0, 10.0, 5.0)
    assert b.kernels[0].launcher == "" and b.op_kernels == ()


def test_import_stores_the_breakdown_in_run_json(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    from reportgen.store.loader import load_run
    from reportgen.traces.importer import ImportRequest, import_run

    folder = import_run(ImportRequest(REAL_TRACES_DIR), tmp_path / "store", now=datetime(2026, 12, 1, tzinfo=timezone.utc))
    run = load_run(folder)
    stored = {v.name: v.breakdown for v in run.variants}
    assert stored == {p.name.removesuffix(".trace.json.gz"): _ours(p) for p in REAL_TRACES}
    raw = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    assert all(v["breakdown"]["whole"]["wall_us"] > 0 for v in raw["variants"])


# ---------------------------------------------------------------------------------------------
# Random inline traces: the whole breakdown against the reference above


_event = st.tuples(st.sampled_from(["cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"]),
                   st.integers(0, 60), st.integers(0, 25), st.integers(1, 4), st.integers(1, 2))


@settings(max_examples=60, deadline=None)
@given(st.lists(_event, min_size=1, max_size=25), st.lists(st.integers(0, 70), max_size=3, unique=True))
def test_random_traces_match_the_reference(events: list[tuple[str, int, int, int, int]], step_starts: list[int]) -> None:
    raw: list[Ev] = []
    for i, (cat, ts, dur, corr, stream) in enumerate(events):
        device = cat in WORK_CATS
        name = "ncclKernel_x" if cat == "kernel" and i % 4 == 0 else f"{cat}_{i % 3}"
        raw.append(_ev(name, ts, dur, cat=cat, pid=0 if device else 1, tid=stream if device else 1,
                       correlation=corr))
    for k, s in enumerate(sorted(step_starts)):
        raw.append(_ev(f"ProfilerStep#{k}", s, 10, cat="user_annotation"))
    trace = read_trace_bytes(json.dumps({"traceEvents": raw}).encode(), "t")
    table = build_op_table(trace)
    ours = build_breakdown(trace, table.device_launchers, table.steps)
    ref = Reference([dict(e) for e in raw])
    assert _close(ours.device_busy_us, _union_length(ref.work))
    windows = ref.windows()
    lo, hi = ref.whole()
    assert [s.name for s in ours.steps] == [n for n, _, _ in windows]
    for got, (w0, w1) in [(ours.whole, (lo, hi)), *zip(ours.steps, [(a, b) for _, a, b in windows], strict=True)]:
        want = ref.window(w0, w1)
        for field in ("wall_us", "device_busy_us", "idle_host_wait_us", "idle_between_kernels_us", "idle_unknown_us",
                      *STEP_PARTS):
            assert _close(got.part(field), want[field]), (got.name, field)
    comm = [w for w in ref.work if _kind(w) == "communication"]
    compute = [w for w in ref.work if _kind(w) == "compute"]
    assert _close(ours.communication_busy_us, _union_length(comm))
    assert _close(ours.overlap_us, _union_length(comm) + _union_length(compute) - _union_length(comm + compute))


def test_odd_correlation_ids_do_not_break_the_breakdown() -> None:
    data = {"traceEvents": [
        _ev("cudaLaunchKernel", 0, 2, cat="cuda_runtime", correlation=2**70),
        _ev("cudaLaunchKernel", 3, 2, cat="cuda_runtime", correlation=-4),
        _ev("cudaLaunchKernel", 6, 2, cat="cuda_runtime"),
        _ev("a", 10, 5, cat="kernel", pid=0, tid=7, correlation=2**70),
        _ev("b", 20, 5, cat="kernel", pid=0, tid=7, correlation=-4),
        _ev("c", 30, 5, cat="kernel", pid=0, tid=7),
    ]}
    trace = read_trace_bytes(json.dumps(data).encode(), "t")
    b = build_breakdown(trace, build_op_table(trace).device_launchers)
    # ids outside 0..2**63 are never linked: every gap before a kernel has an unknown cause
    assert (b.whole.wall_us, b.whole.device_busy_us, b.whole.idle_unknown_us, b.whole.idle_host_wait_us) == (
        35.0, 15.0, 20.0, 0.0)


def test_only_the_first_steps_are_stored_but_the_spread_covers_all() -> None:
    raw = [_ev(f"ProfilerStep#{k}", 100 * k, 10 + k, cat="user_annotation") for k in range(MAX_STORED_STEPS + 10)]
    trace = read_trace_bytes(json.dumps({"traceEvents": raw}).encode(), "t")
    table = build_op_table(trace)
    b = build_breakdown(trace, table.device_launchers, table.steps)
    walls = [10.0 + k for k in range(MAX_STORED_STEPS + 10)]
    assert (len(b.steps), b.step_count) == (MAX_STORED_STEPS, MAX_STORED_STEPS + 10)
    assert [s.wall_us for s in b.steps] == walls[:MAX_STORED_STEPS]
    wall = {p.part: p for p in b.spread}["wall_us"]
    assert (wall.min_us, wall.max_us, wall.median_us) == (10.0, walls[-1], statistics.median(walls))
    view = breakdown_view(b)
    assert (len(view.rows), view.hidden_step_count) == (MAX_STORED_STEPS, 10)


def test_equal_names_from_different_json_values_are_one_row() -> None:
    # 7 (a number) and "7" (a string) are both read as the name "7": one kernel row, one launcher
    data = {"traceEvents": [
        _ev("op", 0, 50), _ev("cudaLaunchKernel", 1, 1, cat="cuda_runtime", correlation=1),
        _ev("cudaLaunchKernel", 3, 1, cat="cuda_runtime", correlation=2),
        {**_ev("x", 10, 4, cat="kernel", pid=0, tid=7, correlation=1), "name": 7},
        _ev("7", 20, 6, cat="kernel", pid=0, tid=7, correlation=2),
    ]}
    trace = read_trace_bytes(json.dumps(data).encode(), "t")
    b = build_breakdown(trace, build_op_table(trace).device_launchers)
    assert b is not None
    assert [(k.name, k.count, k.total_us, k.launcher) for k in b.kernels] == [("7", 2, 10.0, "op")]
    assert [(o.op, [(k.name, k.count, k.total_us) for k in o.kernels]) for o in b.op_kernels] == [
        ("op", [("7", 2, 10.0)])]
