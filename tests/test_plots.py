"""matplotlib figures: reproducible bytes, no metadata that varies, hostile labels, real traces."""

from __future__ import annotations

import struct
from pathlib import Path

from conftest import SHARED_TRACES
from factories import synthetic_run, variant

from reportgen import analysis, plots
from reportgen.analysis import LaneKind
from reportgen.model import VariantStatus
from reportgen.trace import events_in_window, profiler_steps, read_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data[:8] == PNG_MAGIC
    chunks, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        chunks.append((data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]))
        pos += 12 + length
    return chunks


def _png_size(data: bytes) -> tuple[int, int]:
    (_, ihdr), *_ = _png_chunks(data)
    return struct.unpack(">II", ihdr[:8])


def test_bar_chart_is_reproducible_and_carries_no_software_metadata(tmp_path: Path) -> None:
    views = analysis.run_view(synthetic_run()).variants
    plots.bar_chart(views, tmp_path / "a.png", "rmsnorm")
    plots.bar_chart(views, tmp_path / "b.png", "rmsnorm")
    data = (tmp_path / "a.png").read_bytes()
    assert data == (tmp_path / "b.png").read_bytes()
    text_chunks = [body for kind, body in _png_chunks(data) if kind in (b"tEXt", b"iTXt", b"zTXt", b"tIME")]
    assert not [c for c in text_chunks if c.startswith((b"Software", b"Creation"))]
    assert _png_size(data) == (750, int((0.6 + 0.45 * 3 + 0.9) * 100))


def test_labels_with_dollars_and_markup_do_not_break_drawing(tmp_path: Path) -> None:
    """'$' would start matplotlib mathtext and raise on an odd count; names from traces are literal."""
    views = analysis.run_view(synthetic_run(variants=(
        variant("a$b", 10.0), variant("<script>$x_$</script>|y", 5.0), variant(r"$\frac$", 2.0),
        variant("failed $", 1.0, status=VariantStatus.FAILED, error="x"),
    ))).variants
    plots.bar_chart(views, tmp_path / "bars.png", "a$^$b title")
    assert (tmp_path / "bars.png").stat().st_size > 1000


def test_history_chart_is_reproducible(tmp_path: Path) -> None:
    runs = [synthetic_run(run_id=f"r{i}", created_utc=f"2026-12-0{i}T00:00:00Z",
                          times_us={"naive": 100.0 - i, "fused": 50.0, "compiled": 30.0 + i}) for i in range(1, 5)]
    (group,) = analysis.history([analysis.digest(r) for r in runs])
    plots.history_chart(group, tmp_path / "a.png")
    plots.history_chart(group, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert _png_size((tmp_path / "a.png").read_bytes()) == (900, 560)


def test_timeline_of_a_real_rocm_trace_has_runtime_and_device_lanes(tmp_path: Path) -> None:
    trace = read_trace(SHARED_TRACES / "amd_trace.trace.json.gz")
    steps = profiler_steps(trace)
    step = analysis.representative_step(steps)
    if step is None:  # the file has no ProfilerStep: take the whole trace
        start = min(e.start_us for e in trace.events)
        end = max(e.start_us + e.duration_us for e in trace.events)
    else:
        start, end = analysis.iteration_window(trace.events, step.start_us, step.start_us + step.duration_us)
    layout = analysis.timeline_layout(events_in_window(trace, start, end), start, end)
    lanes = [lane for lane, _ in layout.lane_depths]
    assert lanes[:3] == [LaneKind.FRAMEWORK, LaneKind.RUNTIME, LaneKind.DEVICE]
    assert all(0 <= b.start_us <= layout.window_us and b.start_us + b.duration_us <= layout.window_us + 1e-6
               for b in layout.bars)
    plots.timeline_chart(layout, tmp_path / "a.png", "amd step")
    plots.timeline_chart(layout, tmp_path / "b.png", "amd step")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_empty_timeline_still_draws(tmp_path: Path) -> None:
    layout = analysis.timeline_layout([], 0.0, 10.0)
    plots.timeline_chart(layout, tmp_path / "empty.png", "nothing")
    assert _png_size((tmp_path / "empty.png").read_bytes())[0] == 1100
