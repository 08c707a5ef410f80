"""Charts: reproducible bytes, no metadata that varies, hostile labels, real traces, geometry that matches the data."""

from __future__ import annotations

import math
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import REAL_TRACES_DIR
from factories import synthetic_run, variant

from reportgen.analysis.history import HistoryGroup, digest, history
from reportgen.analysis.run_view import run_view
from reportgen.analysis.timeline import (
    TimelineBar,
    TimelineLayout,
    TimelineTrack,
    iteration_window,
    representative_step,
    timeline_layout,
)
from reportgen.devices.lanes import Lane
from reportgen.model.run import VariantStatus
from reportgen.render import bars, drawing, history_plot, style, timeline_plot
from reportgen.traces.reader import events_in_window, profiler_steps, read_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG = "{http://www.w3.org/2000/svg}"


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


def _svg(path: Path) -> ET.Element:
    """Parse an SVG file (fails on anything that is not well-formed XML) and refuse active content."""
    root = ET.fromstring(path.read_bytes())
    assert root.tag == f"{SVG}svg"
    tags = {el.tag.split("}")[-1] for el in root.iter()}
    assert not tags & {"script", "foreignObject", "iframe", "a"}, tags
    assert not [k for el in root.iter() for k in el.attrib if k.lower().startswith("on")]
    return root


def _texts(root: ET.Element) -> list[str]:
    return ["".join(el.itertext()) for el in root.iter(f"{SVG}text")]


def test_bar_chart_is_reproducible_well_formed_and_sized_by_its_rows(tmp_path: Path) -> None:
    views = run_view(synthetic_run()).variants
    bars.bar_chart(views, tmp_path / "a.svg", "rmsnorm")
    bars.bar_chart(views, tmp_path / "b.svg", "rmsnorm")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    root = _svg(tmp_path / "a.svg")
    assert (root.get("width"), root.get("height")) == ("750", str(60 + 45 * 3 + 90))
    texts = _texts(root)
    assert {"naive", "fused", "compiled", "rmsnorm"} <= set(texts)
    assert [f"{v.timing.median_us:,.1f} µs" for v in views] == [t for t in texts if t.endswith(" µs")]


def test_bar_lengths_and_error_bars_follow_the_medians_and_intervals() -> None:
    views = run_view(synthetic_run(times_us={"naive": 100.0, "fused": 60.0, "compiled": 30.0})).variants
    chart = bars.bar_layout(views, "t")
    widths = {b.label: b.width_px for b in chart.bars}
    assert widths["fused"] / widths["naive"] == pytest.approx(0.6, rel=1e-3)
    assert widths["compiled"] / widths["naive"] == pytest.approx(0.3, rel=1e-3)
    scale = widths["naive"] / views[0].timing.median_us  # px per µs
    for b, v in zip(chart.bars, views, strict=True):
        assert b.err_from_px == pytest.approx(chart.plot_left_px + v.timing.ci_low_us * scale, abs=0.02)
        assert b.err_to_px == pytest.approx(chart.plot_left_px + v.timing.ci_high_us * scale, abs=0.02)
        assert b.err_from_px <= chart.plot_left_px + b.width_px <= b.err_to_px
        assert chart.plot_left_px + b.width_px < chart.plot_right_px
    ys = [b.y_px for b in chart.bars]
    assert ys == sorted(ys) and chart.plot_top_px < ys[0] and ys[-1] < chart.plot_bottom_px
    # Every tick sits at its value on the same scale.
    for t in chart.ticks:
        assert float(t.label.replace(",", "")) * scale + chart.plot_left_px == pytest.approx(t.x_px, abs=0.02)


def test_failed_variant_gets_no_bar_and_says_why() -> None:
    views = run_view(synthetic_run(variants=(
        variant("naive", 10.0), variant("compiled", 1.0, status=VariantStatus.FAILED, error="OOM")))).variants
    failed = bars.bar_layout(views, "t").bars[1]
    assert (failed.width_px, failed.err_from_px, failed.value_text) == (0.0, None, "failed: no timing")


