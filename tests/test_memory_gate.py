"""The memory gate: a head that allocates an extra input-sized buffer at the same speed is a memory regression in
``compare`` and in ``ab`` (exit 1, the comment says memory); unchanged code is not."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from conftest import run_cli
from factories import synthetic_run
from hostile import snapshot
from test_ab_cli import checkout

from reportgen.compare.diff import compare_runs
from reportgen.compare.memory import MemoryOutcome, memory_change
from reportgen.compare.report import render_markdown
from reportgen.model.memory import VariantMemory
from reportgen.store.loader import load_store

EXTRA = '''"""RMSNorm, naive, for the memory gate; HEAD_EXTRA makes it allocate an input-sized buffer it never fills."""
import torch

from reportgen.scenario.loader import Scenario, Variant

HEAD_EXTRA = {extra}


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen).to(dtype).to(device), torch.ones(shape[-1], dtype=dtype, device=device))


def naive(x, w):
    scratch = torch.empty_like(x) if HEAD_EXTRA else None  # allocated, never written: same speed
    out = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    del scratch
    return out


def reference(x, w):
    x64 = x.double()
    return x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-6) * w.double()


SCENARIO = Scenario(
    name="tiny", description="memory gate", default_shape=(64, 256), default_dtype="float32",
    make_inputs=make_inputs, reference=reference, variants=(Variant("naive", "eager ops", naive),),
    bytes_per_call=lambda shape, itemsize: 2 * shape[0] * shape[1] * itemsize,
    flops_per_call=lambda shape: 4 * shape[0] * shape[1],
)
'''
X_BYTES = 64 * 256 * 4


def _memory(peak: int, allocated: int, count: int, exact: bool = True) -> VariantMemory:
    return VariantMemory(source="profiler", peak_bytes=peak, allocated_bytes=allocated, allocation_count=count,
                         exact=exact)


def test_memory_change_is_exact_where_the_figures_are_and_needs_ten_percent_where_not() -> None:
    base = _memory(1000, 2000, 10)
    assert memory_change("v", base, base).outcome is MemoryOutcome.SAME
    assert memory_change("v", base, _memory(1000, 2000, 11)).outcome is MemoryOutcome.MORE  # one allocation more
    assert memory_change("v", base, _memory(1000, 2000, 11), threshold_pct=20.0).outcome is MemoryOutcome.SAME
    inexact = _memory(1050, 2000, 10, exact=False)
    assert memory_change("v", base, inexact).outcome is MemoryOutcome.SAME  # +5 %, not exact: within 10 %
    assert memory_change("v", base, _memory(1200, 2000, 10, exact=False)).outcome is MemoryOutcome.MORE
    unavailable = VariantMemory(source="", unavailable="unavailable on neuron: why")
    assert memory_change("v", base, unavailable).outcome is MemoryOutcome.NOT_COMPARED
    assert memory_change("v", None, base).reason == "not measured in base"


def test_compare_calls_a_memory_only_change_a_memory_regression() -> None:
    base = synthetic_run()
    head = dataclasses.replace(synthetic_run(run_id="20261130T010000Z-cpu-test-def456", created_utc="2026-11-30T01:00:00Z"))
    with_memory = {"base": _memory(2 * X_BYTES, 3 * X_BYTES, 10), "head": _memory(3 * X_BYTES, 4 * X_BYTES, 11)}
    base = dataclasses.replace(base, variants=(dataclasses.replace(base.variants[0], memory=with_memory["base"]),
                                               *base.variants[1:]))
    head = dataclasses.replace(head, variants=(dataclasses.replace(head.variants[0], memory=with_memory["head"]),
                                               *head.variants[1:]))
    comparison = compare_runs(base, head, 5.0)
    assert not comparison.regressions and [m.name for m in comparison.memory_regressions] == ["naive"]
    assert comparison.gate_fails
    lines = render_markdown(comparison).splitlines()
    assert lines[1] == ("### :x: reportgen: memory regression in 1 of 3 variants: naive peak +50.0 % and "
                        "bytes allocated +33.3 % and allocations +10.0 %")
    assert ":red_circle: memory regression (exact)" in "\n".join(lines)
    same = compare_runs(base, dataclasses.replace(head, variants=base.variants), 5.0)
    assert not same.memory_regressions and not same.gate_fails


def _profile(store: Path, scenario: Path, label: str) -> None:
    proc = run_cli("profile", "--device", "cpu", "--scenario", str(scenario), "--samples", "5", "--quiet",
                   "--label", label, "--store", str(store), "--sweep", "none", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_compare_gates_a_head_that_allocates_an_extra_copy_and_passes_unchanged_code(tmp_path: Path) -> None:
    files = {}
    for side, extra in (("base", False), ("head", True)):
        files[side] = tmp_path / side / "tiny.py"
        files[side].parent.mkdir()
        files[side].write_text(EXTRA.format(extra=extra))
    store = tmp_path / "store"
    for label in ("base", "head", "again"):
        _profile(store, files["head" if label == "head" else "base"], label)
    runs = {r.label: r for r in load_store(store)}
    base, head, again = runs["base"].variants[0].memory, runs["head"].variants[0].memory, runs["again"].variants[0].memory
    assert base is not None and head is not None and again is not None and base.exact and head.exact
    assert head.allocated_bytes == base.allocated_bytes + X_BYTES and head.allocation_count == base.allocation_count + 1
    before = snapshot(store)
    proc = run_cli("compare", runs["base"].run_id, runs["head"].run_id, "--store", str(store), "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    headline = proc.stdout.splitlines()[1]
    assert re.match(r"### :x: reportgen: memory regression in 1 of 1 variants: naive .*bytes allocated \+", headline)
    assert "time regression" not in headline
    proc = run_cli("compare", runs["base"].run_id, runs["again"].run_id, "--store", str(store), "--fail-on-regression")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "memory regression" not in proc.stdout and "| naive |" in proc.stdout and "unchanged (exact)" in proc.stdout
    assert snapshot(store) == before


def test_ab_gates_a_head_that_allocates_an_extra_copy_and_passes_unchanged_code(tmp_path: Path) -> None:
    for side, extra in (("base", False), ("head", True), ("same", False)):
        checkout(tmp_path / side, side, EXTRA.format(extra=extra))
    args = ["--scenario", "tiny", "--variants", "naive", "--sessions", "6", "--rounds", "2", "--max-seconds", "1",
            "--samples", "3", "--threads", "1", "--clock", "cpu", "--quiet"]
    proc = run_cli("ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), *args, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^### :x: reportgen A/B: (time and )?memory regression: .*naive peak .* and bytes allocated ",
                     proc.stdout, re.M), proc.stdout
    assert ":red_circle: memory regression (exact)" in proc.stdout
    proc = run_cli("ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "same"), *args, timeout=600)
    assert "memory regression" not in proc.stdout and "unchanged (exact)" in proc.stdout
    assert proc.returncode in (0, 7), proc.stdout[-3000:] + proc.stderr[-3000:]  # no change, or time inconclusive
