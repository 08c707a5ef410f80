"""Time ``reportgen build`` at scale: cold builds of N runs, adding one run, and the site's weight.

    .venv/bin/python benchmarks/bench_site.py --runs 1 100 1000 --out benchmarks/results/bench_site.json

The store is synthetic but shaped like a real one: every run is the real CPU profile in
``benchmarks/data/20261130T052940Z-cpu-286a49`` (RMSNorm 8x512 float32) (three RMSNorm variants and their real Kineto traces)
with its own id and time, 50 timing samples per variant (varied per run, so every history point
differs) and 15 op rows per variant. Each build runs as ``reportgen build`` in a fresh Python
process (nothing cached between builds but the old site itself, which the append case is
about). For each process: wall time, ``ru_maxrss`` from ``wait4`` (the largest single process
of the tree), and the peak of the whole process tree's summed RSS sampled every 20 ms (the
build renders run pages in worker processes). Results, with the machine, its load and the
targets beside each figure, go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "benchmarks" / "data" / "20261130T052940Z-cpu-286a49"
SAMPLES = 50
OP_ROWS = 15
EPOCH = "1764460800"
TARGETS = {
    "cold_build_10000_s": "<= 120 s",
    "add_one_run_s": "<= 1 s at 1,000 and at 10,000 runs, not growing with the store",
    "front_page_bytes": "<= 300 kB (index.html with its images and CSS)",
}

sys.path.insert(0, str(ROOT))

from machine import reference_loop_s  # noqa: E402  benchmarks/machine.py, beside this script

from reportgen.model.run import OpRow, Run  # noqa: E402
from reportgen.store.loader import load_run  # noqa: E402
from reportgen.store.writer import write_bundle  # noqa: E402


def _stamp(i: int) -> tuple[str, str]:
    """Run id and created_utc of the i-th synthetic run: one per hour, in order."""
    day, hour = divmod(i, 24)
    month, mday = (day // 28) % 12 + 1, day % 28 + 1
    year = 2026 + day // (28 * 12)
    return (f"{year}{month:02d}{mday:02d}T{hour:02d}0000Z-cpu-bench-{i:06d}",
            f"{year}-{month:02d}-{mday:02d}T{hour:02d}:00:00Z")


def synthetic(template: Run, i: int) -> Run:
    """The template run as the i-th run of the store: new id and time, 50 samples, 15 op rows per variant."""
    run_id, created = _stamp(i)
    variants = []
    for k, v in enumerate(template.variants):
        base = sorted(v.samples_us)[len(v.samples_us) // 2] * (1 + 0.05 * ((i * (k + 3)) % 7) / 7)
        samples = tuple(base * (1 + 0.01 * ((j * 7 + i) % 11 - 5)) for j in range(SAMPLES))
        ops = list(v.ops[:OP_ROWS])
        ops += [OpRow(f"aten::bench_pad_{n}", 1, 1.0 + n, 1.0 + n, 0.0, 0.0, "[[8, 512]]")
                for n in range(OP_ROWS - len(ops))]
        variants.append(replace(v, samples_us=samples, ops=tuple(ops)))
    return replace(template, run_id=run_id, created_utc=created, variants=tuple(variants))


def make_store(store: Path, first: int, count: int) -> None:
    """Write runs ``first .. first+count-1`` into ``store``, each with the template's real traces."""
    template = load_run(TEMPLATE)
    traces = {v.trace_path: (TEMPLATE / v.trace_path).read_bytes() for v in template.variants if v.trace_path}
    for i in range(first, first + count):
        write_bundle(store, synthetic(template, i), dict(traces))


def _tree_rss_bytes(pid: int) -> int:
    """Summed VmRSS of ``pid`` and all its descendants (0 once they are gone)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
            total += int(m.group(1)) * 1024 if m else 0
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


KEEP_TRACES: list[str] = []
"""``--keep-traces N`` for every build, when the benchmark is asked for it."""


def timed_build(store: Path, out: Path) -> dict[str, object]:
    """Run ``reportgen build`` in a fresh process: wall seconds, max single-process RSS, peak tree RSS."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-m", "reportgen", "build", "--runs", str(store), "--out", str(out), *KEEP_TRACES]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_bytes(proc.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    stdout, stderr = proc.stdout.read().decode(), proc.stderr.read().decode()  # type: ignore[union-attr]
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"build failed ({proc.returncode}): {stderr[-2000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "max_process_rss_mib": round(usage.ru_maxrss / 1024),
            "peak_tree_rss_mib": round(peak[0] / 2**20), "summary": stdout.strip()}


def _dir_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def site_weight(site: Path, run_id: str) -> dict[str, int]:
    """Bytes of one run page (HTML + images; and its folder with data) and of the index with its images."""
    run_dir = site / "runs" / run_id
    images = sum(p.stat().st_size for p in run_dir.iterdir() if p.suffix in (".png", ".svg"))
    html = (run_dir / "index.html").stat().st_size
    index_html = (site / "index.html").read_text(encoding="utf-8")
    srcs = sorted(set(re.findall(r'<img[^>]*\ssrc="([^"]+)"', index_html)))
    css = sum((site / "assets" / n).stat().st_size for n in ("style.css", "favicon.svg"))
    index_images = sum((site / s).stat().st_size for s in srcs)
    return {
        "run_page_html_bytes": html, "run_page_images_bytes": images, "run_page_with_images_bytes": html + images,
        "run_folder_bytes_with_data": _dir_bytes(run_dir),
        "index_html_bytes": len(index_html.encode()), "index_images": len(srcs),
        "index_images_bytes": index_images,
        "index_with_images_and_css_bytes": len(index_html.encode()) + index_images + css,
    }