@pytest.mark.parametrize(("top", "expected", "decimals"), [
    (130.0, [0, 25, 50, 75, 100, 125], 0),
    (13.0, [0, 2.5, 5, 7.5, 10, 12.5], 1),
    (1.3e6, [0, 250000, 500000, 750000, 1000000, 1250000], 0),
    (0.013, [0, 0.0025, 0.005, 0.0075, 0.01, 0.0125], 4),
    (5.0, [0, 1, 2, 3, 4, 5], 0),
    (0.0, [0], 0),
])
def test_nice_ticks(top: float, expected: list[float], decimals: int) -> None:
    ticks, d = style.nice_ticks(top)
    assert ticks == pytest.approx(expected) and d == decimals
    assert len(ticks) <= 7 and ticks[-1] <= top * (1 + 1e-9) + (top == 0)


def test_nice_ticks_properties() -> None:
    for exponent in range(-6, 9):
        for top in (1.0, 1.7, 3.3, 7.9, 9.99):
            value = top * 10.0**exponent
            ticks, decimals = style.nice_ticks(value)
            step = ticks[1] - ticks[0]
            mantissa = step / 10.0 ** math.floor(math.log10(step) + 1e-9)
            assert min(abs(mantissa - m) for m in (1, 2, 2.5, 5)) < 1e-6
            assert 2 <= len(ticks) <= 7 and ticks[-1] <= value * (1 + 1e-9)
            labels = [f"{t:,.{decimals}f}" for t in ticks]
            assert len(set(labels)) == len(labels), labels  # enough decimals to tell ticks apart


def test_hostile_labels_are_text_in_the_svg(tmp_path: Path) -> None:
    """Names come from traces and users: markup stays text, '$' is not mathtext, long names are clipped."""
    evil = "<script>alert(1)</script>|x"
    views = run_view(synthetic_run(variants=(
        variant("a$b", 10.0), variant(evil, 5.0), variant(r"$\frac$ & \"q\"", 2.0), variant("x" * 80, 1.0),
        variant("failed $", 1.0, status=VariantStatus.FAILED, error="x"),
    ))).variants
    bars.bar_chart(views, tmp_path / "bars.svg", "a$^$b <title>")
    root = _svg(tmp_path / "bars.svg")
    texts = _texts(root)
    assert {"a$b", evil, r"$\frac$ & \"q\"", "x" * 31 + "…", "a$^$b <title>"} <= set(texts)
    assert b"<script>" not in (tmp_path / "bars.svg").read_bytes()


def test_png_charts_have_reproducible_bytes_and_no_metadata(tmp_path: Path) -> None:
    for name in ("a.png", "b.png"):
        with drawing.styled_figure(4.0, 2.0) as fig:
            fig.subplots(1, 1).plot([0, 1, 2], [3, 1, 2], label="x")
            drawing.save_png(fig, tmp_path / name)
    data = (tmp_path / "a.png").read_bytes()
    assert data == (tmp_path / "b.png").read_bytes()
    assert _png_size(data) == (400, 200)
    assert not {kind for kind, _ in _png_chunks(data)} & {b"tEXt", b"tIME", b"iTXt", b"zTXt"}


def _group(n: int, times: dict[str, float] | None = None, drift: float = 1.0) -> HistoryGroup:
    runs = [synthetic_run(run_id=f"r{i:04d}", created_utc=f"2026-12-01T{i // 60:02d}:{i % 60:02d}:00Z",
                          times_us={k: v * (drift ** i) for k, v in (times or {"naive": 100.0, "fused": 50.0}).items()})
            for i in range(n)]
    (group,) = history([digest(r) for r in runs])
    return group


def test_history_chart_is_reproducible_well_formed_svg(tmp_path: Path) -> None:
    runs = [synthetic_run(run_id=f"r{i}", created_utc=f"2026-12-0{i}T00:00:00Z",
                          times_us={"naive": 100.0 - i, "fused": 50.0, "compiled": 30.0 + i}) for i in range(1, 5)]
    (group,) = history([digest(r) for r in runs])
    history_plot.history_chart(group, tmp_path / "a.svg")
    history_plot.history_chart(group, tmp_path / "b.svg")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    root = _svg(tmp_path / "a.svg")
    assert (root.get("width"), root.get("height")) == ("900", "560")
    assert {"naive", "fused", "compiled", "median µs per call", "speedup vs baseline (×)"} <= set(_texts(root))


