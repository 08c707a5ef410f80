"""Work bounded by what the statistics need, and big inputs: a million samples, counts that would never end, huge
traces.

Bounds are on memory and counts, never on time: the machine is shared, so no test here asserts how long anything
took.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from factories import synthetic_run, variant, write_synthetic
from hostile import snapshot, write_trace

from reportgen.analysis import stats
from reportgen.cli import main
from reportgen.model.codec import MIN_SAMPLE_US, to_jsonable

MAX_EVENTS_ENV = "REPORTGEN_MAX_TRACE_EVENTS"
MILLION_RUN_MAX_RSS_MIB = 512
"""Peak resident memory allowed to `build` and `compare` over a run with 1,000,000 samples in one variant (measured:
about 200 MiB for build, 250 MiB for compare; before the fix they needed 12 and 21 GB)."""
ADDRESS_SPACE_CAP = 8 << 30
"""The commands under measurement get at most this much address space, so code that tries to hold 2,000 resamples of a
million samples (15 GiB of indices) fails at once (MemoryError) instead of pushing the shared test machine into swap.
Address space, not memory: BLAS thread buffers reserve some per core, so the measured commands use one BLAS thread."""
_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

_MEASURE = """
import json, resource, subprocess, sys
cap = int(sys.argv[1])
def limit():
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
proc = subprocess.run(sys.argv[2:], preexec_fn=limit, capture_output=True, text=True)
print(json.dumps({"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _measured(*args: str, cwd: Path) -> dict[str, object]:
    """``python -m reportgen ARGS`` under the address-space cap; its exit status, output and peak RSS (KiB), taken by a
    fresh process so that no earlier test's children count."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(ADDRESS_SPACE_CAP), sys.executable, "-m", "reportgen",
                          *args], capture_output=True, text=True, cwd=cwd, check=True, env={**os.environ, **_ONE_THREAD})
    result: dict[str, object] = json.loads(out.stdout)
    return result


def _reference_medians(sides: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The bootstrap as it was written before it was bounded: every resample of every side drawn at once."""
    rng = np.random.default_rng(stats.SEED)
    draws = [rng.integers(0, a.size, size=(stats.BOOTSTRAP_RESAMPLES, a.size)) for a in sides]
    return tuple(np.median(a[idx], axis=1) for a, idx in zip(sides, draws, strict=True))


def _interval(meds: np.ndarray) -> tuple[float, float]:
    tail = (1 - stats.CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(meds, [tail, 100 - tail])
    return float(lo), float(hi)


@pytest.mark.parametrize("chunk", [stats.RESAMPLE_CHUNK_VALUES, 1000, 7])
def test_bootstrap_in_chunks_gives_the_intervals_of_drawing_every_resample_at_once(
        chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below RESAMPLE_MAX_SAMPLES the bounded bootstrap is today's, to the last bit, whatever the chunk size."""
    monkeypatch.setattr(stats, "RESAMPLE_CHUNK_VALUES", chunk)
    stats._resample_indices.cache_clear()
    rng = np.random.default_rng(5)
    for n_num, n_den in ((50, 50), (31, 64), (1201, 900)):
        num, den = rng.lognormal(3.0, 0.3, n_num), rng.lognormal(3.1, 0.3, n_den)
        ref_num, ref_den = _reference_medians((num, den))
        (ref_summary,) = _reference_medians((num,))
        s = stats.summarize(tuple(num))
        r = stats.ratio_of_medians(tuple(num), tuple(den))
        assert s is not None and r is not None
        assert (s.ci_low_us, s.ci_high_us) == _interval(ref_summary)
        ratios = ref_num / ref_den
        assert (r.ci_low, r.ci_high) == _interval(ratios[np.isfinite(ratios)])
    stats._resample_indices.cache_clear()


@pytest.mark.parametrize("n", [1, 2, 6, 7])
def test_resample_medians_beyond_the_resampling_limit_follow_the_bootstraps_distribution(n: int) -> None:
    """Drawn from the exact distribution of a resample's median: each value's frequency within 5 standard errors of
    brute-force resampling's (200,000 draws each; fixed seeds, so the outcome never changes)."""
    values = np.sort(np.random.default_rng(3).normal(size=n))
    draws = 200_000
    ours = stats._order_statistic_medians(values, np.random.default_rng(1), draws)
    brute = np.median(values[np.random.default_rng(2).integers(0, n, size=(draws, n))], axis=1)
    got, want = collections.Counter(ours.tolist()), collections.Counter(brute.tolist())
    assert set(got) <= set(want)
    for value, count in want.items():
        p = count / draws
        assert abs(got[value] - count) <= 5 * (2 * draws * p * (1 - p)) ** 0.5 + 1, value


def test_a_million_samples_are_summarised_from_the_exact_distribution_not_by_resampling() -> None:
    a = np.random.default_rng(0).lognormal(3.0, 0.2, 1_000_000)
    s = stats.summarize(tuple(a.tolist()))
    assert s is not None and s.n == 1_000_000
    # The bootstrap standard error of a median is about 1.2533 sigma / sqrt(n) (here sigma ~ 4.1 us): ~0.005 us.
    assert s.ci_low_us < s.median_us < s.ci_high_us
    assert 0.01 < s.ci_high_us - s.ci_low_us < 0.04
    assert stats.summarize(tuple(a.tolist())) == s  # fixed seed: the same interval on every build


def test_build_and_compare_of_a_million_samples_stay_within_a_memory_bound(tmp_path: Path) -> None:
    store = tmp_path / "data" / "results"
    for i, t in enumerate((100.0, 103.0)):
        run = synthetic_run(run_id=f"2026112{i + 8}T000000Z-cpu-test-abc12{i}", created_utc=f"2026-11-2{i + 8}T00:00:00Z",
                            variants=(variant("naive", t, n=1_000_000 if i == 0 else 30), variant("fused", 60.0)))
        write_synthetic(store, run)
    before = snapshot(store)
    built = _measured("build", "--runs", str(store), "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert built["rc"] == 0, built["stderr"]
    compared = _measured("compare", "--store", str(store), "--format", "json", "latest~1", "latest", cwd=tmp_path)
    assert compared["rc"] == 0, compared["stderr"]
    naive = next(v for v in json.loads(str(compared["stdout"]))["variants"] if v["name"] == "naive")
    assert naive["change_pct"] == pytest.approx(3.0, abs=0.1)
    for result in (built, compared):
        assert int(str(result["maxrss_kib"])) < MILLION_RUN_MAX_RSS_MIB * 1024, result["maxrss_kib"]
    assert snapshot(store) == before


def test_a_sample_so_small_that_a_ratio_of_medians_overflows_is_refused_at_load(tmp_path: Path) -> None:
    """5e-324 µs against 1e18 µs made the change +inf and `compare --format json` an internal error (exit 70)."""
    store = tmp_path / "data" / "results"
    base = synthetic_run(run_id="20261128T000000Z-cpu-test-abc120", created_utc="2026-11-28T00:00:00Z")
    write_synthetic(store, synthetic_run(run_id="20261129T000000Z-cpu-test-abc121", created_utc="2026-11-29T00:00:00Z",
                                         times_us={"naive": 1e17, "fused": 60.0}))
    data = json.loads(json.dumps(to_jsonable(base)))
    data["variants"][0]["samples_us"] = [5e-324] * 30
    (store / base.run_id).mkdir()
    path = store / base.run_id / "run.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    before = snapshot(store)
    proc = run_cli("compare", "--store", str(store), "--format", "json", base.run_id, "latest", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (3, "")
    assert proc.stderr == (f"reportgen: error: {path}: field 'variants[0].samples_us': must be 0 or at least "
                           f"{MIN_SAMPLE_US:g} µs, got 5e-324\n")
    assert snapshot(store) == before


@pytest.mark.parametrize(("extra", "message"), [
    (("--samples", "1000000000"), "--samples 1000000000: must be at most 100,000"),
    (("--warmup", "1000000000"), "--warmup 1000000000: must be at most 10,000"),
])
def test_profile_refuses_counts_that_would_never_end(extra: tuple[str, ...], message: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REPORTGEN_PEAK_BANDWIDTH_GBPS", "10")
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    assert main(["profile", "--device", "cpu", "--shape", "4,8", "--quiet", "--store", str(store), *extra]) == 2
    assert capsys.readouterr().err == f"reportgen: error: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(("extra", "message"), [
    (("--samples", "1000000000"), "--samples 1000000000: must be at most 1,000"),
    (("--rounds", "1000000000"), "--rounds 1000000000: must be at most 1,000"),
    (("--discard", "1000000000"), "--discard 1000000000: must be between 0 and 1,000"),
    (("--discard", "-1"), "--discard -1: must be between 0 and 1,000"),
    (("--sessions", "1000000000"), "--sessions 1000000000: must be at most 100"),
    (("--max-seconds", "inf"), "--max-seconds inf: must be at most 86,400 (one day)"),
    (("--max-seconds", "1e400"), "--max-seconds inf: must be at most 86,400 (one day)"),
])
def test_ab_refuses_counts_that_would_never_end(extra: tuple[str, ...], message: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for side in ("base", "head"):
        (tmp_path / side).mkdir()
    before = snapshot(tmp_path)
    code = main(["ab", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"),
                 "--store", str(tmp_path / "store"), *extra])
    assert (code, capsys.readouterr().err) == (2, f"reportgen: error: {message}\n")
    assert snapshot(tmp_path) == before


def test_build_prints_no_raw_control_character_from_a_variant_name_drawn_on_a_chart(tmp_path: Path) -> None:
    """matplotlib warned "Glyph 27 (ESC) missing from font(s)" with the character itself on stderr."""
    store = tmp_path / "data" / "results"
    name = "ev\x1b[31mil\x07\r\n\x9b2J\x7f"
    for i in range(3):
        write_synthetic(store, synthetic_run(
            run_id=f"2026112{i}T000000Z-cpu-test-abc12{i}", created_utc=f"2026-11-2{i}T00:00:00Z",
            variants=(variant(name, 100.0 + i), variant("fused", 60.0))))
    before = snapshot(store)
    proc = run_cli("build", "--runs", str(store), "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "site").glob("history/*.svg")), "a chart with the name was drawn"
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", proc.stderr + proc.stdout), proc.stderr
    assert snapshot(store) == before


def _events_trace(path: Path, count: int) -> Path:
    """A gzip trace of ``count`` identical host ops: a few bytes per event compressed, whatever ``count`` is."""
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1}
    return write_trace(path, {"traceEvents": [event] * count}, compress=True)


def test_import_refuses_a_trace_with_more_events_than_the_limit(tmp_path: Path) -> None:
    """10**7 events in a 2.5 MB gzip took 3.5 GB; the event count is bounded like the byte count."""
    store = tmp_path / "store"
    trace = _events_trace(tmp_path / "many.json.gz", 1001)
    before = snapshot(tmp_path / "store", trace)
    proc = run_cli("import", str(trace), "--store", str(store), env={MAX_EVENTS_ENV: "1000"}, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (3, "")
    assert proc.stderr == (f"reportgen: error: {trace}: holds more than 1,000 events; refusing it (raise the limit "
                           f"with {MAX_EVENTS_ENV} if the trace is genuine)\n")
    assert snapshot(tmp_path / "store", trace) == before
    ok = run_cli("import", str(_events_trace(tmp_path / "enough.json.gz", 1000)), "--store", str(store),
                 env={MAX_EVENTS_ENV: "1000"}, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("value", ["lots", "0", "-5", "9" * 5000])
def test_a_bad_event_limit_is_refused_before_any_work(value: str, tmp_path: Path) -> None:
    trace = _events_trace(tmp_path / "t.json.gz", 10)
    proc = run_cli("import", str(trace), "--store", str(tmp_path / "store"), env={MAX_EVENTS_ENV: value}, cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stderr == (f"reportgen: error: environment variable {MAX_EVENTS_ENV}={value[:30]!r} is not a positive "
                           "number of events\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json.gz"]
