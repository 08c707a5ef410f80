"""Perfetto files kept with a Trainium run, the commands that open its profile, the runtime's and the explorer's
versions in the environment, and the legacy json's system profile read in its documented layout.

Against stand-ins (tests/stand_ins/fake_tools.py): the fake explorer writes the .pftrace names the SDK documents
(``tools/neuron-explorer/view-perfetto.rst``) into the folder it runs in, and ``--version`` prints a made-up line
(what the real one prints is not documented); the fake ``dpkg-query`` behaves as dpkg's does. The legacy json
fixtures are written from the SDK's documented example (tests/data/neuron/README.md). Nothing here ran on Trainium.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import test_neuron_backend as backend_tests
from conftest import ROOT
from stand_ins import fake_tools

from reportgen.devices.neuron import explorer, hardware, perfetto, versions
from reportgen.store.loader import load_store
from reportgen.text.markdown import md_escape

stand_in = backend_tests.stand_in  # the stand-in torch_neuronx and fake Neuron tools, as the backend's tests use them
neuron_tools = backend_tests.neuron_tools
LEGACY = ROOT / "tests" / "data" / "neuron" / "legacy-json"
RUNTIME_DEB = "2.30.51.0"  # the inf2 capture's runtime (tests/data/neuron/), as a package version: assumed spelling
EXPLORER_LINE = "neuron-explorer 2.31.0 (made up: the real output is not documented)"


def _which_in(bin_dir: Path):  # type: ignore[no-untyped-def]
    return lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None


def _session(root: Path) -> Path:
    session = root / "i-0abc_pid_1" / "20261130_000000"
    session.mkdir(parents=True)
    (session / "profile_nc_0_session_0.ntff").write_bytes(b"ntff")
    (session / "neff_1_vnc_0.neff").write_bytes(b"neff")
    return session


def test_perfetto_files_kept_with_the_run_and_the_page_opens_the_profile(  # type: ignore[no-untyped-def]
        stand_in, neuron_tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reportgen.commands import profile_request
    from reportgen.profile import command as profile
    from reportgen.site import build_site

    naive = {**backend_tests._variant_spec(3, 7), "perfetto": {"models": ["11", "12"], "bytes": 64}}  # eager: one model per op
    fused = {**backend_tests._variant_spec(1, 1), "perfetto": {"fail": True}}
    compiled = {**backend_tests._variant_spec(1, 1), "perfetto": {"models": ["31"], "bytes": 4096}}
    fake_tools.install_neuron_explorer(neuron_tools, {"naive": naive, "fused": fused, "compiled": compiled},
                                       version_text=EXPLORER_LINE)
    fake_tools.install_dpkg_query(neuron_tools, {versions.RUNTIME_PACKAGE: RUNTIME_DEB})
    monkeypatch.setattr(perfetto, "MAX_PFTRACE_BYTES", 1024)
    monkeypatch.setattr(profile, "select_backend", lambda name: backend_tests._checked(backend_tests.CpuPlacedNeuronBackend()))
    store = tmp_path / "store"
    args = argparse.Namespace(scenario="rmsnorm", shape="2,64", dtype=None, seed=0, label="stand-in",
                              variants=None, samples=3, warmup=1, threads=None, quiet=True, device="neuron")
    assert profile.run_profile(profile_request(args, store)) == 0  # a failed Perfetto export fails no run

    perfetto_calls = [c for c in fake_tools.explorer_calls(neuron_tools) if "perfetto" in c]
    assert [c[3:] for c in perfetto_calls] == [["--output-format", "perfetto"]] * 3  # the documented form
    (run,) = load_store(store)
    by_name = {v.name: v for v in run.variants}
    kept = {n: sorted(a.path for a in v.artifacts if a.kind == "pftrace") for n, v in by_name.items()}
    assert kept == {"naive": ["artifacts/naive/device_profile_model_11.pftrace",
                              "artifacts/naive/device_profile_model_12.pftrace",
                              "artifacts/naive/system_profile.pftrace"], "fused": [], "compiled": []}
    bundle = next(p for p in store.iterdir() if p.name == run.run_id)
    assert (bundle / "artifacts" / "naive" / "system_profile.pftrace").read_bytes() == b"\x0a" * 64
    fused_notes = by_name["fused"].device_evidence.notes  # type: ignore[union-attr]
    assert "Perfetto export: neuron-explorer failed (exit 2: fake neuron-explorer: perfetto conversion failed); " \
           "the run is kept without .pftrace files" in fused_notes
    compiled_notes = by_name["compiled"].device_evidence.notes  # type: ignore[union-attr]
    assert ("Perfetto export: device_profile_model_31.pftrace not kept (4,096 bytes, above reportgen's limit of "
            "1,024 bytes); write it again with: neuron-explorer view -d <session> --output-format perfetto"
            in compiled_notes)
    assert all(v.status.value == "ok" for v in run.variants)

    extras = run.environment.device_extras
    assert extras[versions.RUNTIME_KEY] == f"{RUNTIME_DEB} (dpkg-query -W -f=${{Version}} aws-neuronx-runtime-lib)"
    assert extras[versions.EXPLORER_KEY] == f"{EXPLORER_LINE} (neuron-explorer --version)"

    site = tmp_path / "site"
    build_site(store, site, "/", jobs=1)
    html = (site / "runs" / run.run_id / "index.html").read_text()
    md = (site / "runs" / run.run_id / "report.md").read_text()
    command = (f"neuron-explorer view -d artifacts/naive --data-path neuron-explorer-workspace "
               f"--display-name {run.run_id}-naive")
    assert f"<li><strong>naive</strong>: Neuron Explorer: <code>{command}</code>, then " \
           f"http://localhost:3001/profile/{run.run_id}-naive; Perfetto: <code>device_profile_model_11.pftrace</code>, " \
           "<code>device_profile_model_12.pftrace</code>, <code>system_profile.pftrace</code> at ui.perfetto.dev" in html
    assert f"<li><strong>fused</strong>: Neuron Explorer: <code>{command.replace('naive', 'fused')}</code>" in html
    assert f"- **naive**: Neuron Explorer: <code>{command}</code>, then " \
           f"{md_escape(f'http://localhost:3001/profile/{run.run_id}-naive')}; Perfetto: " \
           f"{md_escape('device_profile_model_11.pftrace')}" in md
    assert "system_profile.pftrace</a> — naive device artifact (pftrace, 64 bytes)" in html
    for text, esc in ((html, lambda s: s.replace("'", "&#39;")), (md, md_escape)):
        assert esc(extras[versions.RUNTIME_KEY]) in text and esc(extras[versions.EXPLORER_KEY]) in text
        assert "ui.perfetto.dev" in text and "ssh -L 3001:localhost:3001 -L 3002:localhost:3002" in text


def test_open_command_is_shell_quoted_and_runs_as_one_argument_each(tmp_path: Path) -> None:
    folder = "artifacts/it's $(touch pwned) `touch pwned`; rm -rf x"
    found = perfetto.opening("r1", "v;$(touch pwned)", [(f"{folder}/s.ntff", "ntff"), (f"{folder}/a.neff", "neff"),
                                                       (f"{folder}/system_profile.pftrace", "pftrace")])
    assert found is not None and found.ui_command is not None
    argv = shlex.split(found.ui_command)
    assert argv == ["neuron-explorer", "view", "-d", folder, "--data-path", perfetto.WORKSPACE,
                    "--display-name", "r1-v;$(touch pwned)"]
    assert found.ui_url == "http://localhost:3001/profile/r1-v%3B%24%28touch%20pwned%29"
    assert found.pftrace == (f"{folder}/system_profile.pftrace",)
    # a real shell hands every argument over unchanged and runs nothing from the data
    shell = subprocess.run(["bash", "-c", "printf '%s\\n' " + found.ui_command.split(" ", 1)[1]], cwd=tmp_path,
                           capture_output=True, text=True, check=True)
    assert shell.stdout.splitlines() == argv[1:] and not (tmp_path / "pwned").exists()
    assert perfetto.opening("r1", "v", [("artifacts/v/a.neff", "neff")]) is None


def test_perfetto_export_failure_or_silence_is_a_note(tmp_path: Path) -> None:
    session = _session(tmp_path / "w")
    bin_dir = tmp_path / "bin"
    fake_tools.install_neuron_explorer(bin_dir, {"i-0abc_pid_1": {"perfetto": {"models": [], "bytes": 8}}})
    exe = str(bin_dir / "neuron-explorer")
    done = perfetto.export(exe, session, tmp_path / "scratch", subprocess.run)
    assert [p.name for p in done.files] == ["system_profile.pftrace"]
    assert done.files[0].parent == tmp_path / "scratch" / perfetto.PERFETTO_DIR  # written where it ran
    assert done.notes == ("Perfetto export: system_profile.pftrace kept (open at https://ui.perfetto.dev/)",)
    silent = perfetto.export(sys.executable, session, tmp_path / "scratch2",
                             lambda argv, **kw: subprocess.CompletedProcess(argv, 0, b"", b""))
    assert silent == perfetto.PerfettoExport((), ("Perfetto export: neuron-explorer wrote no .pftrace file",))

    def hangs(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        raise subprocess.TimeoutExpired(argv, 1)

    hung = perfetto.export(exe, session, tmp_path / "scratch3", hangs)
    assert hung.files == () and "could not run (TimeoutExpired)" in hung.notes[0]


def test_runtime_and_explorer_versions_are_recorded_with_the_command_or_not_found(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_tools.install_dpkg_query(bin_dir, {versions.RUNTIME_PACKAGE: RUNTIME_DEB})
    found = versions.read_versions(_which_in(bin_dir))
    assert found == {
        versions.RUNTIME_KEY: f"{RUNTIME_DEB} (dpkg-query -W -f=${{Version}} aws-neuronx-runtime-lib)",
        versions.EXPLORER_KEY: "not found (neuron-explorer: not installed; dpkg-query -W -f=${Version} "
                               "aws-neuronx-tools: exit 1; rpm: not installed)"}
    fake_tools.install_neuron_explorer(bin_dir, {}, version_text="  \n" + EXPLORER_LINE + "\nmore\n")
    assert versions.read_versions(_which_in(bin_dir))[versions.EXPLORER_KEY] == \
        f"{EXPLORER_LINE} (neuron-explorer --version)"
    nothing = versions.read_versions(lambda name: None)
    assert nothing[versions.RUNTIME_KEY] == "not found (dpkg-query: not installed; rpm: not installed)"
    ls = hardware.parse_neuron_ls((ROOT / "tests" / "data" / "neuron" / "neuron-ls-j.trn2.3xlarge.json").read_bytes())
    facts = hardware.environment_facts(ls, {}, tool_versions=found)
    assert facts[versions.RUNTIME_KEY] == found[versions.RUNTIME_KEY] and facts["instance_type"] == "trn2.3xlarge"


def test_legacy_json_system_profile_is_read_in_its_documented_layout() -> None:
    counts, note = explorer.parse_system_counts((LEGACY / "system_profile.json").read_bytes())
    # nrt_tensor_write, nrt_tensor_read and two nrt_model_submit on lnc_idx "0"; lnc_idx "1" and the framework
    # event (no core) are not counted; names the export does not hold are not known, not zero
    assert counts == {"nrt_model_submit": 2.0, "system_trace_events": 4.0}
    assert note == ("system-trace counters from 4 events of NeuronCore 0 in the json export; not in it, so not "
                    "known: nc_exec_running, dmem_buf_copyin, dmem_buf_copyout, nc_model_switch, nrt_model_switch")
    example, _ = explorer.parse_system_counts((LEGACY / "documented-example.json").read_bytes())
    assert example == {"system_trace_events": 1.0}  # the documented runtime API record, keyed by its type


def test_legacy_json_found_where_the_tool_writes_it(tmp_path: Path) -> None:
    """The legacy json's documented file name, written into the folder the tool runs in (not --output-file)."""
    session = _session(tmp_path / "w")
    raw = (LEGACY / "system_profile.json").read_bytes()

    def tool(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        fmt = argv[argv.index("--output-format") + 1]
        if fmt == "json":
            (Path(kw["cwd"]) / "system_profile.json").write_bytes(raw)
            return subprocess.CompletedProcess(argv, 0, b"", b"")
        if fmt == "summary-json":
            return subprocess.CompletedProcess(argv, 0, json.dumps({"n": {"total_time": 0.003}}).encode(), b"")
        return subprocess.CompletedProcess(argv, 2, b"", b"no parquet here")

    found = explorer.explore(session, 1, tmp_path / "scratch", which=lambda n: "/opt/neuron-explorer", run=tool)
    assert found.counters == {"nrt_model_submit": 2.0, "system_trace_events": 4.0}
    assert found.raw[explorer.SYSTEM_FILE] == raw