def copy_store(source: Path, store: Path, n: int) -> None:
    """A hard-linked copy of ``source``, a store of runs 0 .. n-1 that ``make_store`` wrote (its bundles are never
    changed in place, so the links are safe), without its catalog: the cold build makes one, as from a new store."""
    names = sorted(p.name for p in source.iterdir() if not p.name.startswith("."))
    if names != [_stamp(i)[0] for i in range(n)]:
        raise SystemExit(f"--store-from {source}: holds {len(names)} bundles, not make_store's runs 0..{n - 1}")
    subprocess.run(["cp", "-al", str(source), str(store)], check=True)
    shutil.rmtree(store / ".catalog", ignore_errors=True)


def bench(n: int, work: Path, add_one: int, cold_repeat: int, source: Path | None = None) -> dict[str, object]:
    """Cold builds of ``n`` runs (a store written now, or copied from ``source``); then ``add_one`` builds that each
    add one run; and the site's weight."""
    store, out = work / f"store-{n}", work / f"site-{n}"
    t0 = time.perf_counter()
    if source is None:
        make_store(store, 0, n)
    else:
        copy_store(source, store, n)
    result: dict[str, object] = {"runs": n, "store_written_s": round(time.perf_counter() - t0, 1),
                                 "store_copied_from": None if source is None else str(source),
                                 "load_average_1min_before": round(os.getloadavg()[0], 2),
                                 "reference_s_before": reference_loop_s()}
    colds = []
    for _ in range(cold_repeat):
        shutil.rmtree(out, ignore_errors=True)
        colds.append(timed_build(store, out))
    result["cold"] = sorted(colds, key=lambda c: c["wall_s"])[len(colds) // 2]  # the median build
    result["cold_wall_s_all"] = [c["wall_s"] for c in colds]
    adds = []
    for k in range(add_one):
        make_store(store, n + k, 1)
        adds.append(timed_build(store, out))
    if adds:
        result["add_one"] = sorted(adds, key=lambda a: a["wall_s"])[len(adds) // 2]
        result["add_one_wall_s_all"] = [a["wall_s"] for a in adds]
        result["add_one_all_rendered_only_the_new_run"] = all(_rendered(a) <= _drawn_per_add() for a in adds)
    result["weight"] = site_weight(out, _stamp(n + add_one - 1)[0])
    result["site_bytes"] = _dir_bytes(out)
    result["reference_s_mid"] = reference_loop_s()
    result["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    result["reference_s_after"] = reference_loop_s()
    return result


def _rendered(build: dict[str, Any]) -> int:
    """The pages a build drew, from its summary line (``... (N rendered, ...``)."""
    found = re.search(r"\((\d+) rendered,", str(build["summary"]))
    if found is None:
        raise SystemExit(f"no page count in the build's summary: {build['summary']!r}")
    return int(found.group(1))


def _drawn_per_add() -> int:
    """Pages an add of one run draws: its own, and with ``--keep-traces`` the run of its series it retires (drawn
    again without traces). Every synthetic run is of one series."""
    return 2 if KEEP_TRACES else 1


def verdicts(results: list[dict[str, Any]]) -> dict[str, dict[str, object]]:
    """Each targeted figure beside its target, and whether it was met."""
    out: dict[str, dict[str, object]] = {}
    for r in results:
        n = r["runs"]
        if n == 10000:
            cold = r["cold"]
            out["cold_build_10000_s"] = {"figure": cold["wall_s"], "target": TARGETS["cold_build_10000_s"],
                                         "met": cold["wall_s"] <= 120}
        if "add_one" in r:
            add = r["add_one"]
            out[f"add_one_run_to_{n}_s"] = {
                "figure": f"{add['wall_s']} (median of {len(r['add_one_wall_s_all'])} builds)",
                "target": TARGETS["add_one_run_s"],
                "met": add["wall_s"] <= 1 and r["add_one_all_rendered_only_the_new_run"]}
        front = r["weight"]["index_with_images_and_css_bytes"]
        out[f"front_page_bytes_{n}"] = {"figure": front, "target": TARGETS["front_page_bytes"],
                                        "met": front <= 300_000}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cold-repeat", type=int, default=1, help="cold builds of each size (the median is kept)")
    parser.add_argument("--add-repeat", type=int, default=5,
                        help="builds adding one run each to every site (the median is kept)")
    parser.add_argument("--keep", action="store_true", help="keep the stores and sites (printed)")
    parser.add_argument("--keep-traces", type=int, default=None, help="pass --keep-traces N to every build")
    parser.add_argument("--store-from", type=Path, default=None,
                        help="with one --runs N: hard-link the store from this folder of make_store's runs 0..N-1 "
                             "(a 100,000-run store takes about 45 minutes to write)")
    args = parser.parse_args()
    if args.store_from is not None and len(args.runs) != 1:
        parser.error("--store-from takes one --runs N")
    if args.keep_traces is not None:
        KEEP_TRACES[:] = ["--keep-traces", str(args.keep_traces)]
    work = Path(tempfile.mkdtemp(prefix="bench-site-"))
    results = []
    try:
        for n in args.runs:
            r = bench(n, work, add_one=args.add_repeat, cold_repeat=args.cold_repeat, source=args.store_from)
            print(json.dumps(r), flush=True)
            results.append(r)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    doc = {
        "command": " ".join([".venv/bin/python", "benchmarks/bench_site.py", *sys.argv[1:]]),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "targets": TARGETS, "template_bundle": str(TEMPLATE.relative_to(ROOT)),
        "samples_per_variant": SAMPLES, "op_rows_per_variant": OP_ROWS, "results": results,
        "verdicts": verdicts(results),
    }
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
