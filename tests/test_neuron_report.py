"""The "Device evidence" part of a run page: hostile values stay text, ratios read as percentages, an eager import.

The eager import is a profile_output/ folder with several NEFFs and a fake neuron-explorer that has
no Parquet and prints a log line before a summary-json keyed by node, with the real counter names
(tests/stand_ins/fake_tools.py): not a captured Trainium run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import markupsafe
import pytest
from factories import synthetic_run, write_synthetic
from hostile import ALL_PAYLOADS, PAYLOADS
from stand_ins import fake_tools
from test_xss import assert_markdown_is_inert

from reportgen.model.run import CompileInfo, DeviceEvidence, DeviceKind
from reportgen.site import build_site
from reportgen.store.loader import load_run
from reportgen.traces.importer import ImportRequest, import_run

RUN_ID = "20261130T000000Z-neuron-evil-abc123"
PLAIN_ID = "20261130T000001Z-cpu-plain-abc123"
CPU_COMPILED_ID = "20261130T000002Z-cpu-compiled-abc123"


def _hostile_neuron_run():  # type: ignore[no-untyped-def]
    run = synthetic_run(run_id=RUN_ID, device=DeviceKind.NEURON)
    evidence = DeviceEvidence(timing_source=ALL_PAYLOADS, summary={"total_time": 0.003, "hbm_read_bytes": 2048.0,
                                                                  "hbm_write_bytes": 2048.0,
                                                                  f"{PAYLOADS[0]}_engine_active_time_percent": 0.05},
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


def _eager_profile_output(root: Path, neffs: int) -> Path:
    """One TorchNeuron session of an eager capture: one NEFF (and its NTFF) per op, trace.json beside them."""
    session = root / "profile_output" / "i-0eager_pid_11" / "20261130_120000"
    session.mkdir(parents=True)
    events = [{"ph": "X", "name": "ProfilerStep#0", "cat": "user_annotation", "ts": 0, "dur": 900, "pid": 1, "tid": 1,
               "args": {}}]
    events += [{"ph": "X", "name": "aten::mul", "cat": "cpu_op", "ts": 10 + 100 * i, "dur": 50, "pid": 1, "tid": 1,
                "args": {"External id": i + 1}} for i in range(neffs)]
    (session / "trace.json").write_text(json.dumps({"traceEvents": events}))
    for i in range(neffs):
        (session / f"neff_{i:04x}_vnc_0.neff").write_bytes(b"stand-in")
        (session / f"profile_nc_0_session_{i}.ntff").write_bytes(b"stand-in")
    return root / "profile_output"


def test_eager_import_counts_every_neff_record_and_ratios_read_as_percent(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    records = [fake_tools.summary_record(t, 1000 * (i + 1), 500, vector_engine_active_time_percent=0.96,
                                         mbu_estimated_percent=0.25, dma_transfer_count=3)
               for i, t in enumerate((0.0001, 0.0002, 0.0003))]
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_explorer(bin_dir, {"i-0eager_pid_11": {
        "summary_json": fake_tools.keyed_by_node(*records), "events": {"nc_exec_running": 3, "nrt_model_submit": 3},
        "log_lines": ['time="2026-11-30T12:00:00Z" level=info msg="Processed 3 NEFF/NTFF pairs"']}})
    monkeypatch.setenv("PATH", fake_tools.path_with(bin_dir))
    store = tmp_path / "store"
    folder = import_run(ImportRequest(_eager_profile_output(tmp_path, 3), "eager", "auto"), store,
                        now=datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc))
    run = load_run(folder)
    (variant,) = run.variants
    ev = variant.device_evidence
    assert ev is not None and ev.profiled_steps == 1
    assert ev.summary["total_time"] == pytest.approx(0.0006) and ev.summary["dma_transfer_count"] == 9.0
    assert ev.summary["hbm_read_bytes"] == 6000.0 and ev.summary["hbm_write_bytes"] == 1500.0
    assert ev.summary["vector_engine_active_time_percent"] == pytest.approx(0.96)  # a ratio, stored as one
    assert ev.summary["mbu_estimated_percent"] == pytest.approx(0.25)
    assert ev.notes[0].startswith("device summary from neuron-explorer summary-json: 3 records summed")
    assert "skipped 1 line(s) printed before the JSON (log lines)" in ev.notes
    assert f"records: {fake_tools.NODE}#0: total_time 0.0001 s; {fake_tools.NODE}#1: total_time 0.0002 s; " \
           f"{fake_tools.NODE}#2: total_time 0.0003 s" in ev.notes
    assert "total_active_time" in ev.timing_source and "idle gaps excluded" in ev.timing_source
    assert sorted(a.path.rsplit("/", 1)[-1] for a in variant.artifacts if a.kind == "neff") == [
        "neff_0000_vnc_0.neff", "neff_0001_vnc_0.neff", "neff_0002_vnc_0.neff"]
    build_site(store, tmp_path / "site", "/", jobs=1)
    page = (tmp_path / "site" / "runs" / run.run_id / "index.html").read_text()
    md = (tmp_path / "site" / "runs" / run.run_id / "report.md").read_text()
    section = page.split('<section id="device-evidence">', 1)[1].split("</section>", 1)[0]
    assert "vector 96.0 %" in section and "vector 96.0 %" in md
    assert "<td>25.0 %</td></tr>" in section  # mbu_estimated_percent 0.25
    assert "9600" not in section and "96.0 %" in section
