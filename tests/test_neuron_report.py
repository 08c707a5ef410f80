"""The "Device evidence" part of a run page: hostile values stay text, and runs without evidence show nothing new."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import markupsafe
from factories import synthetic_run, write_synthetic
from hostile import ALL_PAYLOADS, PAYLOADS
from test_xss import assert_markdown_is_inert

from reportgen.model.run import CompileInfo, DeviceEvidence, DeviceKind
from reportgen.site import build_site

RUN_ID = "20261130T000000Z-neuron-evil-abc123"
PLAIN_ID = "20261130T000001Z-cpu-plain-abc123"
CPU_COMPILED_ID = "20261130T000002Z-cpu-compiled-abc123"


def _hostile_neuron_run():  # type: ignore[no-untyped-def]
    run = synthetic_run(run_id=RUN_ID, device=DeviceKind.NEURON)
    evidence = DeviceEvidence(timing_source=ALL_PAYLOADS, summary={"total_time": 0.003, "hbm_read_bytes": 2048.0,
                                                                  "hbm_write_bytes": 2048.0,
                                                                  f"{PAYLOADS[0]}_engine_active_time_percent": 5.0},
                              counters_per_step={"nc_exec_running": 3.0, PAYLOADS[1]: 1.0}, profiled_steps=2,
                              tool=PAYLOADS[5], notes=PAYLOADS)
    info = CompileInfo(graph_count=2, graph_break_count=1, break_reasons=PAYLOADS[:4], neff_count=3,
                       fallback_ops=PAYLOADS[4:9], source=ALL_PAYLOADS)
    variants = tuple(replace(v, device_evidence=evidence, compile_info=info) for v in run.variants)
    env = replace(run.environment, device_extras={PAYLOADS[2]: PAYLOADS[3], "warning": ALL_PAYLOADS})
    return replace(run, variants=variants, environment=env)


def test_device_evidence_is_escaped_in_html_and_markdown(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_synthetic(store, _hostile_neuron_run())
    write_synthetic(store, synthetic_run(run_id=PLAIN_ID))
    build_site(store, tmp_path / "site", "/", jobs=1)
    page = (tmp_path / "site" / "runs" / RUN_ID / "index.html").read_text()
    section = page.split('<section id="device-evidence">', 1)[1].split("</section>", 1)[0]
    for p in PAYLOADS:
        assert str(markupsafe.escape(p)) in section, p
    assert "<script>window.__pwned" not in page and "<svg onload" not in page
    # synthetic variants move 2 KiB per call at minimum; 4 KiB over 2 steps is 1.00x
    assert "<td>2.0 KiB</td><td><strong>1.00×</strong></td>" in section
    md = (tmp_path / "site" / "runs" / RUN_ID / "report.md").read_text()
    assert "## Device evidence" in md
    assert_markdown_is_inert(md)
    plain_html = (tmp_path / "site" / "runs" / PLAIN_ID / "index.html").read_text()
    plain_md = (tmp_path / "site" / "runs" / PLAIN_ID / "report.md").read_text()
    assert "device-evidence" not in plain_html and "Device evidence" not in plain_md


def test_graphs_and_breaks_on_the_cpu_without_neuron_columns(tmp_path: Path) -> None:
    run = synthetic_run(run_id=CPU_COMPILED_ID)
    info = CompileInfo(graph_count=2, graph_break_count=1, break_reasons=("Failed to trace builtin operator",),
                       source="torch._dynamo.utils.counters")
    variants = tuple(replace(v, compile_info=info) if v.name == "compiled" else v for v in run.variants)
    store = tmp_path / "store"
    write_synthetic(store, replace(run, variants=variants))
    build_site(store, tmp_path / "site", "/", jobs=1)
    md = (tmp_path / "site" / "runs" / CPU_COMPILED_ID / "report.md").read_text()
    html = (tmp_path / "site" / "runs" / CPU_COMPILED_ID / "index.html").read_text()
    assert "### Graphs and graph breaks (torch.compile)" in md
    assert "| compiled | 2 | 1 | Failed to trace builtin operator |" in md
    assert "NEFF" not in md and "NEFF" not in html and "Adaptive Eager" not in md
    assert '<td class="text name">compiled</td><td>2</td><td>1</td><td class="text">Failed to trace builtin operator</td>' \
        in html
    assert_markdown_is_inert(md, payloads_shown=False)
