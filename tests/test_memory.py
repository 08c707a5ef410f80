"""Memory per call: measured figures against a count by hand, the CUDA allocator path with a stand-in, the pure
analysis of the profiler's memory events, and the figures surviving run.json."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any

import pytest
from conftest import ROOT
from factories import synthetic_run, variant

from reportgen.analysis.memory import OUTSIDE_OPS, MemoryEvent, call_memory, timeline
from reportgen.model.memory import MemoryOp, MemoryPoint, VariantMemory

torch = pytest.importorskip("torch")

SHAPE = (8, 1024, 1024)  # rmsnorm's default shape, float32
N = math.prod(SHAPE) * 4  # one tensor of x's size: 32 MiB
R = math.prod(SHAPE[:-1]) * 4  # one value per row: mean, mean + eps, rsqrt: 32 KiB
SCALAR = 8 + 4  # a Python number wrapped as a float64 0-dim tensor, then cast to float32


def _rmsnorm() -> Any:
    sys.path.insert(0, str(ROOT))
    from scenarios import rmsnorm

    return rmsnorm


def _measure(fn: Any, args: tuple[Any, ...]) -> VariantMemory:
    from reportgen.devices.cpu import CpuBackend
    from reportgen.profile.memory import measure_memory
    from reportgen.profile.timing import CallArgs

    with torch.no_grad():
        fn(*args)  # warm-up, as measure_variants does before
        return measure_memory(CpuBackend(), fn, CallArgs(args))


def test_rmsnorm_memory_per_call_matches_the_count_by_hand_on_cpu() -> None:
    rms = _rmsnorm()
    args = rms.make_inputs(SHAPE, torch.float32, 0, torch.device("cpu"))
    # naive: x*x (N), mean (R), + eps (R), rsqrt (R), x * r (N), * weight (N, the output); the mean's divisor and eps
    # are Python numbers, each wrapped (8 B) and cast (4 B). At the peak x * r, the output and the variance are live.
    naive = _measure(rms.naive, args)
    assert (naive.allocation_count, naive.allocated_bytes, naive.peak_bytes) == (6 + 4, 3 * N + 3 * R + 2 * SCALAR,
                                                                                2 * N + R)
    assert naive.exact and naive.unavailable is None and "profile_memory=True" in naive.source
    assert naive.ops[0] == MemoryOp("aten::mul", 3 * N, 3)
    # torch.rms_norm on this CPU is aten::_fused_rms_norm's composite: pow (N), mean (R), add_ in place (its eps still
    # wrapped), rsqrt (R), two muls (N each): one intermediate of R fewer than naive.
    fused = _measure(rms.fused, args)
    assert (fused.allocation_count, fused.allocated_bytes, fused.peak_bytes) == (5 + 4, 3 * N + 2 * R + 2 * SCALAR,
                                                                                2 * N + R)
    assert fused.exact
    # The timeline starts at 0, reaches the peak and ends with the output still live.
    assert naive.timeline[0] == MemoryPoint(0.0, 0) and naive.timeline[-1].live_bytes == N
    assert max(p.live_bytes for p in naive.timeline) == naive.peak_bytes


def test_compiled_rmsnorm_allocates_only_its_output_and_row_buffer() -> None:
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/work/main/.cache/inductor")
    from reportgen.devices.cpu import CpuBackend

    rms = _rmsnorm()
    args = rms.make_inputs(SHAPE, torch.float32, 0, torch.device("cpu"))
    compiled = _measure(CpuBackend().compile(rms.naive), args)
    assert (compiled.allocation_count, compiled.allocated_bytes, compiled.peak_bytes) == (2, N + R, N + R)
    assert compiled.exact


class _StandInCudaAllocator:
    """torch.cuda's allocator statistics as documented (``memory_stats`` keys ``allocated_bytes.all.*`` and
    ``allocation.all.*``, ``memory_allocated``, ``max_memory_allocated``, ``reset_peak_memory_stats``)."""

    def __init__(self, live: int) -> None:
        self.live, self.peak, self.total_bytes, self.total_count = live, live, 0, 0

    def alloc(self, nbytes: int) -> None:
        self.live += nbytes
        self.total_bytes += nbytes
        self.total_count += 1
        self.peak = max(self.peak, self.live)

    def free(self, nbytes: int) -> None:
        self.live -= nbytes

    def memory_stats(self) -> dict[str, int]:
        return {"allocated_bytes.all.allocated": self.total_bytes, "allocated_bytes.all.current": self.live,
                "allocation.all.allocated": self.total_count, "allocation.all.current": 0}

    def reset_peak_memory_stats(self) -> None:
        self.peak = self.live


def test_cuda_memory_comes_from_the_allocator_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    from reportgen.devices.cuda import CudaBackend

    fake = _StandInCudaAllocator(live=5_000)  # the inputs, live before the call: not counted
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: fake.live)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: fake.peak)
    monkeypatch.setattr(torch.cuda, "memory_stats", fake.memory_stats)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", fake.reset_peak_memory_stats)

    def call() -> None:  # naive-like: an intermediate of 1,024 B freed before a 2,048 B output
        fake.alloc(1024)
        fake.alloc(2048)
        fake.free(1024)

    counted = CudaBackend().allocator_count(call)
    assert counted is not None
    count, source = counted
    assert (count.peak_bytes, count.allocated_bytes, count.allocation_count) == (3072, 3072, 2)
    assert "max_memory_allocated" in source and "'allocation.all.allocated'" in source


def test_neuron_memory_is_unavailable_with_its_reason() -> None:
    from reportgen.devices.neuron.device import NeuronBackend
    from reportgen.profile.memory import measure_memory
    from reportgen.profile.timing import CallArgs

    memory = measure_memory(NeuronBackend(), lambda: None, CallArgs(()))
    assert memory.peak_bytes is None and memory.unavailable is not None and "neuron" in memory.unavailable


def _mem(ts: float, nbytes: int) -> dict[str, Any]:
    return {"ph": "i", "name": "[memory]", "ts": ts, "tid": 1, "args": {"Bytes": nbytes, "Device Type": 0}}


def test_allocations_go_to_the_innermost_op_and_other_devices_are_left_out() -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::outer", "ts": 0.0, "dur": 100.0, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 10.0, "dur": 5.0, "tid": 1},
        _mem(12.0, 400), _mem(50.0, 100), _mem(60.0, -400), _mem(200.0, 8),
        {**_mem(70.0, 9999), "args": {"Bytes": 9999, "Device Type": 1}},  # a CUDA allocation: not the CPU's
    ]
    memory = call_memory(events, device_type=0)
    assert (memory.count.peak_bytes, memory.count.allocated_bytes, memory.count.allocation_count) == (500, 508, 3)
    assert memory.ops == (MemoryOp("aten::empty", 400, 1), MemoryOp("aten::outer", 100, 1), MemoryOp(OUTSIDE_OPS, 8, 1))


def test_thinned_timeline_keeps_the_peak_and_both_ends() -> None:
    events = [MemoryEvent(float(i), 1 if i % 2 == 0 else -1, "1") for i in range(1000)]
    events[501] = MemoryEvent(501.0, 10_000, "1")
    points = timeline(events, 0.0, 1000.0, max_points=50)
    assert len(points) <= 50 and points[0] == MemoryPoint(0.0, 0) and points[-1].t_us == 1000.0
    assert max(p.live_bytes for p in points) == max(p.live_bytes for p in timeline(events, 0.0, 1000.0)) == 10_002


def test_memory_figures_survive_run_json() -> None:
    from reportgen.store.runjson import parse_run_json, run_to_json

    memory = VariantMemory(source="test", peak_bytes=3, allocated_bytes=4, allocation_count=1, exact=True,
                           ops=(MemoryOp("aten::mul", 4, 1),), timeline=(MemoryPoint(0.0, 0), MemoryPoint(1.5, 3)))
    run = synthetic_run()
    run = dataclasses.replace(run, variants=(dataclasses.replace(variant("naive", 100.0), memory=memory),))
    assert parse_run_json(run_to_json(run), "run.json").variants[0].memory == memory


def test_run_page_and_report_show_memory_column_section_ops_and_timeline(tmp_path: Any) -> None:
    from factories import write_synthetic

    from reportgen import site

    hostile = "<b>x</b>|*"
    memory = VariantMemory(source=f"profiler {hostile}", peak_bytes=67141632, allocated_bytes=100761624,
                           allocation_count=10, exact=True, ops=(MemoryOp(f"aten::mul{hostile}", 100663296, 3),),
                           timeline=(MemoryPoint(0.0, 0), MemoryPoint(5.0, 33554432), MemoryPoint(9.0, 67141632),
                                     MemoryPoint(12.0, 33554432)), timeline_source="profiler events")
    unavailable = VariantMemory(source="", unavailable="unavailable on neuron: reason")
    run = synthetic_run()
    run = dataclasses.replace(run, variants=(dataclasses.replace(run.variants[0], memory=memory),
                                             dataclasses.replace(run.variants[1], memory=unavailable),
                                             run.variants[2]))
    write_synthetic(tmp_path / "store", run)
    site.build_site(tmp_path / "store", tmp_path / "site", "/")
    folder = tmp_path / "site" / "runs" / run.run_id
    page = (folder / "index.html").read_text(encoding="utf-8")
    md = (folder / "report.md").read_text(encoding="utf-8")
    assert "peak memory / call" in page and '<section id="memory">' in page
    assert 'title="profiler &lt;b&gt;x&lt;/b&gt;|*">64.0 MiB</td>' in page  # the summary cell says its source
    assert "(67,141,632 B)" in page and "aten::mul&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert "unavailable on neuron: reason" in page and "not measured" in page
    assert (folder / "memory-naive.png").is_file() and 'src="memory-naive.png"' in page
    assert not (folder / "memory-fused.png").exists()
    assert "| naive | 64.0 MiB (67,141,632 B) | 96.1 MiB (100,761,624 B) | 10 | yes |" in md
    assert "| peak memory / call |" in md and "![Memory timeline of naive" in md


def test_a_failure_to_measure_memory_is_a_reason_not_a_failed_variant() -> None:
    from reportgen.devices.cpu import CpuBackend
    from reportgen.profile.memory import measure_memory_or_reason
    from reportgen.profile.timing import CallArgs

    def out_of_memory() -> None:
        raise MemoryError("cannot allocate 64 GiB")

    memory = measure_memory_or_reason(CpuBackend(), out_of_memory, CallArgs(()))
    assert memory.peak_bytes is None and memory.unavailable == "measuring memory failed: MemoryError: cannot allocate 64 GiB"
