"""Linking device work to its ops and reading trace metadata (runtime calls that outlast their op, External ids, MTIA
work, rank metadata, overflowing times), each on a small inline trace that failed on the code before its fix."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from reportgen.errors import TraceError
from reportgen.model.run import DeviceKind, TimeBasis
from reportgen.store.loader import load_run
from reportgen.traces.importer import ImportRequest, import_run
from reportgen.traces.optable import UNATTRIBUTED_ROW, build_op_table
from reportgen.traces.reader import read_trace_bytes

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def _ev(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1, pid: int = 1, **args: object) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _bytes(*events: dict, **top: object) -> bytes:
    return json.dumps({"traceEvents": list(events), **top}).encode()


def _rows(data: bytes) -> dict[str, tuple[int, float, float, float, float]]:
    table = build_op_table(read_trace_bytes(data, "t"))
    return {r.name: (r.calls, r.self_cpu_us, r.total_cpu_us, r.self_device_us, r.total_device_us)
            for r in table.rows}


# Defect 1: a runtime call that starts inside an op and ends after it closed the op early.
STRADDLING_LAUNCH = _bytes(
    _ev("aten::linear", 0, 100),
    _ev("aten::t", 10, 10),
    _ev("cudaLaunchKernel", 50, 70, cat="cuda_runtime", correlation=7),  # starts in linear, ends after it
    _ev("aten::addmm", 60, 20),  # still linear's child
    _ev("gemm", 130, 40, cat="kernel", pid=0, tid=7, correlation=7),
)


def test_a_runtime_call_outlasting_its_op_does_not_close_the_op() -> None:
    rows = _rows(STRADDLING_LAUNCH)
    assert rows == {
        "aten::linear": (1, 70.0, 100.0, 40.0, 40.0),  # children t (10) and addmm (20); launched gemm
        "aten::t": (1, 10.0, 10.0, 0.0, 0.0),
        "aten::addmm": (1, 20.0, 20.0, 0.0, 0.0),
    }
    table = build_op_table(read_trace_bytes(STRADDLING_LAUNCH, "t"))
    assert (table.op_dispatch_count, table.unattributed_device_count) == (1, 0)


# Defect 4: older Kineto wrote a kernel's External id equal to its correlation id.
OLD_KINETO = _bytes(
    _ev("aten::mm", 0, 10, **{"External id": 5}),  # an unrelated op that happens to carry External id 5
    _ev("aten::relu", 20, 10, **{"External id": 6}),
    _ev("cudaLaunchKernel", 22, 3, cat="cuda_runtime", correlation=8, **{"External id": 6}),
    _ev("relu_kernel", 30, 2, cat="kernel", pid=0, tid=7, correlation=8, **{"External id": 8}),
    _ev("lost_kernel", 40, 4, cat="kernel", pid=0, tid=7, correlation=5, **{"External id": 5}),  # launch missing
)


def test_an_external_id_equal_to_the_correlation_id_is_not_a_link() -> None:
    rows = _rows(OLD_KINETO)
    assert rows["aten::mm"][3:] == (0.0, 0.0)
    assert rows["aten::relu"][3:] == (2.0, 2.0)
    assert rows[UNATTRIBUTED_ROW] == (1, 0.0, 0.0, 4.0, 4.0)


def test_a_distinct_external_id_still_links_a_kernel_without_launch() -> None:
    data = _bytes(_ev("aten::mm", 0, 10, **{"External id": 5}),
                  _ev("mm_kernel", 12, 4, cat="kernel", pid=0, tid=7, correlation=90, **{"External id": 5}))
    assert _rows(data)["aten::mm"][3:] == (4.0, 4.0)


# Defect 2: MTIA device work (category mtia_ccp_events) was drawn but not counted.
MTIA = _bytes(
    _ev("ProfilerStep#0", 0, 100, cat="user_annotation"),
    _ev("aten::add", 5, 20),
    _ev("mtiaLaunchKernel", 10, 5, cat="mtia_runtime", correlation=3),
    _ev("add_kernel", 30, 12, cat="mtia_ccp_events", pid=0, tid=9, correlation=3),
)


def test_mtia_device_work_is_counted(tmp_path: Path) -> None:
    table = build_op_table(read_trace_bytes(MTIA, "t"))
    assert (table.device_work_count, table.device_work_us, table.unattributed_device_count) == (1, 12.0, 0)
    src = tmp_path / "mtia.json"
    src.write_bytes(MTIA)
    run = load_run(import_run(ImportRequest(src), tmp_path / "store", now=NOW))
    (v,) = run.variants
    assert v.time_basis is TimeBasis.DEVICE
    assert {r.name: r.self_device_us for r in v.ops}["aten::add"] == 12.0
    assert run.device is DeviceKind.MTIA  # named, not "unknown" (reportgen.devices.mtia)


# Defect 3: "rank 0 of None"; input shapes left empty although the trace has Input Dims.
def test_rank_without_world_size_and_input_shapes(tmp_path: Path) -> None:
    src = tmp_path / "r.json"
    src.write_bytes(_bytes(
        _ev("aten::mul", 0, 10, **{"Input Dims": [[4, 8], [4, 8]]}),
        _ev("aten::mul", 20, 10, **{"Input Dims": [[2, 3], []]}),
        _ev("aten::mul", 40, 10, **{"Input Dims": [[4, 8], [4, 8]]}),
        _ev("aten::add", 60, 10),
        distributedInfo={"rank": 0},
    ))
    run = load_run(import_run(ImportRequest(src), tmp_path / "store", now=NOW))
    assert not any("None" in n for n in run.notes)
    assert any(n == "r: rank 0 (world size not recorded in the trace)" for n in run.notes)
    shapes = {r.name: r.input_shapes for r in run.variants[0].ops}
    assert shapes == {"aten::mul": "[[4, 8], [4, 8]]; [[2, 3], []]", "aten::add": ""}


def test_times_that_overflow_a_float_leave_the_breakdown_out(tmp_path: Path,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "huge.json"
    src.write_bytes(_bytes(_ev("a", 1e308, 1e308), _ev("k", -1e308, 1e308, cat="kernel", pid=0, tid=7)))
    # The trace reader refuses times beyond 1e18 us (issue 12), so such a trace never reaches the breakdown.
    with pytest.raises(TraceError, match=r"field 'ts' is 1e\+308, beyond 1e\+18 µs; not a real time"):
        import_run(ImportRequest(src), tmp_path / "store", now=NOW)
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())
    assert capfd.readouterr().err == ""  # no numpy overflow warnings printed