def test_history_chart_places_each_point_where_its_value_is() -> None:
    """A slower run is drawn higher; the error bar spans the interval; the speedup panel has its 1.0 line."""
    group = _group(5, drift=1.1)
    chart = history_plot.history_layout(group)
    time_panel, gain_panel = chart.panels
    naive = time_panel.series[0]
    ys = [m.y_px for m in naive.markers]
    assert ys == sorted(ys, reverse=True) and len(set(ys)) == 5  # medians grow: each point higher than the last
    xs = [m.x_px for m in naive.markers]
    assert xs == sorted(xs) and chart.left_px < xs[0] and xs[-1] < chart.right_px
    assert all(m.err_high_px <= m.y_px <= m.err_low_px for m in naive.markers)
    assert time_panel.top_px <= min(ys) and max(ys) <= time_panel.bottom_px
    assert gain_panel.reference_y_px is not None and gain_panel.top_px < gain_panel.reference_y_px < gain_panel.bottom_px
    fused_gain = [m.y_px for m in gain_panel.series[1].markers]
    assert all(y < gain_panel.reference_y_px for y in fused_gain)  # fused is 2x faster: above the 1.0 line
    assert "run r0004" in naive.markers[-1].tooltip


def test_history_chart_of_many_runs_is_a_band_not_error_bars(tmp_path: Path) -> None:
    group = _group(history_plot.BAND_FROM_POINTS + 1)
    chart = history_plot.history_layout(group)
    naive = chart.panels[0].series[0]
    assert naive.markers == () and len(naive.band.split()) == 2 * (history_plot.BAND_FROM_POINTS + 1)
    history_plot.history_chart(group, tmp_path / "h.svg")
    assert len(_svg(tmp_path / "h.svg").findall(f".//{SVG}circle")) == 0


def test_history_chart_escapes_hostile_names_and_steps(tmp_path: Path) -> None:
    odd = "<script>alert(1)</script>\x1b&"
    runs = [synthetic_run(run_id=f"r{i}", created_utc=f"2026-12-0{i}T00:00:00Z",
                          times_us={odd: 100.0, "fused": 50.0}) for i in range(1, 4)]
    (group,) = history([digest(r) for r in runs])
    history_plot.history_chart(group, tmp_path / "h.svg")
    data = (tmp_path / "h.svg").read_bytes()
    assert b"<script>" not in data
    assert style.clip_label(style.svg_text(odd)) in _texts(_svg(tmp_path / "h.svg"))


def _timeline(name: str = "aten::mul", n: int = 3) -> TimelineLayout:
    bars = tuple(TimelineBar(Lane.FRAMEWORK, 0, 10.0 * i, 8.0, f"{name}{i}") for i in range(n))
    track = TimelineTrack(Lane.FRAMEWORK, "", "framework ops", 1)
    return TimelineLayout(0.0, 10.0 * n, "ProfilerStep#3", bars, (track,), n)


def test_timeline_of_a_real_rocm_trace_has_runtime_and_device_lanes(tmp_path: Path) -> None:
    trace = read_trace(REAL_TRACES_DIR / "amd_trace.trace.json.gz")
    steps = profiler_steps(trace)
    step = representative_step(steps)
    if step is None:  # the file has no ProfilerStep: take the whole trace
        start = min(e.start_us for e in trace.events)
        end = max(e.start_us + e.duration_us for e in trace.events)
    else:
        start, end = iteration_window(trace.events, step.start_us, step.start_us + step.duration_us)
    layout = timeline_layout(events_in_window(trace, start, end), start, end)
    lanes = list(layout.lanes)
    assert lanes[:3] == [Lane.FRAMEWORK, Lane.RUNTIME, Lane.DEVICE]
    assert all(0 <= b.start_us <= layout.window_us and b.start_us + b.duration_us <= layout.window_us + 1e-6
               for b in layout.bars)
    timeline_plot.timeline_chart(layout, tmp_path / "a.svg", "amd step")
    timeline_plot.timeline_chart(layout, tmp_path / "b.svg", "amd step")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    texts = _texts(_svg(tmp_path / "a.svg"))
    assert {"framework ops · thread 597913", "framework ops · thread 598009", "runtime · thread 597913",
            "device · stream 0", "amd step"} <= set(texts)


