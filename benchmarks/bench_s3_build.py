"""A cold ``reportgen build`` from an S3 store: what the build's mirror fetches, and its wall time.

moto's S3 server runs on 127.0.0.1 (in this process); ``--runs`` runs of bench_site.py's synthetic store (the real
CPU run in benchmarks/data, its real traces) are uploaded once; then each code folder given (``--code``, put first
on PYTHONPATH: a checkout of another commit, whose ``reportgen/templates`` and ``reportgen/scenarios`` link to its
own folders as an installed wheel has them) builds the site ``--repeat`` times, each time with an empty cache
(``XDG_CACHE_HOME``) and no site, so every run is new to it. Printed per build: code, exit code, wall seconds, the
mirror's files and bytes.

    python benchmarks/bench_s3_build.py --runs 200 --keep-traces 5 --code /tmp/base --code . --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_site  # noqa: E402
from machine import reference_loop_s  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def s3_store_of(runs: int, prefix: str) -> Iterator[tuple[dict[str, str], Any, Path]]:
    """moto's S3 server on 127.0.0.1 (in this process) with ``runs`` runs of bench_site.py's synthetic store uploaded
    to ``s3://bench/runs`` (16 at a time); yields the environment that reaches it (also put in ``os.environ``), the
    ObjectStore, and a scratch folder (``<folder>/whole`` holds the runs' bundles) removed afterwards."""
    from moto import server as moto_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}"}
    os.environ.update(env)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        import boto3

        from reportgen.store.objects import ObjectStore

        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"]).create_bucket(Bucket="bench")
        bench_site.make_store(work / "whole", 0, runs)
        store = ObjectStore.open("s3://bench/runs")
        bundles = [b for b in sorted((work / "whole").iterdir()) if not b.name.startswith(".")]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(store.put_bundle, bundles))
        yield env, store, work
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _tree(folder: Path) -> tuple[int, int]:
    """Files and bytes of the run folders under ``folder`` (not its hidden folders: the catalog, the marks)."""
    sizes = [p.stat().st_size for p in folder.rglob("*")
             if p.is_file() and not p.relative_to(folder).parts[0].startswith(".")]
    return len(sizes), sum(sizes)


def _build(code: Path, url: str, env: dict[str, str], work: Path, keep: int) -> dict[str, object]:
    cache, out = work / "cache", work / "site"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    run_env = {**env, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(code), "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "reportgen", "build", "--runs", url, "--out", str(out),
                           "--keep-traces", str(keep)], env=run_env, cwd=work, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    mirrors = list((cache / "reportgen" / "stores").iterdir()) if (cache / "reportgen" / "stores").is_dir() else []
    files, size = _tree(mirrors[0]) if mirrors else (0, 0)
    return {"code": str(code), "rc": proc.returncode, "wall_s": round(wall, 2), "mirror_files": files,
            "mirror_bytes": size, "stderr": proc.stderr[-300:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--keep-traces", type=int, default=5)
    parser.add_argument("--code", type=Path, action="append", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with s3_store_of(args.runs, "bench-s3-") as (env, _store, work):
        files, size = _tree(work / "whole")
        machine = f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        print(json.dumps({"machine": machine, "runs": args.runs, "keep_traces": args.keep_traces,
                          "store_files": files, "store_bytes": size}))
        results: dict[str, list[float]] = {}
        for _ in range(args.repeat):  # the code folders alternate, so that a busy moment falls on all of them
            for code in args.code:
                r = _build(code.resolve(), "s3://bench/runs", env, work, args.keep_traces)
                print(json.dumps(r))
                if r["rc"] == 0:
                    results.setdefault(str(r["code"]), []).append(float(r["wall_s"]))  # type: ignore[arg-type]
        for code, walls in results.items():
            print(json.dumps({"code": code, "median_wall_s": statistics.median(walls), "builds": len(walls)}))
        print(json.dumps({"reference_loop_s": reference_loop_s()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
