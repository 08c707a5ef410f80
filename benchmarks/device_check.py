"""One-call GPU check of reportgen's CUDA path: run by ``benchmarks/device_check.sh`` (see benchmarks/README.md).

The shell entry copies the checkout, installs the copy offline into a temporary folder and runs this file with
that folder on PYTHONPATH. This process (the orchestrator) imports neither torch nor reportgen: every step that
does runs in a child process with a time limit, so that a hang, a CUDA error or a crash ends one step only.

Steps, in order (each records pass / fail / error / skip / info rows with its numbers into summary.json and
summary.md under $OUT after every step, so that a run killed at the time limit still leaves what it finished):

1. ``env``: torch / CUDA / triton versions, the device (SMs, L2), ``nvidia-smi`` (compute and MIG mode, clocks),
   ``CUDA_VISIBLE_DEVICES``, and the cache-flush size reportgen's CUDA backend uses against max(256 MiB, 2 x L2).
2. ``profile``: ``python3 -m reportgen profile --device cuda`` (the default rmsnorm profile); per variant the op
   table's device total (sum of the stored op rows' self device time) against the kernel time of the stored
   trace, calls per sample, the flush size stored, and the measured bandwidth ceiling against H200's 4.8 TB/s.
3. ``kernels``: per RMSNorm variant and shape (bfloat16): reportgen's flushed CUDA-event time of one call
   (``CudaBackend.flush_cache`` + ``CudaBackend.time_one_call``), the kernel time of one call from torch.profiler,
   ``triton.testing.do_bench`` and the kernels per call.
4. ``ab``: an A/A ``reportgen ab`` (base and head the same copy); it must say "no change" with exit code 0.
5. ``build``: ``reportgen build`` of the store, and a tarball of the store and site (under 16 MiB).

``--dry-run`` runs the same steps on the CPU (``--device cpu``, small shapes, few repetitions) to exercise the
orchestration, the parsers and the summary on a machine without a GPU; its figures mean nothing about CUDA.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

VENDOR_BW_BYTES_PER_S = {"H200": 4.8e12}
"""The vendor's HBM bandwidth (the device peak reportgen measures is reported as a fraction of it)."""
FLUSH_MIN_BYTES_EXPECTED = 256 * 1024 * 1024
"""What the check expects reportgen's CUDA backend to flush: max(256 MiB, 2 x L2) (reportgen/devices/cuda.py)."""
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
"""Chrome-trace categories of device work (Kineto's names) whose durations make up a call's kernel time."""
OP_TABLE_BAND = (0.99, 1.01)
LAUNCH_GAP_LIMIT = 1.1
DO_BENCH_BAND = (0.9, 1.1)
TARBALL_LIMIT_BYTES = 16 * 1024 * 1024
VARIANTS = ("naive", "fused", "compiled")
KERNELS_EXPECTED = {"naive": (3, None), "fused": (1, 2), "compiled": (1, 2)}
"""Kernels (plus copies and memsets) per call expected of each variant: (at least, at most)."""

GPU_SHAPES = {"decode": (1, 4096), "middle": (8, 1024, 4096), "large": (16, 4096, 8192)}
DRY_SHAPES = {"decode": (1, 4096), "middle": (8, 64, 1024), "large": (8, 256, 1024)}
GPU_SAMPLES, DRY_SAMPLES = 50, 10
PROFILES_PER_CALL = 3

# Steps: (name, longest it may take in s, the least it needs to be worth starting, in s).
STEPS = (("env", 120, 20), ("profile", 210, 60), ("kernels", 210, 60), ("ab", 240, 90), ("build", 120, 30))
STATUSES = ("pass", "fail", "error", "skip", "info")


# ---------------------------------------------------------------------------------------------------------------
# Results: rows of (check, status, figure, expected, repetitions, timing source, detail)


def row(check: str, status: str, value: Any = None, *, expected: str = "", reps: str = "", source: str = "",
        detail: str = "", tb: str | None = None, unit: str = "") -> dict[str, Any]:
    """One line of the summary; ``value`` is the figure (a number or text), ``unit`` its unit."""
    assert status in STATUSES, status
    out: dict[str, Any] = {"check": check, "status": status, "value": _jsonable(value), "unit": unit,
                           "expected": expected, "reps": reps, "source": source, "detail": detail}
    if tb:
        out["traceback"] = tb
    return out


def error_row(check: str, exc: BaseException | None = None, detail: str = "") -> dict[str, Any]:
    """An ``error`` row with the exception's traceback (or the current one)."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) if exc else traceback.format_exc()
    msg = f"{type(exc).__name__}: {exc}" if exc else (tb.strip().splitlines() or ["error"])[-1]
    return row(check, "error", None, detail=(detail + "; " if detail else "") + msg[:400], tb=tb[-6000:])


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def band_status(value: float | None, lo: float | None, hi: float | None) -> str:
    if value is None:
        return "fail"
    return "pass" if (lo is None or value >= lo) and (hi is None or value <= hi) else "fail"


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        text = f"{value:.4g}" if abs(value) < 1e6 else f"{value:.4e}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def median(xs: Iterable[float]) -> float | None:
    xs = list(xs)
    return float(statistics.median(xs)) if xs else None


def quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return float(s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))])


# ---------------------------------------------------------------------------------------------------------------
# Trace and bundle parsing (pure: exercised by the self-test and the dry run)


def load_trace(path: Path) -> dict[str, Any]:
    """A Chrome trace (plain or gzip JSON) as a dict."""
    opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def device_work(trace: dict[str, Any]) -> dict[str, Any]:
    """Kernel time of a trace: complete events of the device categories, summed (µs), counted, named."""
    total, by_cat, names = 0.0, {c: 0 for c in DEVICE_CATEGORIES}, {}
    dur_by_cat = {c: 0.0 for c in DEVICE_CATEGORIES}
    for ev in trace.get("traceEvents", []):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat not in by_cat:
            continue
        dur = float(ev.get("dur", 0.0) or 0.0)
        total += dur
        by_cat[cat] += 1
        dur_by_cat[cat] += dur
        name = str(ev.get("name", ""))
        names[name] = names.get(name, 0) + 1
    return {"total_us": total, "count": sum(by_cat.values()), "kernels": by_cat["kernel"], "by_cat": by_cat,
            "dur_by_cat": dur_by_cat, "names": names}


def op_table_device(ops: list[dict[str, Any]], kernel_names: Iterable[str] = ()) -> dict[str, float]:
    """The op table's device total (sum of self device time of every row) and the part in rows named like a kernel."""
    kn = set(kernel_names)
    total = sum(float(o.get("self_device_us") or 0.0) for o in ops)
    kernel_named = sum(float(o.get("self_device_us") or 0.0) for o in ops if o.get("name") in kn)
    return {"total_us": total, "kernel_named_us": kernel_named, "other_us": total - kernel_named}