def test_timeline_bytes_do_not_depend_on_the_chart_drawn_before(tmp_path: Path) -> None:
    """A process draws many charts: nothing one chart leaves behind may leak into the next."""
    big = _timeline("aten::something_long_", 12)
    small = _timeline("k", 2)
    timeline_plot.timeline_chart(small, tmp_path / "fresh.svg", "small")
    timeline_plot.timeline_chart(big, tmp_path / "big.svg", "big")
    timeline_plot.timeline_chart(small, tmp_path / "after-big.svg", "small")
    timeline_plot.timeline_chart(timeline_layout([], 0.0, 10.0), tmp_path / "empty.svg", "empty")
    timeline_plot.timeline_chart(small, tmp_path / "after-empty.svg", "small")
    fresh = (tmp_path / "fresh.svg").read_bytes()
    assert (tmp_path / "after-big.svg").read_bytes() == fresh
    assert (tmp_path / "after-empty.svg").read_bytes() == fresh
    assert "no events in this window" not in _texts(_svg(tmp_path / "after-empty.svg"))


def test_timeline_svg_has_no_date_or_software_and_escapes_op_names(tmp_path: Path) -> None:
    timeline_plot.timeline_chart(_timeline("<script>alert(1)</script>&", 3), tmp_path / "t.svg", "<b>t</b>")
    data = (tmp_path / "t.svg").read_bytes()
    root = _svg(tmp_path / "t.svg")
    assert b"<dc:date>" not in data and b"Matplotlib" not in data
    assert root.get("width") == "1100"  # the page shows it 1,100 px wide
    texts = _texts(root)
    assert "<b>t</b>" in texts
    assert [t for t in texts if "script" in t] == [f"<script>alert(1)</script>&{i}" for i in range(3)]
    assert b"<script>" not in data and b"<b>" not in data  # escaped in the file, text in the parsed tree


def test_empty_timeline_still_draws(tmp_path: Path) -> None:
    layout = timeline_layout([], 0.0, 10.0)
    timeline_plot.timeline_chart(layout, tmp_path / "empty.svg", "nothing")
    assert "no events in this window" in _texts(_svg(tmp_path / "empty.svg"))


def test_history_ticks_show_seconds_only_when_minutes_collide() -> None:
    assert history_plot._tick_times(["2026-11-30T07:55:01Z", "2026-11-30T07:56:00Z"]) == ["2026-11-30 07:55", "2026-11-30 07:56"]
    assert history_plot._tick_times(["2026-11-30T07:55:01Z", "2026-11-30T07:55:42Z"]) == ["2026-11-30 07:55:01",
                                                                                    "2026-11-30 07:55:42"]


def test_control_characters_and_surrogates_never_make_an_svg_unreadable(tmp_path: Path) -> None:
    """XML 1.0 forbids most C0 controls: one ESC in a name from a trace would break the whole image."""
    odd = "v\x1b[31m\x01\ud800\ufffe|x"
    views = run_view(synthetic_run(variants=(variant(odd, 10.0), variant("ok", 5.0)))).variants
    bars.bar_chart(views, tmp_path / "bars.svg", f"title {odd}")
    assert "v\ufffd[31m\ufffd\ufffd\ufffd|x" in _texts(_svg(tmp_path / "bars.svg"))
    layout = _timeline(odd + "op", 3)
    timeline_plot.timeline_chart(layout, tmp_path / "t.svg", f"t {odd}")
    texts = _texts(_svg(tmp_path / "t.svg"))
    assert f"t {style.svg_text(odd)}" in texts


def test_tiny_and_zero_scales_draw() -> None:
    assert style.nice_ticks(5e-324) == ([0.0], 0)
    views = run_view(synthetic_run(times_us={"naive": 1e-320, "fused": 0.0})).variants
    chart = bars.bar_layout(views, "t")
    assert [t.label for t in chart.ticks] == ["0"]


