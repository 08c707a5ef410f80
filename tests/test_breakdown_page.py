"""The breakdown partials on a built run page: figures from run.json, every data value escaped."""

from __future__ import annotations

import html
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from conftest import REAL_TRACES_DIR

from reportgen import site
from reportgen.analysis.run_view import run_view
from reportgen.store.loader import load_run
from reportgen.text.formatting import fmt_pct, fmt_us
from reportgen.traces.importer import ImportRequest, import_run

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def _build(src: Path, tmp_path: Path) -> tuple[str, str, Path]:
    store = tmp_path / "store"
    folder = import_run(ImportRequest(src), store, now=NOW)
    out = tmp_path / "site"
    site.build_site(store, out, "/")
    page = out / "runs" / folder.name
    return (page / "index.html").read_text(encoding="utf-8"), (page / "report.md").read_text(encoding="utf-8"), folder


def test_a_folder_of_shared_traces_shows_ranks_steps_and_kernels(tmp_path: Path) -> None:
    page, md, folder = _build(REAL_TRACES_DIR, tmp_path)
    run = load_run(folder)
    crit = run.variant("critical_path")
    assert crit is not None and crit.breakdown is not None
    b = crit.breakdown
    assert '<section id="breakdowns">' in page and "## Breakdowns" in md
    ranks = page.split('<table class="num ranks">')[1].split("</table>")[0]
    straggler = max(((v.name, v.breakdown) for v in run.variants if v.breakdown),
                    key=lambda t: (t[1].steps and sorted(s.wall_us for s in t[1].steps)[len(t[1].steps) // 2]
                                   or t[1].whole.wall_us))[0]
    assert ranks.count("straggler</span>") == 1 and f"straggler</span> {straggler}</td>" in ranks
    rs = run_view(run).ranks
    assert rs is not None and rs.straggler == straggler
    for line in rs.lines:  # signed: how much slower or faster than the median rank
        assert f"<td>{'+' if line.over_median > 0 else ''}{fmt_pct(line.over_median)}</td>" in ranks
        sign = "+" if line.over_median > 0 else ""
        assert f"| {sign}{fmt_pct(line.over_median)} |" in md
    # Busy and summed device time both shown, with what each is
    assert f"busy {fmt_us(b.device_busy_us)} µs</strong> (union over streams)" in page
    assert f"summed over streams {fmt_us(b.device_sum_us)} µs" in page
    assert f"busy {fmt_us(b.device_busy_us)} µs** (union over streams)" in md
    # Every kernel of the trace is a row, its name escaped
    for k in b.kernels:
        assert f"<code>{html.escape(k.name, quote=True)}</code>" in page
    assert "fft2d_c2r_32x32&lt;float" in page and "fft2d_c2r_32x32<float" not in page
    assert "| ProfilerStep\\#1 |" in md or "| ProfilerStep#1 |" in md
    # The page needs run.json only: the figures on it are the stored ones
    stored = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    amd = next(v for v in stored["variants"] if v["name"] == "amd_trace")
    assert fmt_us(amd["breakdown"]["steps"][0]["runtime_us"]) in page


HOSTILE = {"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "cpu_op", "name": "<script>alert('op')</script>", "ts": 5, "dur": 20, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 6, "dur": 2, "pid": 1, "tid": 1,
     "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "<img src=x onerror=alert(1)>|**k**", "ts": 10, "dur": 5, "pid": 0,
     "tid": 7, "args": {"correlation": 1}},
]}


def test_hostile_kernel_and_op_names_are_escaped(tmp_path: Path) -> None:
    src = tmp_path / "hostile.json"
    src.write_text(json.dumps(HOSTILE), encoding="utf-8")
    page, md, _ = _build(src, tmp_path)
    section = page.split('<section id="breakdowns">')[1].split("</section>")[0]
    assert "<img" not in section and "<script>" not in section
    assert "&lt;img src=x onerror=alert(1)&gt;|**k**" in section
    assert "&lt;script&gt;alert(&#39;op&#39;)&lt;/script&gt;" in section
    md_part = md.split("## Breakdowns")[1].split("## Downloads")[0]
    assert not re.search(r"(?<!\\)<(img|script)", md_part)  # each < is backslash-escaped: inert in GFM
    assert "\\<img src" in md_part
    assert "\\|\\*\\*k\\*\\*" in md_part  # the pipe cannot end the table cell, the stars cannot bold
