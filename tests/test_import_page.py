"""Issue 17: an imported run's page says what its figures are (profiler steps found, the trace's own events,
the trace's device and clock), not how reportgen would have timed them; in HTML and in Markdown."""

from __future__ import annotations

import gzip
import html
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from conftest import REAL_TRACES_DIR
from factories import chrome_trace

from reportgen.site import build_site
from reportgen.traces.importer import ImportRequest, import_run

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
# Sentences of a profiled run's timing description: wrong for a trace that reportgen did not time.
PROFILED_WORDING = ("back-to-back calls", "warm-up calls", "compile time is the first call", "not recorded")


def _site_of(src: Path, tmp_path: Path) -> tuple[str, str]:
    store = tmp_path / "store"
    folder = import_run(ImportRequest(src), store, now=NOW)
    out = tmp_path / "site"
    build_site(store, out, "/")
    page = out / "runs" / folder.name
    return (page / "index.html").read_text(encoding="utf-8"), (page / "report.md").read_text(encoding="utf-8")


def _text(page: str) -> str:
    """The page's visible text, tags dropped, entities decoded, white space folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _section(page: str, start: str, end: str) -> str:
    return page[page.index(start):page.index(end, page.index(start))]


def test_imported_run_says_how_many_profiler_steps_each_trace_has(tmp_path: Path) -> None:
    src = tmp_path / "ranks"
    src.mkdir()
    (src / "rank0.json").write_text(json.dumps(chrome_trace(steps=3)))
    no_steps = chrome_trace(steps=1)
    no_steps["traceEvents"] = [e for e in no_steps["traceEvents"] if not e["name"].startswith("ProfilerStep")]
    (src / "rank1.json").write_text(json.dumps(no_steps))
    page, md = _site_of(src, tmp_path)
    text = _text(page)
    for shown in (_section(text, "repetitions", "roofline peak"), _section(text, "Timing", "Speedups")):
        assert "rank0: 3 ProfilerStep# spans" in shown
        assert "rank1: no step markers: the whole trace is one window" in shown
        assert "the trace's own events" in shown
        assert not any(w in shown for w in PROFILED_WORDING), shown
    assert "host clock" in _section(text, "Timing", "Speedups")
    md_reps = next(line for line in md.splitlines() if line.startswith("| repetitions |"))
    assert r"rank0: 3 ProfilerStep\# spans" in md_reps or "rank0: 3 ProfilerStep# spans" in md_reps
    assert "rank1: no step markers: the whole trace is one window" in md_reps
    md_timing = _section(md, "Timing", "## Speedups")
    assert "the trace's own events" in md_timing and "host clock" in md_timing
    assert not any(w in md_reps + md_timing for w in PROFILED_WORDING)
    # The profiled description of a sample is not on the import page at all.
    assert "Each sample is the mean of back-to-back calls" not in page


def test_a_real_cuda_trace_names_its_device_and_clock(tmp_path: Path) -> None:
    page, md = _site_of(REAL_TRACES_DIR / "critical_path.trace.json.gz", tmp_path)
    timing = _section(_text(page), "Timing", "Speedups")
    assert "cuda" in timing and "device kernel and copy durations" in timing
    assert "critical_path" in timing
    assert "device kernel and copy durations" in _section(md, "Timing", "## Speedups")


def test_a_real_cpu_trace_says_its_times_are_host_cpu_time(tmp_path: Path) -> None:
    page, md = _site_of(REAL_TRACES_DIR / "cpu_only.trace.json.gz", tmp_path)
    timing = _section(_text(page), "Timing", "Speedups")
    assert "host CPU time" in timing and "device kernel and copy durations" not in timing


def test_names_in_the_import_description_are_escaped(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    evil = "a<b>|c*d"  # file names become variant names through safe_component: build the site from the store
    (src / "x.json").write_text(json.dumps(chrome_trace(steps=2)))
    store = tmp_path / "store"
    folder = import_run(ImportRequest(src), store, now=NOW)
    run_json = folder / "run.json"
    data = json.loads(run_json.read_text())
    data["variants"][0]["name"] = evil
    run_json.write_text(json.dumps(data))
    out = tmp_path / "site"
    build_site(store, out, "/")
    page = (out / "runs" / folder.name / "index.html").read_text(encoding="utf-8")
    md = (out / "runs" / folder.name / "report.md").read_text(encoding="utf-8")
    assert "a<b>" not in page and "a&lt;b&gt;|c*d: 2 ProfilerStep# spans" in page
    md_reps = next(line for line in md.splitlines() if line.startswith("| repetitions |"))
    assert r"a\<b\>\|c\*d: 2 ProfilerStep" in md_reps
    assert r"a\<b\>\|c\*d: 2 ProfilerStep" in _section(md, "Timing", "## Speedups")


def test_gzip_trace_with_steps_describes_samples_as_steps(tmp_path: Path) -> None:
    src = tmp_path / "run.pt.trace.json.gz"
    src.write_bytes(gzip.compress(json.dumps(chrome_trace(steps=4)).encode()))
    page, md = _site_of(src, tmp_path)
    text = _text(page)
    assert "per profiler step (n = 4 steps" in _section(text, "Variants", "Downloads")
    assert "per profiler step (n = 4 steps" in _section(md, "## Variants", "## Downloads")