def test_wide_characters_get_a_wider_label_margin() -> None:
    assert style.text_width_px("中文名字", 12.0) == pytest.approx(4 * 12.0)
    assert style.text_width_px("abcd", 12.0) == pytest.approx(4 * 12.0 * style.CHAR_WIDTH_EM)


def test_log_history_axis_has_plain_tick_labels() -> None:
    """Medians spanning five decades: a log axis, labelled with plain numbers at each decade."""
    group = _group(4, times={"naive": 3.0}, drift=30.0)
    panel = history_plot.history_layout(group).panels[0]
    labels = [t.label for t in panel.ticks if t.label]
    assert "10,000" in labels and "100" in labels and not [t for t in labels if "$" in t]
    assert panel.y_label == "median µs per call (log scale)"
    heights = {t.label: t.y_px for t in panel.ticks if t.label}
    assert heights["10,000"] < heights["100"]  # higher values higher up
    ys = [m.y_px for m in panel.series[0].markers]
    assert ys == sorted(ys, reverse=True)
    steps = [b - a for a, b in zip(sorted(ys), sorted(ys)[1:], strict=False)]  # ×30 per run: equal spacing on a log axis
    assert max(steps) - min(steps) < 0.1


def test_log_tick_text() -> None:
    assert [history_plot._log_tick(v) for v in (1e5, 20.0, 1.0, 0.5, 0.002)] == ["100,000", "20", "1", "0.5", "0.002"]


def _many_tiny_bars(n: int) -> TimelineLayout:
    bars = tuple(TimelineBar(Lane.DEVICE, 0, 0.01 * i, 0.005, f"k{i}") for i in range(n))
    return TimelineLayout(0.0, 0.01 * n, "ProfilerStep#1", bars, (TimelineTrack(Lane.DEVICE, "", "device", 1),), n)


def test_a_huge_timeline_merges_sub_pixel_bars_and_says_so(tmp_path: Path) -> None:
    """A trace of many events must not become an SVG of as many rectangles (1e6 events made 62 MB)."""
    layout = _many_tiny_bars(50_000)
    timeline_plot.timeline_chart(layout, tmp_path / "t.svg", "huge")
    size = (tmp_path / "t.svg").stat().st_size
    assert size < 400_000, size
    text = "".join(_svg(tmp_path / "t.svg").itertext())
    assert "50,000 events drawn as" in text and "narrower than a pixel merged" in text
    drawn, note = timeline_plot.timeline_bars(layout, {(Lane.DEVICE, "", 0): 0})
    assert len(drawn) <= timeline_plot.MAX_TIMELINE_BARS and note
    # merged bars cover exactly the span the events covered
    assert drawn[0].start_us == 0.0 and math.isclose(drawn[-1].start_us + drawn[-1].duration_us, 0.01 * 49_999 + 0.005)


def test_a_small_timeline_draws_every_bar_unchanged() -> None:
    layout = _many_tiny_bars(timeline_plot.MAX_TIMELINE_BARS)
    drawn, note = timeline_plot.timeline_bars(layout, {(Lane.DEVICE, "", 0): 0})
    assert note == "" and [(b.start_us, b.duration_us, b.name) for b in drawn] == \
        [(b.start_us, b.duration_us, b.name) for b in layout.bars]


def test_the_bar_cap_keeps_the_widest_when_merging_is_not_enough() -> None:
    bars = tuple(TimelineBar(Lane.DEVICE, 0, 10.0 * i, 5.0 + i % 7, f"k{i}") for i in range(300))
    layout = TimelineLayout(0.0, 3000.0, "s", bars, (TimelineTrack(Lane.DEVICE, "", "device", 1),), 300)
    drawn, note = timeline_plot.timeline_bars(layout, {(Lane.DEVICE, "", 0): 0}, max_bars=100)
    assert len(drawn) == 100 and "200 narrower ones left out" in note
    assert min(b.duration_us for b in drawn) >= max(b.duration_us for b in bars) - 2