def find_bundles(store: Path) -> list[Path]:
    """Run folders of a store (``<store>/<run_id>/run.json``), oldest first."""
    if not store.is_dir():
        return []
    found = [p for p in store.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / "run.json").is_file()]
    return sorted(found, key=lambda p: ((p / "run.json").stat().st_mtime, p.name))


def bundle_rows(bundle: Path, device: str, expected_flush: int | None, vendor_bw: float | None) -> list[dict[str, Any]]:
    """Step 2's rows for one stored run: per variant the op table's device total against its trace's kernel time."""
    run = json.loads((bundle / "run.json").read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    cuda = device == "cuda"
    src = f"run.json of {bundle.name}"
    rows.append(row("profile: stored device", "pass" if run.get("device") == device else "fail", run.get("device"),
                    expected=device, source=src))
    settings = run.get("settings") or {}
    flush = settings.get("cache_flush_bytes")
    if expected_flush is None:
        rows.append(row("profile: cache_flush_bytes stored", "info", flush, unit="B", source=src,
                        detail="no expected size (the env step gave none)"))
    else:
        rows.append(row("profile: cache_flush_bytes stored", "pass" if flush == expected_flush else "fail", flush,
                        unit="B", expected=f"{expected_flush} B", source=src))
    peak = run.get("peak") or {}
    bw = peak.get("bandwidth_bytes_per_s")
    if vendor_bw:
        r = ratio(bw, vendor_bw)
        rows.append(row("profile: measured bandwidth ceiling / vendor 4.8 TB/s", "info" if r is not None else "fail", r,
                        expected="reported only (a copy benchmark usually reaches 0.8-0.95)",
                        source=f"device peak in run.json: {peak.get('source', '?')}",
                        detail=f"{fmt(bw / 1e12 if bw else None, 'TB/s')} measured"))
    else:
        rows.append(row("profile: measured bandwidth ceiling", "info", bw / 1e9 if bw else None, unit="GB/s",
                        source=f"device peak in run.json: {peak.get('source', '?')}",
                        detail="no vendor figure for this device"))
    for v in run.get("variants") or []:
        name = v.get("name", "?")
        status = v.get("status")
        rows.append(row(f"profile/{name}: status", "pass" if status == "ok" else "fail", status, expected="ok",
                        source=src, detail=v.get("error") or ""))
        samples = [float(s) for s in v.get("samples_us") or []]
        med = median(samples)
        calls = v.get("calls_per_sample")
        basis = v.get("time_basis")
        rows.append(row(f"profile/{name}: stored median time per call", "info" if samples else "fail", med, unit="µs",
                        reps=f"{len(samples)} samples x {calls} call(s)",
                        source=f"reportgen profile, time basis {basis!r} (CUDA events after a flush on cuda)"))
        exp_calls = 1 if cuda else None
        rows.append(row(f"profile/{name}: calls_per_sample", band_status(calls, exp_calls, exp_calls) if cuda else "info",
                        calls, expected="1 (flushed, one call per sample)" if cuda else "calibrated", source=src))
        if cuda:
            rows.append(row(f"profile/{name}: time_basis", "pass" if basis == "device" else "fail", basis,
                            expected="device", source=src))
        trace_rel = v.get("trace_path")
        if not trace_rel:
            rows.append(row(f"profile/{name}: op table vs trace kernel time", "fail", None, source=src,
                            detail="no stored trace"))
            continue
        try:
            work = device_work(load_trace(bundle / trace_rel))
            table = op_table_device(v.get("ops") or [], work["names"])
            steps = int(v.get("profiled_steps") or 0) or None
            r = ratio(table["total_us"], work["total_us"])
            detail = (f"op table {table['total_us']:.1f} µs (rows named as a kernel {table['kernel_named_us']:.1f}, "
                      f"other rows {table['other_us']:.1f}); trace {work['total_us']:.1f} µs in {work['count']} "
                      f"device events ({work['kernels']} kernels) over {steps} profiled step(s)")
            if work["total_us"] == 0 and not cuda:
                status_ = "skip"
                detail = "no device events on the cpu (dry run): " + detail
            else:
                status_ = band_status(r, *OP_TABLE_BAND)
                if r is not None and 1.8 < r < 2.2:
                    detail = "about 2x: kernel time counted twice? " + detail
            rows.append(row(f"profile/{name}: op-table device total / trace kernel time", status_, r,
                            expected=f"{OP_TABLE_BAND[0]}-{OP_TABLE_BAND[1]}", reps=f"{steps} profiled steps",
                            source=f"run.json ops[].self_device_us vs {trace_rel} (cats {', '.join(DEVICE_CATEGORIES)})",
                            detail=detail))
            per_call_kernel = work["total_us"] / steps if steps else None
            if cuda or work["total_us"]:
                r2 = ratio(med, per_call_kernel)
                rows.append(row(f"profile/{name}: stored median / trace kernel time per step", "info", r2,
                                reps=f"{len(samples)} samples; {steps} steps",
                                source="run.json samples_us vs stored trace",
                                detail=f"kernel time per step {fmt(per_call_kernel, 'µs')}; "
                                       f"device events per step {v.get('device_event_count')}"))
        except Exception as exc:  # one variant's trace must not end the step
            rows.append(error_row(f"profile/{name}: op table vs trace kernel time", exc))
    return rows


def ab_rows(doc: dict[str, Any] | None, rc: int | None) -> list[dict[str, Any]]:
    """Step 4's rows from ``reportgen ab --format json`` and its exit code."""
    rows = [row("ab: exit code", "pass" if rc == 0 else "fail", rc, expected="0 (no change)",
                detail={7: "inconclusive when the time budget ran out", 1: "regression", 3: "a side failed"}.get(rc or 0, ""))]
    if doc is None:
        rows.append(row("ab: verdict", "fail", None, expected="no change", detail="no JSON output"))
        return rows
    verdict = doc.get("verdict")
    rows.append(row("ab: verdict", "pass" if verdict == "no change" else "fail", verdict, expected="no change",
                    reps=f"{doc.get('sessions')} sessions, {len(doc.get('rounds') or [])} rounds",
                    source="reportgen ab (interleaved A/A, base = head)",
                    detail=f"stop: {doc.get('stop_reason')}; threshold {doc.get('threshold_pct')} %; shape "
                           f"{doc.get('shape')} {doc.get('dtype')}; rounds {fmt(doc.get('rounds_s'), 's')}, "
                           f"warm/compile {fmt(doc.get('warm_s'), 's')}"))
    for fs in doc.get("failed_sides") or []:
        rows.append(row(f"ab: {fs.get('side')} side failed", "fail", fs.get("stage"), detail=str(fs.get("error"))[:400]))
    for v in doc.get("variants") or []:
        stats = v.get("stats") or {}
        noise = "; ".join(f"{k}={fmt(stats.get(k))}" for k in ("base_noise_pct", "head_noise_pct", "process_noise_pct",
                                                                 "coverage") if k in stats)
        rows.append(row(f"ab/{v.get('name')}: verdict", "pass" if v.get("verdict") == "no change" else "fail",
                        v.get("verdict"), expected="no change",
                        reps=f"{stats.get('sessions')} sessions, {stats.get('rounds')} rounds" if stats else "",
                        source="reportgen ab (Hodges-Lehmann over session ratios head/base)",
                        detail=f"head/base {fmt(stats.get('ratio'))}, 95 % interval {fmt(stats.get('ci_low'))}-"
                               f"{fmt(stats.get('ci_high'))}; {noise}; base error {v.get('base_error')}, head error "
                               f"{v.get('head_error')}"))
    return rows


# ---------------------------------------------------------------------------------------------------------------
# The summary files


class Summary:
    """Every row so far; rewritten to summary.json and summary.md after each step."""

    def __init__(self, out: Path, meta: dict[str, Any]) -> None:
        self.out, self.meta = out, meta
        self.rows: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        self.rows.extend(rows)

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for r in self.rows if r["status"] == s) for s in STATUSES}

    def save(self, complete: bool = False) -> None:
        self.meta["complete"] = complete
        self.meta["counts"] = self.counts()
        self.meta["elapsed_s"] = round(time.time() - self.meta["started_epoch"], 1)
        doc = {**self.meta, "steps": self.steps, "checks": self.rows}
        _write(self.out / "summary.json", json.dumps(doc, indent=1, default=str) + "\n")
        _write(self.out / "summary.md", self.markdown())

    def markdown(self) -> str:
        m = self.meta
        env = m.get("environment", {})
        c = m["counts"]
        lines = [
            "# reportgen GPU check (`benchmarks/device_check.sh`)",
            "",
            f"**This is the output of ONE run** of `benchmarks/device_check.sh` on one machine, started "
            f"{m['started_utc']}. Every figure below is from this single run (a median over the stated repetitions "
            "within it), not an average over runs; repeat the run before drawing conclusions from small differences.",
            "",
        ]
        if m.get("dry_run"):
            lines += ["**DRY RUN on the CPU** (`--dry-run`: `--device cpu`, small shapes, few repetitions): it "
                      "exercises the script, not the CUDA path; none of its figures say anything about a GPU.", ""]
        lines += [
            f"- Result: {c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['skip']} skipped, {c['info']} "
            f"reported only; run {'complete' if m.get('complete') else 'INCOMPLETE (stopped early: see log.txt)'}; "
            f"{m.get('elapsed_s')} s in the Python part.",
            f"- Device: {env.get('device_name', '?')}; {env.get('sm_count', '?')} SMs; L2 "
            f"{fmt(env.get('l2_bytes'), 'B')}; memory {fmt(env.get('total_memory_bytes'), 'B')}; compute capability "
            f"{env.get('capability', '?')}; CUDA_VISIBLE_DEVICES={m.get('cuda_visible_devices') or '(unset)'}; "
            f"reportgen's cache flush {fmt(m.get('flush_bytes'), 'B')}; nvidia-smi: "
            f"{m.get('nvidia_smi_line', 'not run')}",
            f"- Software: Python {env.get('python', platform.python_version())}; torch {env.get('torch', '?')}; CUDA "
            f"{env.get('cuda', '?')}; cuDNN {env.get('cudnn', '?')}; triton {env.get('triton', '?')}; driver "
            f"{env.get('driver', '?')}; reportgen {env.get('reportgen_version', '?')} from {m.get('install')} "
            f"(checkout {m.get('git_sha') or 'no git sha'}{', with local changes' if m.get('git_dirty') else ''}).",
            f"- Host: {m.get('hostname')}; {m.get('cpu_count')} CPUs; {m.get('platform')}.",
            "",
            "## Checks",
            "",
            "| check | status | figure | expected | repetitions | timing source | detail |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            status = r["status"].upper() if r["status"] in ("fail", "error") else r["status"]
            lines.append("| " + " | ".join(_cell(x) for x in (
                r["check"], status, fmt(r["value"], r.get("unit", "")), r["expected"], r["reps"], r["source"],
                r["detail"])) + " |")
        errs = [r for r in self.rows if r.get("traceback")]
        if errs:
            lines += ["", "## Errors", ""]
            for r in errs:
                lines += [f"### {r['check']}", "", "```text", r["traceback"].rstrip(), "```", ""]
        lines += ["", "## Steps", "", "| step | result | seconds | command |", "|---|---|---|---|"]
        for s in self.steps:
            lines.append("| " + " | ".join(_cell(x) for x in (s["step"], s["result"], fmt(s.get("seconds")),
                                                              s.get("command", ""))) + " |")
        lines += ["", "Statuses: pass / FAIL / ERROR (the check itself broke: traceback above) / skip (not run, with "
                  "the reason) / info (a figure reported without a pass band). Files: summary.json (the same rows), "
                  "log.txt (everything printed), store.tar.gz (the run bundles and the built site), ab.json "
                  "(`reportgen ab --format json`), nvidia-smi.txt.", ""]
        return "\n".join(lines)


def _cell(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _write(path: Path, text: str) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------------------------
# Child processes


def run_cmd(cmd: list[str], timeout: float, cwd: Path, log_name: str, work: Path,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` in its own process group with a time limit; its output goes to a file, then to our stdout (the log).

    Returns rc (None when killed at the limit), seconds, the output's tail and whether it timed out."""
    out_file = work / f"{log_name}.out"
    print(f"\n$ {' '.join(cmd)}   (limit {timeout:.0f} s)", flush=True)
    t0 = time.monotonic()
    timed_out = False
    with open(out_file, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            rc = None
        except Stopped:  # SIGTERM from the shell's time limit: the child's own group would outlive us
            _kill_group(proc)
            raise
    seconds = time.monotonic() - t0
    text = out_file.read_text(encoding="utf-8", errors="replace")
    sys.stdout.write(text if len(text) < 200_000 else text[:20_000] + "\n[... cut ...]\n" + text[-100_000:])
    print(f"[{log_name}: {'killed at the time limit' if timed_out else f'exit {rc}'} after {seconds:.1f} s]", flush=True)
    return {"rc": rc, "seconds": seconds, "tail": text[-3000:], "timed_out": timed_out}


class Stopped(BaseException):
    """SIGTERM or SIGINT arrived (the shell's time limit, or Ctrl-C)."""


def _on_signal(signum: int, _frame: Any) -> None:
    raise Stopped(f"signal {signum}")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the child we started and its process group (its own workers), TERM first, then KILL."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# ---------------------------------------------------------------------------------------------------------------
# Inner steps (child processes: these import torch and reportgen)


class Inner:
    """Rows of an inner step, written to ``result`` after each one (a crash keeps what came before)."""

    def __init__(self, result: Path) -> None:
        self.result = result
        self.rows: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}

    def add(self, *rows: dict[str, Any]) -> None:
        self.rows.extend(rows)
        for r in rows:
            print(f"  {r['status']:5} {r['check']}: {fmt(r['value'], r.get('unit', ''))} {r['detail'][:200]}", flush=True)
        self.save()

    def save(self) -> None:
        _write(self.result, json.dumps({"rows": self.rows, "extra": self.extra}, default=str) + "\n")


def _backend(device: str) -> Any:
    """reportgen's backend for ``device`` through its registry (its module's class as a fallback)."""
    try:
        from reportgen.devices import select_backend
    except ImportError:
        if device == "cuda":
            from reportgen.devices.cuda import CudaBackend

            backend = CudaBackend()
        else:
            from reportgen.devices.cpu import CpuBackend  # type: ignore[attr-defined]

            backend = CpuBackend()
        backend.check_available()
        return backend
    return select_backend(device)


def inner_env(args: argparse.Namespace, inner: Inner) -> None:
    """Step 1: versions, the device, and the flush size reportgen's backend uses against max(256 MiB, 2 x L2)."""
    env: dict[str, Any] = {"python": platform.python_version(), "executable": sys.executable}
    inner.extra["environment"] = env
    try:
        import reportgen

        env["reportgen_version"] = getattr(reportgen, "__version__", "?")
        env["reportgen_file"] = str(Path(reportgen.__file__).parent)
        inner.add(row("env: reportgen imported from", "info", env["reportgen_file"],
                      detail=f"version {env['reportgen_version']}"))
    except Exception as exc:
        inner.add(error_row("env: import reportgen", exc))
    import torch

    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    try:
        env["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        env["cudnn"] = None
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception as exc:
        env["triton"] = f"not importable ({type(exc).__name__})"
    inner.add(row("env: torch / CUDA / triton", "info", f"{env['torch']} / {env['cuda']} / {env['triton']}",
                  detail=f"cuDNN {env['cudnn']}; Python {env['python']}"))
    if args.device == "cuda":
        available = torch.cuda.is_available()
        inner.add(row("env: torch.cuda.is_available()", "pass" if available else "fail", available, expected="True",
                      detail=f"device count {torch.cuda.device_count() if available else 0}"))
        if not available:
            return
        props = torch.cuda.get_device_properties(0)
        env["device_name"] = torch.cuda.get_device_name(0)
        env["sm_count"] = int(props.multi_processor_count)
        env["l2_bytes"] = int(getattr(props, "L2_cache_size", 0) or 0)
        env["total_memory_bytes"] = int(props.total_memory)
        env["capability"] = f"{props.major}.{props.minor}"
        inner.add(row("env: device 0", "info", env["device_name"], detail=f"compute capability {env['capability']}"),
                  row("env: SM count", "info", env["sm_count"]),
                  row("env: L2 size (torch L2_cache_size)", "info" if env["l2_bytes"] else "fail", env["l2_bytes"],
                      unit="B", detail=f"{env['l2_bytes'] / 2**20:.1f} MiB"),
                  row("env: device memory", "info", env["total_memory_bytes"], unit="B",
                      detail=f"{env['total_memory_bytes'] / 2**30:.1f} GiB"))
    else:
        env["device_name"] = platform.processor() or "cpu"
    try:
        backend = _backend(args.device)
        env["backend"] = f"{type(backend).__module__}.{type(backend).__name__}"
        try:
            extras = backend.environment_extras()
            env["driver"] = extras.get("driver_version")
            inner.add(row("env: backend environment extras", "info", json.dumps(extras), source=env["backend"]))
        except Exception as exc:
            inner.add(error_row("env: backend environment extras", exc))
        flush = int(backend.cache_flush_bytes())
        inner.extra["flush_bytes"] = flush
        if args.device == "cuda":
            expected = max(FLUSH_MIN_BYTES_EXPECTED, 2 * env["l2_bytes"])
            const = None
            try:
                from reportgen.devices import cuda as cuda_mod

                const = getattr(cuda_mod, "FLUSH_MIN_BYTES", None)
            except Exception:
                pass
            rule = "2 x L2" if 2 * env["l2_bytes"] > FLUSH_MIN_BYTES_EXPECTED else "256 MiB (2 x L2 is smaller)"
            inner.add(row("env: cache-flush bytes of reportgen's CUDA backend", "pass" if flush == expected else "fail",
                          flush, unit="B", expected=f"max(256 MiB, 2 x L2) = {expected} B: {rule}",
                          source=f"{env['backend']}.cache_flush_bytes()",
                          detail=f"{flush / 2**20:.1f} MiB; FLUSH_MIN_BYTES in reportgen/devices/cuda.py = {const}"))
        else:
            inner.add(row("env: cache-flush bytes of reportgen's backend", "info", flush, unit="B",
                          source=f"{env['backend']}.cache_flush_bytes()", detail="the CPU backend does not flush"))
    except Exception as exc:
        inner.add(error_row("env: reportgen backend", exc))


def _load_scenario_module(src: Path) -> Any:
    """The rmsnorm scenario file reportgen ships (installed copy first, else the checkout's)."""
    candidates = []
    try:
        import reportgen

        candidates.append(Path(reportgen.__file__).parent / "scenarios" / "rmsnorm.py")
    except Exception:
        pass
    candidates.append(src / "scenarios" / "rmsnorm.py")
    for path in candidates:
        if path.is_file():
            spec = importlib.util.spec_from_file_location("device_check_rmsnorm", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError(f"no rmsnorm scenario in {candidates}")


def _profile_one_call(torch: Any, backend: Any, fn: Callable[..., Any], call_args: tuple[Any, ...],
                      tmp: Path) -> dict[str, Any]:
    """One flushed call under torch.profiler with reportgen's activities; its device work from the exported trace."""
    backend.flush_cache()  # outside the profiler: the flush's own kernel is not counted
    backend.synchronize()
    with torch.profiler.profile(activities=backend.profiler_activities()) as prof:
        fn(*call_args)
        backend.synchronize()
    path = tmp / "one_call.json"
    prof.export_chrome_trace(str(path))
    work = device_work(load_trace(path))
    path.unlink()
    return work


def _do_bench(fn: Callable[..., Any], call_args: tuple[Any, ...]) -> float:
    """triton.testing.do_bench's median of one call, in µs."""
    from triton.testing import do_bench

    try:
        ms = do_bench(lambda: fn(*call_args), warmup=25, rep=100, return_mode="median")
    except TypeError:  # an older triton without return_mode
        ms = do_bench(lambda: fn(*call_args), warmup=25, rep=100, quantiles=[0.5])
    if isinstance(ms, (list, tuple)):
        ms = ms[0]
    return float(ms) * 1000.0


def inner_kernels(args: argparse.Namespace, inner: Inner) -> None:
    """Step 3: per variant and shape, reportgen's flushed event time, profiler kernel time, do_bench, kernels per call."""
    import torch

    deadline = args.deadline
    cuda = args.device == "cuda"
    shapes = DRY_SHAPES if args.dry_run else GPU_SHAPES
    n_samples = DRY_SAMPLES if args.dry_run else GPU_SAMPLES
    backend = _backend(args.device)
    if not cuda:
        torch.set_num_threads(1)  # the CPU rehearsal stays light on a shared machine
    module = _load_scenario_module(Path(args.src))
    fns = {"naive": module.naive, "fused": module.fused}
    dev = backend.torch_device()
    tmp = Path(tempfile.mkdtemp(prefix="kernels-", dir=args.work))
    try:
        import triton.testing  # noqa: F401

        have_triton = cuda
        why_no_triton = "" if cuda else "do_bench needs a CUDA device"
    except Exception as exc:
        have_triton, why_no_triton = False, f"triton not importable: {type(exc).__name__}: {exc}"
    flush = backend.cache_flush_bytes()
    ev_source = (f"{type(backend).__name__}.time_one_call after .flush_cache() ({flush / 2**20:.0f} MiB); "
                 + ("CUDA events" if cuda else "perf_counter between syncs (cpu)"))
    for shape_name, shape in shapes.items():
        try:
            torch._dynamo.reset()  # each shape compiles its own static kernels (no dynamic-shape recompile)
        except Exception:
            pass
        try:
            gen = torch.Generator(device=dev).manual_seed(0)
            x = torch.randn(shape, generator=gen, device=dev, dtype=torch.float32).to(torch.bfloat16)
            w = (1.0 + 0.1 * torch.randn(shape[-1], generator=gen, device=dev, dtype=torch.float32)).to(torch.bfloat16)
            call_args = (x, w)
        except Exception as exc:
            inner.add(error_row(f"kernels/{shape_name}: inputs {shape}", exc))
            continue
        tag = f"{shape_name} {'x'.join(map(str, shape))} bf16"
        for name in VARIANTS:
            check = f"kernels/{name} {tag}"
            if time.time() > deadline - 15:
                inner.add(row(f"{check}", "skip", None, detail="time budget of the step spent"))
                continue
            if args.dry_run and name == "compiled" and shape_name != "decode":
                inner.add(row(f"{check}", "skip", None, detail="dry run: compiled at the decode shape only (CPU time)"))
                continue
            try:
                with torch.no_grad():
                    t0 = time.perf_counter()
                    fn = backend.compile(module.naive) if name == "compiled" else fns[name]
                    for _ in range(3):
                        fn(*call_args)
                    backend.synchronize()
                    warm_s = time.perf_counter() - t0
                    times = []
                    for _ in range(n_samples):
                        backend.flush_cache()
                        times.append(float(backend.time_one_call(fn, call_args)))
                    ev = median(times)
                    inner.add(row(f"{check}: (a) reportgen event time", "pass" if ev and ev > 0 else "fail", ev,
                                  unit="µs", reps=f"median of {n_samples} flushed single calls", source=ev_source,
                                  detail=f"p10 {fmt(quantile(times, 0.1))} / p90 {fmt(quantile(times, 0.9))} µs; "
                                         f"first 3 calls (compile, warm-up) {warm_s:.1f} s"))
                    works = [_profile_one_call(torch, backend, fn, call_args, tmp) for _ in range(PROFILES_PER_CALL)]
                ksum = median(w["total_us"] for w in works)
                count = int(median(w["count"] for w in works) or 0)
                names = sorted(works[-1]["names"].items(), key=lambda kv: -kv[1])
                name_text = "; ".join(f"{n[:70]} x{c}" for n, c in names[:6])
                if not cuda and not ksum:
                    inner.add(row(f"{check}: (b) event / kernel sum", "skip", None, reps=f"{PROFILES_PER_CALL} profiles",
                                  detail="no device kernels on the cpu (dry run)"))
                else:
                    r = ratio(ev, ksum)
                    inner.add(row(f"{check}: (b) event / kernel sum", band_status(r, None, LAUNCH_GAP_LIMIT), r,
                                  expected=f"<= {LAUNCH_GAP_LIMIT} (above: launch gaps inside the event window)",
                                  reps=f"kernel sum: median of {PROFILES_PER_CALL} one-call profiles",
                                  source="torch.profiler CUDA activity (CUPTI): cats " + ", ".join(DEVICE_CATEGORIES),
                                  detail=f"kernel sum {fmt(ksum, 'µs')}; event {fmt(ev, 'µs')}"))
                if have_triton:
                    try:
                        db = _do_bench(fn, call_args)
                        r = ratio(db, ev)
                        inner.add(row(f"{check}: (c) do_bench / event", band_status(r, *DO_BENCH_BAND), r,
                                      expected=f"{DO_BENCH_BAND[0]}-{DO_BENCH_BAND[1]}",
                                      reps="do_bench median over ~100 ms of calls (warmup 25 ms)",
                                      source="triton.testing.do_bench (CUDA events, its own 256 MB flush)",
                                      detail=f"do_bench {fmt(db, 'µs')}; event {fmt(ev, 'µs')}"))
                    except Exception as exc:
                        inner.add(error_row(f"{check}: (c) do_bench", exc))
                else:
                    inner.add(row(f"{check}: (c) do_bench / event", "skip", None, detail=why_no_triton))
                lo, hi = KERNELS_EXPECTED[name]
                if not cuda and not count:
                    inner.add(row(f"{check}: (d) kernels per call", "skip", None, detail="no device kernels on the cpu"))
                else:
                    inner.add(row(f"{check}: (d) kernels per call", band_status(float(count), lo, hi), count,
                                  expected=f"{lo}-{hi if hi is not None else ''}".rstrip("-") + ("+" if hi is None else ""),
                                  reps=f"median of {PROFILES_PER_CALL} one-call profiles",
                                  source="torch.profiler CUDA activity: kernel + gpu_memcpy + gpu_memset events",
                                  detail=name_text))
            except Exception as exc:  # one variant or shape failing must not end the others
                inner.add(error_row(check, exc))
            finally:
                if cuda:
                    torch.cuda.synchronize()
        del call_args, x, w
        if cuda:
            torch.cuda.empty_cache()
    shutil.rmtree(tmp, ignore_errors=True)


def inner_main(args: argparse.Namespace) -> int:
    inner = Inner(Path(args.result))
    inner.save()
    try:
        {"env": inner_env, "kernels": inner_kernels}[args.inner](args, inner)
    except Exception as exc:
        inner.add(error_row(f"{args.inner}: step", exc))
        return 1
    return 0


# ---------------------------------------------------------------------------------------------------------------
# Self-test of the parsers (runs every time: a wrong parser would make every figure wrong)


def selftest_rows(work: Path) -> list[dict[str, Any]]:
    """The trace and bundle parsers on a synthetic bundle whose answers are known."""
    rows: list[dict[str, Any]] = []
    try:
        bundle = work / "selftest" / "run1"
        (bundle / "traces").mkdir(parents=True)
        events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "ts": 0, "dur": 50},
                  {"ph": "X", "cat": "kernel", "name": "k_mul", "ts": 10, "dur": 30.0},
                  {"ph": "X", "cat": "Kernel", "name": "k_mul", "ts": 60, "dur": 30.0},
                  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 100, "dur": 5.0},
                  {"ph": "X", "cat": "gpu_memset", "name": "Memset", "ts": 110, "dur": 5.0},
                  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#2", "ts": 0, "dur": 500.0},
                  {"ph": "f", "cat": "ac2g", "name": "ac2g", "ts": 10}]
        with gzip.open(bundle / "traces" / "v.pt.trace.json.gz", "wt", encoding="utf-8") as fh:
            json.dump({"traceEvents": events}, fh)
        ops = [{"name": "aten::mul", "self_device_us": 60.0}, {"name": "k_mul", "self_device_us": 60.0},
               {"name": "aten::copy_", "self_device_us": 10.0}]
        run = {"device": "cuda", "settings": {"cache_flush_bytes": 268435456}, "peak": {"bandwidth_bytes_per_s": 4.2e12,
               "source": "synthetic"}, "variants": [{"name": "v", "status": "ok", "samples_us": [80, 75, 90],
               "calls_per_sample": 1, "time_basis": "device", "trace_path": "traces/v.pt.trace.json.gz", "ops": ops,
               "profiled_steps": 2, "device_event_count": 2}]}
        (bundle / "run.json").write_text(json.dumps(run), encoding="utf-8")
        got = {r["check"]: r for r in bundle_rows(bundle, "cuda", 268435456, 4.8e12)}
        want = {"profile/v: op-table device total / trace kernel time": (130.0 / 70.0, "fail"),
                "profile: measured bandwidth ceiling / vendor 4.8 TB/s": (4.2 / 4.8, "info"),
                "profile/v: stored median / trace kernel time per step": (80.0 / 35.0, "info"),
                "profile: cache_flush_bytes stored": (268435456, "pass"),
                "profile/v: calls_per_sample": (1, "pass")}
        bad = [f"{k}: got {got.get(k, {}).get('value')} {got.get(k, {}).get('status')}, want {v}" for k, v in want.items()
               if k not in got or got[k]["status"] != v[1] or abs(float(got[k]["value"]) - float(v[0])) > 1e-9]
        ab = {r["check"]: r["status"] for r in ab_rows({"verdict": "no change", "variants": [
            {"name": "v", "verdict": "no change", "stats": {"ratio": 1.0}}]}, 0)}
        if ab != {"ab: exit code": "pass", "ab: verdict": "pass", "ab/v: verdict": "pass"}:
            bad.append(f"ab rows {ab}")
        rows.append(row("self-test: trace / run.json / ab parsers on synthetic data", "fail" if bad else "pass",
                        len(want) + 1 - len(bad), unit=f"of {len(want) + 1} right", detail="; ".join(bad)))
    except Exception as exc:
        rows.append(error_row("self-test: parsers", exc))
    finally:
        shutil.rmtree(work / "selftest", ignore_errors=True)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# The orchestrator


class Orchestrator:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out, self.work, self.src = Path(args.out), Path(args.work), Path(args.src)
        self.device = "cpu" if args.dry_run else "cuda"
        self.py = sys.executable
        self.store, self.site = self.work / "store", self.work / "site"
        self.deadline = float(args.deadline)
        self.skip = {s.strip() for s in (args.skip or "").split(",") if s.strip()}
        self.env_extra: dict[str, Any] = {}
        self.expected_flush: int | None = None
        self.child_env = {k: v for k, v in os.environ.items()
                          if k not in ("REPORTGEN_STORE", "REPORTGEN_DEVICE", "REPORTGEN_PEAK_BANDWIDTH_GBPS")}
        meta = {
            "what": "reportgen GPU check (benchmarks/device_check.sh): the output of ONE run",
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "started_epoch": time.time(),
            "dry_run": bool(args.dry_run),
            "device": self.device,
            "install": args.install,
            "git_sha": os.environ.get("DC_GIT_SHA") or None,
            "git_dirty": (os.environ.get("DC_GIT_DIRTY") or "0") not in ("", "0"),
            "hostname": platform.node(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "unset_for_children": sorted(k for k in ("REPORTGEN_STORE", "REPORTGEN_DEVICE", "REPORTGEN_PEAK_BANDWIDTH_GBPS")
                                         if k in os.environ),
            "environment": {},
        }
        self.summary = Summary(self.out, meta)

    # -- budget --

    def budget(self, step: str) -> float | None:
        """Seconds ``step`` may take: its cap, less what the later steps need; None when too little is left."""
        names = [s[0] for s in STEPS]
        i = names.index(step)
        later = sum(s[2] for s in STEPS[i + 1:] if s[0] not in self.skip)
        left = self.deadline - time.time() - later - 10
        cap, least = STEPS[i][1], STEPS[i][2]
        return min(cap, left) if left >= least else None

    def step(self, name: str, fn: Callable[[float], list[dict[str, Any]]], command: str = "") -> None:
        t0 = time.time()
        if name in self.skip:
            self.summary.add([row(f"{name}: step", "skip", None, detail="--skip")])
            self.summary.steps.append({"step": name, "result": "skipped (--skip)", "seconds": 0.0, "command": command})
            self.summary.save()
            return
        limit = self.budget(name)
        if limit is None:
            left = self.deadline - time.time()
            self.summary.add([row(f"{name}: step", "skip", None, detail=f"time budget: {left:.0f} s left")])
            self.summary.steps.append({"step": name, "result": "skipped (time budget)", "seconds": 0.0, "command": command})
            self.summary.save()
            return
        print(f"\n=== step {name} (up to {limit:.0f} s; {self.deadline - t0:.0f} s left in all) ===", flush=True)
        result = "done"
        try:
            rows = fn(limit)
        except Exception as exc:  # the step's own code broke: recorded, the next step runs
            rows = [error_row(f"{name}: step", exc)]
            result = "error"
        self.summary.add(rows)
        self.summary.steps.append({"step": name, "result": result, "seconds": round(time.time() - t0, 1),
                                   "command": command})
        self.summary.save()

    # -- steps --

    def inner(self, which: str, limit: float) -> list[dict[str, Any]]:
        result = self.work / f"inner-{which}.json"
        cmd = [self.py, str(Path(__file__).resolve()), "--inner", which, "--result", str(result), "--src", str(self.src),
               "--work", str(self.work), "--deadline", str(time.time() + limit - 5)]
        if self.args.dry_run:
            cmd.append("--dry-run")
        ran = run_cmd(cmd, limit, self.work, f"inner-{which}", self.work, self.child_env)
        try:
            doc = json.loads(result.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            doc = {"rows": [], "extra": {}}
            rows_err = [row(f"{which}: result file", "error", None, detail=f"{type(exc).__name__}: {exc}")]
        else:
            rows_err = []
        rows = list(doc.get("rows") or []) + rows_err
        self.env_extra.update(doc.get("extra") or {})
        if ran["rc"] != 0:
            what = "killed at the time limit" if ran["timed_out"] else f"exit code {ran['rc']}"
            rows.append(row(f"{which}: child process", "error", ran["rc"], detail=f"{what} after {ran['seconds']:.0f} s",
                            tb="output tail:\n" + ran["tail"]))
        return rows

    def env_step(self, limit: float) -> list[dict[str, Any]]:
        rows = self.nvidia_smi()
        rows += self.inner("env", limit - 10)
        env = dict(self.env_extra.get("environment") or {})
        if "driver" not in env or not env.get("driver"):
            env["driver"] = self.summary.meta.get("driver")
        self.summary.meta["environment"] = env
        self.summary.meta["flush_bytes"] = self.env_extra.get("flush_bytes")
        if self.device == "cuda":  # what reportgen/devices/cuda.py documents: max(256 MiB, 2 x L2)
            l2 = env.get("l2_bytes")
            self.expected_flush = max(FLUSH_MIN_BYTES_EXPECTED, 2 * int(l2)) if l2 is not None else None
        else:
            self.expected_flush = 0  # the CPU backend does not flush
        rows.append(row("env: CUDA_VISIBLE_DEVICES", "info", os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"),
                        detail="reportgen's CUDA backend uses device 0 of what is visible"))
        return rows

    def nvidia_smi(self) -> list[dict[str, Any]]:
        query = ["nvidia-smi", "--query-gpu=name,compute_mode,mig.mode.current,clocks.sm,clocks.mem", "--format=csv"]
        if shutil.which("nvidia-smi") is None:
            status = "skip" if self.args.dry_run else "fail"
            return [row("env: nvidia-smi", status, None, detail="nvidia-smi not found on PATH")]
        rows = []
        try:
            out = subprocess.run(query, capture_output=True, text=True, timeout=30)
            text = (out.stdout + out.stderr).strip()
            lines = [ln for ln in out.stdout.strip().splitlines() if ln.strip()]
            self.summary.meta["nvidia_smi"] = text
            if out.returncode == 0 and len(lines) >= 2:
                head = [h.strip() for h in lines[0].split(",")]
                vals = [v.strip() for v in lines[1].split(",")]
                fields = dict(zip(head, vals, strict=False))
                self.summary.meta["nvidia_smi_line"] = "; ".join(f"{k}={v}" for k, v in fields.items())
                for k, v in fields.items():
                    status = "info"
                    expected = ""
                    if k.startswith("compute_mode"):
                        expected = "Default (or Exclusive_Process)"
                    if k.startswith("mig.mode"):
                        expected = "Disabled or [N/A] (MIG slices change the L2 and the bandwidth)"
                    rows.append(row(f"env: nvidia-smi {k}", status, v, expected=expected,
                                    detail=f"{len(lines) - 1} GPU line(s)" if k == "name" else ""))
            else:
                rows.append(row("env: nvidia-smi query", "error", out.returncode, detail=text[:400]))
            drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30)
            self.summary.meta["driver"] = (drv.stdout.strip().splitlines() or [None])[0]
            full = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=60)
            _write(self.out / "nvidia-smi.txt", "$ " + " ".join(query) + "\n" + text + "\n\n$ nvidia-smi -q\n"
                   + full.stdout[:400_000] + full.stderr[:10_000])
        except Exception as exc:
            rows.append(error_row("env: nvidia-smi", exc))
        return rows

    def reportgen_cmd(self, *args: str) -> list[str]:
        return [self.py, "-m", "reportgen", *args]

    def profile_step(self, limit: float) -> list[dict[str, Any]]:
        before = {p.name for p in find_bundles(self.store)}
        cmd = self.reportgen_cmd("profile", "--device", self.device, "--store", str(self.store), "--quiet")
        if self.args.dry_run:
            cmd += ["--shape", "8,256,1024", "--samples", "5", "--variants", "naive,fused", "--threads", "1"]
        ran = run_cmd(cmd, limit, self.work, "profile", self.work, self.child_env)
        rows = [row("profile: exit code", "pass" if ran["rc"] == 0 else "fail", ran["rc"], expected="0",
                    source=" ".join(cmd[1:]), detail=("killed at the time limit; " if ran["timed_out"] else "")
                    + f"{ran['seconds']:.0f} s" + ("" if ran["rc"] == 0 else "; output tail: " + ran["tail"][-600:]))]
        new = [p for p in find_bundles(self.store) if p.name not in before]
        if not new:
            rows.append(row("profile: stored bundle", "fail", None, detail="no new run.json in the store"))
            return rows
        rows.append(row("profile: stored bundle", "pass", new[-1].name, detail=f"{len(new)} new run(s)"))
        name = str((self.summary.meta.get("environment") or {}).get("device_name") or "")
        vendor = next((bw for model, bw in VENDOR_BW_BYTES_PER_S.items() if model in name.upper()), None)
        if vendor is None and not self.args.dry_run:
            vendor = VENDOR_BW_BYTES_PER_S["H200"]  # the brief's reference figure, whatever the GPU
        for bundle in new:
            rows += bundle_rows(bundle, self.device, self.expected_flush, vendor)
        return rows

    def ab_step(self, limit: float) -> list[dict[str, Any]]:
        output = self.work / "ab.json"
        max_s = max(30, int(limit - 75))
        cmd = self.reportgen_cmd("ab", "--base", str(self.src), "--head", str(self.src), "--device", self.device,
                                 "--format", "json", "--output", str(output), "--max-seconds", str(max_s),
                                 "--store", str(self.store))
        if self.args.dry_run:
            cmd += ["--shape", "8,1024", "--variants", "naive,fused", "--threads", "1"]
        ran = run_cmd(cmd, limit, self.work, "ab", self.work, self.child_env)
        doc = None
        rows: list[dict[str, Any]] = []
        if output.is_file():
            try:
                doc = json.loads(output.read_text(encoding="utf-8"))
                shutil.copyfile(output, self.out / "ab.json")
            except ValueError as exc:
                rows.append(error_row("ab: JSON output", exc))
        rows = ab_rows(doc, ran["rc"]) + rows
        rows[0]["detail"] = (("killed at the time limit; " if ran["timed_out"] else "") + f"{ran['seconds']:.0f} s, "
                             f"--max-seconds {max_s}; " + rows[0]["detail"]
                             + ("" if ran["rc"] == 0 else "; output tail: " + ran["tail"][-600:]))
        rows[0]["source"] = " ".join(cmd[1:])
        return rows

    def build_step(self, limit: float) -> list[dict[str, Any]]:
        cmd = self.reportgen_cmd("build", "--runs", str(self.store), "--out", str(self.site))
        ran = run_cmd(cmd, max(10.0, limit - 20), self.work, "build", self.work, self.child_env)
        pages = list(self.site.rglob("*.html")) if self.site.is_dir() else []
        rows = [row("build: exit code", "pass" if ran["rc"] == 0 else "fail", ran["rc"], expected="0",
                    source=" ".join(cmd[1:]), detail=f"{ran['seconds']:.0f} s; {len(pages)} HTML pages"
                    + ("" if ran["rc"] == 0 else "; output tail: " + ran["tail"][-600:]))]
        rows.append(self.tarball())
        return rows

    def tarball(self) -> dict[str, Any]:
        """store.tar.gz of the store and the site; without the traces when that is over the limit, then run.json only."""
        target = self.out / "store.tar.gz"
        levels = (("everything", lambda p: True),
                  ("without the stored traces", lambda p: not p.name.endswith((".trace.json.gz", ".json.gz"))),
                  ("run.json and site Markdown/HTML only", lambda p: p.suffix in (".json", ".md", ".html", ".log")))
        try:
            for what, keep in levels:
                with tarfile.open(target, "w:gz", compresslevel=6) as tar:
                    for top, name in ((self.store, "store"), (self.site, "site")):
                        if not top.is_dir():
                            continue
                        for p in sorted(top.rglob("*")):
                            if p.is_file() and not p.is_symlink() and keep(p) and not p.name.startswith(".tmp"):
                                tar.add(p, arcname=f"{name}/{p.relative_to(top)}", recursive=False)
                size = target.stat().st_size
                if size <= TARBALL_LIMIT_BYTES:
                    return row("build: store.tar.gz", "pass", size, unit="B", expected="<= 16 MiB",
                               detail=f"{what}; store {'present' if self.store.is_dir() else 'MISSING'}, "
                                      f"site {'present' if self.site.is_dir() else 'MISSING'}")
            target.unlink()
            return row("build: store.tar.gz", "fail", size, unit="B", expected="<= 16 MiB", detail="too large even reduced")
        except Exception as exc:
            return error_row("build: store.tar.gz", exc)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        try:
            self.summary.add(selftest_rows(self.work))
            self.summary.save()
            self.step("env", self.env_step, "nvidia-smi; device_check.py --inner env")
            self.step("profile", self.profile_step, f"python3 -m reportgen profile --device {self.device} --quiet")
            self.step("kernels", lambda limit: self.inner("kernels", limit), "device_check.py --inner kernels")
            self.step("ab", self.ab_step, f"python3 -m reportgen ab --base . --head . --device {self.device} --format json")
            self.step("build", self.build_step, "python3 -m reportgen build; tar")
        except Stopped as exc:
            self.summary.add([row("device check: stopped", "error", None,
                                  detail=f"{exc} during the step after the last one listed; the rows above are complete")])
            self.summary.save()
            print(f"device check: stopped by {exc}; partial summary in {self.out / 'summary.md'}", flush=True)
            return 124
        self.summary.save(complete=True)
        c = self.summary.counts()
        print(f"\ndevice check: {c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['skip']} skipped, "
              f"{c['info']} info; summary in {self.out / 'summary.md'}", flush=True)
        return 0 if c["fail"] == 0 and c["error"] == 0 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "device-check-out"))
    p.add_argument("--work", help="scratch folder (the store and the site are made here)")
    p.add_argument("--src", default=str(Path(__file__).resolve().parents[1]), help="the checkout (ab's base and head)")
    p.add_argument("--deadline", type=float, help="epoch seconds by which everything must be done (default: now + 570)")
    p.add_argument("--install", default="(as found on PYTHONPATH)", help="how reportgen was installed (for the summary)")
    p.add_argument("--dry-run", action="store_true", help="CPU rehearsal: --device cpu, small shapes, few repetitions")
    p.add_argument("--skip", default="", help="comma-separated steps to leave out: env, profile, kernels, ab, build")
    p.add_argument("--inner", choices=("env", "kernels"), help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--device", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.deadline = args.deadline or time.time() + 570
    args.device = args.device or ("cpu" if args.dry_run else "cuda")
    if args.inner:
        return inner_main(args)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if not args.work:
        args.work = tempfile.mkdtemp(prefix="device-check-")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    return Orchestrator(args).run()


if __name__ == "__main__":
    sys.exit(main())
