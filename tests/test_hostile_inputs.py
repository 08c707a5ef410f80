"""A catalogue of bad inputs through the CLI: each is one line naming the file and the fault, a documented
exit code, and leaves the store and the site byte-identical (no leftover temporary folder either).

Also: hostile-but-legal names (``../``, ``/``, unicode, very long) are accepted and never become a path
outside the store or the site; and the trace reader never raises anything but TraceError (hypothesis).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, variant, write_synthetic
from hostile import snapshot, write_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reportgen import site as site_builder
from reportgen.cli import main
from reportgen.errors import ExitCode, TraceError
from reportgen.store.layout import RUN_FILE, is_valid_run_id
from reportgen.store.loader import load_store
from reportgen.store.runjson import run_to_json
from reportgen.traces.reader import read_trace_bytes

ROOT = Path(__file__).resolve().parent.parent
RUN_A = "20261130T000000Z-cpu-test-abc123"
RUN_B = "20261201T000000Z-cpu-test-bbb222"
GOOD_TRACE = json.dumps(chrome_trace()).encode()
GOOD_CRC = f"{int.from_bytes(gzip.compress(GOOD_TRACE, mtime=0)[-8:-4], 'little'):x}"
DOCUMENTED_CODES = {int(m) for m in re.findall(r"^\| (\d+) \|", (ROOT / "docs" / "exit-codes.md").read_text(), re.M)}


@dataclass
class Ctx:
    """The world a case runs in: a store with run A, a site built from it, a git repo, an inputs folder."""

    tmp: Path
    store: Path
    site: Path
    repo: Path
    inp: Path
    env: dict[str, str]

    def fmt(self, text: str) -> str:
        return text.format(store=self.store, site=self.site, inp=self.inp, repo=self.repo, tmp=self.tmp, crc=GOOD_CRC)


@pytest.fixture(scope="session")
def _built_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store with one valid run and the site built from it, made once and copied per case."""
    root = tmp_path_factory.mktemp("hostile-base")
    store = root / "store"
    write_synthetic(store, synthetic_run(run_id=RUN_A, with_traces=True))
    site_builder.build_site(store, root / "site", "/")
    return store, root / "site"


@pytest.fixture()
def ctx(tmp_path: Path, _built_site: tuple[Path, Path]) -> Ctx:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(_built_site[0], work / "store", symlinks=True)
    shutil.copytree(_built_site[1], work / "site", symlinks=True)
    shutil.copyfile(_built_site[1].parent / ".site.lock", work / ".site.lock")  # a built site has its lock file
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    inp = tmp_path / "in"
    inp.mkdir()
    return Ctx(tmp_path, work / "store", work / "site", repo, inp, {})


# ---------------------------------------------------------------------------------------------
# Builders for the cases


def _import(ctx: Ctx, data: bytes, name: str = "t.json") -> list[str]:
    (ctx.inp / name).write_bytes(data)
    return ["import", str(ctx.inp / name), "--store", str(ctx.store)]


def _build(ctx: Ctx) -> list[str]:
    return ["build", "--runs", str(ctx.store), "--out", str(ctx.site)]


def _event(**fields: object) -> bytes:
    return json.dumps({"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, **fields}]}).encode()


def _bundle_text(ctx: Ctx, text: str | bytes, folder: str = RUN_B) -> list[str]:
    """A run folder holding ``text`` as its run.json; the command is a build."""
    (ctx.store / folder).mkdir()
    path = ctx.store / folder / RUN_FILE
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return _build(ctx)


def _bundle(ctx: Ctx, mutate: Callable[[dict], object], folder: str = RUN_B) -> list[str]:
    """A copy of a valid run B with ``mutate`` applied to its JSON; the command is a build."""
    data = json.loads(run_to_json(synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z")))
    mutate(data)
    return _bundle_text(ctx, json.dumps(data), folder)


def _bundle_raw(ctx: Ctx, old: str, new: str) -> list[str]:
    """Run B's run.json text with ``old`` replaced by ``new`` (JSON that json.dumps cannot write)."""
    text = run_to_json(synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z"))
    assert old in text
    return _bundle_text(ctx, text.replace(old, new, 1))


def _set(path: str, value: object) -> Callable[[dict], None]:
    """Set a dotted path (``variants.0.samples_us``) in a run dict."""
    def apply(data: dict) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        node: object = data
        for k in keys[:-1]:
            node = node[k]  # type: ignore[index]
        node[keys[-1]] = value  # type: ignore[index]
    return apply


def _symlinked_run_folder(ctx: Ctx) -> list[str]:
    outside = ctx.tmp / "outside"
    write_synthetic(outside, synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z"))
    (ctx.store / RUN_B).symlink_to(outside / RUN_B, target_is_directory=True)
    return _build(ctx)


def _symlinked_run_json(ctx: Ctx) -> list[str]:
    secret = ctx.tmp / "secret.json"
    secret.write_text(run_to_json(synthetic_run(run_id=RUN_B)))
    (ctx.store / RUN_B).mkdir()
    (ctx.store / RUN_B / RUN_FILE).symlink_to(secret)
    return _build(ctx)


def _missing_trace(ctx: Ctx) -> list[str]:
    run = synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z", with_traces=True)
    folder = write_synthetic(ctx.store, run)
    (folder / "traces" / "fused.pt.trace.json.gz").unlink()
    return _build(ctx)


def _corrupt_trace(ctx: Ctx) -> list[str]:
    run = synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z", with_traces=True)
    folder = write_synthetic(ctx.store, run)
    path = folder / "traces" / "fused.pt.trace.json.gz"
    path.write_bytes(path.read_bytes()[:30])
    return _build(ctx)


def _gzip_bomb(ctx: Ctx) -> list[str]:
    ctx.env["REPORTGEN_MAX_TRACE_BYTES"] = "100000"
    bomb = b'{"traceEvents": [' + b" " * 10_000_000 + b"]}"
    return _import(ctx, gzip.compress(bomb, mtime=0), "bomb.json.gz")


def _bad_limit(ctx: Ctx) -> list[str]:
    ctx.env["REPORTGEN_MAX_TRACE_BYTES"] = "lots"
    return _import(ctx, GOOD_TRACE)


def _store_is_a_file(ctx: Ctx) -> list[str]:
    (ctx.inp / "store.txt").write_text("not a store\n")
    return ["runs", "--store", str(ctx.inp / "store.txt")]


def _empty_store_compare(ctx: Ctx) -> list[str]:
    (ctx.inp / "empty").mkdir()
    return ["compare", "latest~1", "latest", "--store", str(ctx.inp / "empty")]


def _empty_store_built(ctx: Ctx) -> list[str]:
    (ctx.inp / "empty").mkdir()
    return ["build", "--runs", str(ctx.inp / "empty"), "--out", str(ctx.site)]


def _site_through_symlink(ctx: Ctx) -> list[str]:
    (ctx.inp / "link").symlink_to(ctx.site)
    return ["build", "--runs", str(ctx.store), "--out", str(ctx.inp / "link")]


def _empty_site_publish(ctx: Ctx) -> list[str]:
    (ctx.inp / "emptysite").mkdir()
    return ["publish", "--site", str(ctx.inp / "emptysite"), "--repo", str(ctx.repo)]


def _site_not_a_site(ctx: Ctx) -> list[str]:
    (ctx.inp / "docs").mkdir()
    (ctx.inp / "docs" / "notes.txt").write_text("mine\n")
    return ["build", "--runs", str(ctx.store), "--out", str(ctx.inp / "docs")]


def _site_manifest(ctx: Ctx, text: str) -> list[str]:
    (ctx.site / "manifest.json").write_text(text)
    return _build(ctx)


def _site_is_a_file(ctx: Ctx) -> list[str]:
    (ctx.inp / "site.html").write_text("x\n")
    return ["build", "--runs", str(ctx.store), "--out", str(ctx.inp / "site.html")]


def _publish_site_with_symlink(ctx: Ctx) -> list[str]:
    (ctx.site / "runs" / "passwd").symlink_to("/etc/passwd")
    return ["publish", "--site", str(ctx.site), "--repo", str(ctx.repo)]


def _profile(ctx: Ctx, label: str) -> list[str]:
    return ["profile", "--device", "cpu", "--label", label, "--store", str(ctx.store)]


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@dataclass(frozen=True)
class Case:
    setup: Callable[[Ctx], list[str]]
    code: ExitCode
    message: str


_F = "{inp}/t.json"
_B = "{store}/" + RUN_B + "/run.json"

CASES: dict[str, Case] = {
    # --- traces given to `reportgen import`
    "trace: truncated gzip": Case(lambda c: _import(c, gzip.compress(GOOD_TRACE * 50, mtime=0)[:60]), ExitCode.BAD_INPUT,
                                  _F + ": gzip data is truncated (the file ends before the gzip end marker); "
                                  "copy the file again"),
    "trace: corrupt gzip": Case(lambda c: _import(c, gzip.compress(GOOD_TRACE, mtime=0)[:10] + b"\xff" * 30),
                                ExitCode.BAD_INPUT, _F + ": corrupt gzip data (Error -3 while decompressing data: "
                                "invalid block type); copy the file again"),
    "trace: gzip with a bad checksum": Case(
        lambda c: _import(c, (lambda g: g[:-8] + bytes(8))(gzip.compress(GOOD_TRACE, mtime=0))),
        ExitCode.BAD_INPUT, _F + ": corrupt gzip data (CRC check failed 0x0 != 0x{crc}); copy the file again"),
    "trace: invalid JSON": Case(lambda c: _import(c, b'{"traceEvents": [{"ph": "X",, }]}'), ExitCode.BAD_INPUT,
                                _F + ": invalid or truncated JSON (Expecting property name enclosed in double "
                                "quotes) at character 28"),
    "trace: empty file": Case(lambda c: _import(c, b""), ExitCode.BAD_INPUT,
                              _F + ": is empty; expected a Chrome trace (a JSON object with 'traceEvents')"),
    "trace: JSON that is not a trace": Case(lambda c: _import(c, b'{"a": 1}'), ExitCode.BAD_INPUT,
                                            _F + ": has no 'traceEvents' list; this JSON is not a Chrome/Kineto trace"),
    "trace: a run.json given as a trace": Case(
        lambda c: _import(c, run_to_json(synthetic_run()).encode()), ExitCode.BAD_INPUT,
        _F + ": has no 'traceEvents' list; this JSON is not a Chrome/Kineto trace"),
    "trace: top-level string": Case(lambda c: _import(c, b'"hello"'), ExitCode.BAD_INPUT,
                                    _F + ": does not start with '{{' or '['; expected a Chrome/Kineto trace "
                                    "(a JSON object with 'traceEvents')"),
    "trace: traceEvents not a list": Case(lambda c: _import(c, b'{"traceEvents": {"ph": "X"}}'), ExitCode.BAD_INPUT,
                                          _F + ": field 'traceEvents' is not a list; this is not a Chrome/Kineto trace"),
    "trace: NaN duration": Case(lambda c: _import(c, b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": NaN}]}'),
                                ExitCode.BAD_INPUT, _F + ": event #1 ('k'): field 'dur' is nan, expected a finite number"),
    "trace: infinite start": Case(
        lambda c: _import(c, b'{"traceEvents": [{"ph": "X", "name": "k", "ts": -Infinity, "dur": 1}]}'),
        ExitCode.BAD_INPUT, _F + ": event #1 ('k'): field 'ts' is -inf, expected a finite number"),
    "trace: negative duration": Case(lambda c: _import(c, _event(ts=1, dur=-5)), ExitCode.BAD_INPUT,
                                     _F + ": event #1 ('k'): field 'dur' is negative (-5.0); durations must be >= 0"),
    "trace: missing duration": Case(lambda c: _import(c, _event(ts=1)), ExitCode.BAD_INPUT,
                                    _F + ": event #1 ('k'): field 'dur' is missing"),
    "trace: mistyped duration": Case(lambda c: _import(c, _event(ts=1, dur="5")), ExitCode.BAD_INPUT,
                                     _F + ": event #1 ('k'): field 'dur' is '5', expected a number of microseconds"),
    "trace: missing phase": Case(lambda c: _import(c, b'{"traceEvents": [{"name": "k"}]}'), ExitCode.BAD_INPUT,
                                 _F + ": event #1 ('k'): field 'ph' is missing; every Chrome trace event has a phase"),
    "trace: non-UTF-8 bytes": Case(
        lambda c: _import(c, b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe", "ts": 1, "dur": 2}]}'),
        ExitCode.BAD_INPUT, _F + ": not UTF-8 text (bad byte near offset 38); a trace must be UTF-8 JSON"),
    "trace: gzip bomb past the limit": Case(_gzip_bomb, ExitCode.BAD_INPUT,
                                            "{inp}/bomb.json.gz: expands past 100000 bytes uncompressed; refusing it "
                                            "(raise the limit with REPORTGEN_MAX_TRACE_BYTES if the trace is genuine)"),
    "trace: deeply nested JSON": Case(lambda c: _import(c, ('{"traceEvents": [' + _deep(100_000) + "]}").encode()),
                                      ExitCode.BAD_INPUT, _F + ": JSON nested too deeply; this is not a trace"),
    "trace: unclosed B event": Case(
        lambda c: _import(c, b'{"traceEvents": [{"ph": "B", "name": "op", "ts": 5, "pid": 1, "tid": 2}]}'),
        ExitCode.BAD_INPUT, _F + ": 'B' event 'op' at ts 5.0 on pid 1 tid 2 is never closed by an 'E' event; "
        "the trace is truncated"),
    "trace: extra data after the JSON": Case(lambda c: _import(c, GOOD_TRACE + b" <script>"), ExitCode.BAD_INPUT,
                                             _F + f": has extra data after the JSON value at character {len(GOOD_TRACE) + 1}"),
    "trace: bad size limit in the environment": Case(
        _bad_limit, ExitCode.BAD_INPUT,
        "environment variable REPORTGEN_MAX_TRACE_BYTES='lots' is not a positive number of bytes"),
    "trace: no such file": Case(lambda c: ["import", str(c.inp / "nope.json"), "--store", str(c.store)],
                                ExitCode.BAD_INPUT, "{inp}/nope.json: no such file or folder; pass a trace "
                                "(.json, .json.gz) or a profile_output/ folder"),
    # --- run bundles in the store (the build reads them all)
    "bundle: invalid JSON": Case(lambda c: _bundle_text(c, '{"schema_version": 1,'), ExitCode.BAD_INPUT,
                                 _B + ": not valid JSON (Expecting property name enclosed in double quotes: line 1 "
                                 "column 22 (char 21)); the bundle is corrupt, re-run or re-import it"),
    "bundle: empty run.json": Case(lambda c: _bundle_text(c, ""), ExitCode.BAD_INPUT,
                                   _B + ": not valid JSON (Expecting value: line 1 column 1 (char 0)); the bundle is "
                                   "corrupt, re-run or re-import it"),
    "bundle: JSON that is not a bundle": Case(lambda c: _bundle_text(c, GOOD_TRACE), ExitCode.BAD_INPUT,
                                              _B + ": field 'schema_version' is missing; this is not a reportgen "
                                              "run.json"),
    "bundle: a list": Case(lambda c: _bundle_text(c, "[]"), ExitCode.BAD_INPUT,
                           _B + ": expected a JSON object at the top level; this is not a run.json"),
    "bundle: future schema_version": Case(lambda c: _bundle(c, _set("schema_version", 99)), ExitCode.BAD_INPUT,
                                          _B + ": field 'schema_version' is 99, newer than this reportgen reads (6); "
                                          "upgrade reportgen"),
    "bundle: mistyped schema_version": Case(lambda c: _bundle(c, _set("schema_version", "1")), ExitCode.BAD_INPUT,
                                            _B + ": field 'schema_version' is '1', expected a positive integer"),
    "bundle: missing field": Case(lambda c: _bundle(c, lambda d: d.pop("environment")), ExitCode.BAD_INPUT,
                                  _B + ": field 'environment': is missing"),
    "bundle: mistyped field": Case(lambda c: _bundle(c, _set("variants.0.samples_us", "fast")), ExitCode.BAD_INPUT,
                                   _B + ": field 'variants[0].samples_us': expected a list, got a string"),
    "bundle: NaN duration": Case(lambda c: _bundle_raw(c, '"first_call_us": 1000.0', '"first_call_us": NaN'),
                                 ExitCode.BAD_INPUT, _B + ": not valid JSON (NaN is not allowed); the bundle is corrupt, "
                                 "re-run or re-import it"),
    "bundle: infinite duration": Case(lambda c: _bundle_raw(c, '"first_call_us": 1000.0', '"first_call_us": 1e999'),
                                      ExitCode.BAD_INPUT,
                                      _B + ": field 'variants[0].first_call_us': expected a finite number, got inf"),
    "bundle: negative duration": Case(lambda c: _bundle(c, _set("variants.1.samples_us", [1.0, -2.0])),
                                      ExitCode.BAD_INPUT, _B + ": field 'variants[1].samples_us': must not be negative, "
                                      "got -2.0"),
    "bundle: negative op time": Case(lambda c: _bundle(c, _set("variants.0.ops.0.self_cpu_us", -1)), ExitCode.BAD_INPUT,
                                     _B + ": field 'variants[0].ops[0].self_cpu_us': must not be negative, got -1.0"),
    "bundle: non-UTF-8 bytes": Case(lambda c: _bundle_text(c, b'{"schema_version": 1, "label": "\xff"}'),
                                    ExitCode.BAD_INPUT,
                                    _B + ": not UTF-8 (byte 32); the bundle is corrupt, re-run or re-import it"),
    "bundle: deeply nested JSON": Case(lambda c: _bundle_text(c, _deep(100_000)), ExitCode.BAD_INPUT,
                                       _B + ": nested deeper than 64 levels; the bundle is corrupt, re-run or "
                                       "re-import it"),
    "bundle: NUL in a label": Case(lambda c: _bundle(c, _set("label", "a\x00b")), ExitCode.BAD_INPUT,
                                   _B + ": field 'label': contains a NUL character"),
    "bundle: lone surrogate in a label": Case(lambda c: _bundle(c, _set("label", "a\ud800b")), ExitCode.BAD_INPUT,
                                              _B + ": field 'label': contains a lone surrogate (a \\ud800-\\udfff "
                                              "escape), which is not text; write the character itself or remove it"),
    "bundle: unknown device": Case(lambda c: _bundle(c, _set("device", "tpu")), ExitCode.BAD_INPUT,
                                   _B + ": field 'device': expected one of ['cpu', 'cuda', 'rocm', 'neuron', 'mtia', 'unknown'], "
                                   "got 'tpu'"),
    "bundle: bad time": Case(lambda c: _bundle(c, _set("created_utc", "yesterday")), ExitCode.BAD_INPUT,
                             _B + ": field 'created_utc' 'yesterday' is not a UTC time like 2026-11-30T04:55:00Z"),
    "bundle: run folder is a symlink out of the store": Case(
        _symlinked_run_folder, ExitCode.BAD_INPUT,
        _B + ": is a symbolic link; run bundles must be real folders inside the store"),
    "bundle: run.json is a symlink": Case(_symlinked_run_json, ExitCode.BAD_INPUT,
                                          _B + ": is a symbolic link; run bundles must be real folders inside the store"),
    "bundle: duplicate run id": Case(lambda c: _bundle(c, _set("run_id", RUN_A)), ExitCode.BAD_INPUT,
                                     _B + f": field 'run_id' is '{RUN_A}' but the folder is '{RUN_B}'; rename the folder "
                                     "to the run id"),
    "bundle: run id with ../": Case(lambda c: _bundle(c, _set("run_id", "../../etc")), ExitCode.BAD_INPUT,
                                    _B + ": field 'run_id' '../../etc' is not a safe folder name"),
    "bundle: run id ending in a newline": Case(lambda c: _bundle(c, _set("run_id", RUN_B + "\n")), ExitCode.BAD_INPUT,
                                               _B + f": field 'run_id' '{RUN_B}\\n' is not a safe folder name"),
    "bundle: trace path out of the bundle": Case(
        lambda c: _bundle(c, _set("variants.0.trace_path", "../../../../etc/passwd")), ExitCode.BAD_INPUT,
        _B + ": field 'variants[0].trace_path' '../../../../etc/passwd' points outside the bundle"),
    "bundle: absolute artifact path": Case(
        lambda c: _bundle(c, _set("variants.0.artifacts", [{"path": "/etc/passwd", "kind": "x", "size_bytes": 1}])),
        ExitCode.BAD_INPUT, _B + ": field 'variants[0].artifacts[0].path' '/etc/passwd' points outside the bundle"),
    "bundle: duplicate variant names": Case(lambda c: _bundle(c, lambda d: d["variants"].append(d["variants"][0])),
                                            ExitCode.BAD_INPUT, _B + ": field 'variants' has duplicate names; each "
                                            "variant must be unique"),
    "bundle: trace named in run.json is missing": Case(
        _missing_trace, ExitCode.BAD_INPUT,
        "{store}/" + RUN_B + "/traces/fused.pt.trace.json.gz: missing, but run.json names it; "
        "the bundle is incomplete"),
    "bundle: stored trace is corrupt": Case(
        _corrupt_trace, ExitCode.BAD_INPUT,
        "{store}/" + RUN_B + "/traces/fused.pt.trace.json.gz: gzip data is truncated (the file ends before the gzip "
        "end marker); copy the file again"),
    "bundle: run folder without run.json": Case(lambda c: (c.store / RUN_B).mkdir() or _build(c), ExitCode.BAD_INPUT,
                                                _B + ": missing; {store}/" + RUN_B + " is not a run bundle"),
    # --- stores and sites
    "store: a file, not a folder": Case(_store_is_a_file, ExitCode.BAD_INPUT,
                                        "{inp}/store.txt: is not a folder; pass --store a results folder"),
    "store: missing": Case(lambda c: ["build", "--runs", str(c.inp / "nope"), "--out", str(c.site)], ExitCode.BAD_INPUT,
                           "{inp}/nope: no such results folder; run 'reportgen profile' first or pass --runs FOLDER"),
    "store: empty, compared": Case(_empty_store_compare, ExitCode.BAD_INPUT,
                                   "{inp}/empty: has 0 run(s); 'latest~1' does not exist"),
    "store: unknown run compared": Case(lambda c: ["compare", RUN_A, "nope", "--store", str(c.store)], ExitCode.BAD_INPUT,
                                        "nope: no such run in {store} and not a bundle folder, label or git sha; "
                                        "see 'reportgen runs'"),
    "store: empty, built over the site": Case(_empty_store_built, ExitCode.BAD_INPUT,
                                              "{inp}/empty: holds no runs; run 'reportgen profile' or 'reportgen import' "
                                              "first (the site was not changed)"),
    "site: --out is a symlink to the site": Case(_site_through_symlink, ExitCode.BAD_INPUT,
                                                 "{inp}/link: is a symbolic link; pass --out the real site folder "
                                                 "(the lock is kept beside it)"),
    "site: empty folder published": Case(_empty_site_publish, ExitCode.BAD_INPUT,
                                         "{inp}/emptysite: has no manifest.json, so it is not a site built by reportgen; "
                                         "run 'reportgen build'"),
    "site: built over a folder that is not a site": Case(
        _site_not_a_site, ExitCode.BAD_INPUT, "{inp}/docs: not empty and has no manifest.json, so it is not a reportgen "
        "site; pass --out an empty or new folder (nothing was changed)"),
    "site: output is a file": Case(_site_is_a_file, ExitCode.BAD_INPUT,
                                   "{inp}/site.html: is a file, not a site folder; pass --out a folder"),
    "site: corrupt manifest": Case(lambda c: _site_manifest(c, "{"), ExitCode.BAD_INPUT,
                                   "{site}/manifest.json: not valid JSON (Expecting property name enclosed in double quotes: "
                                   "line 1 column 2 (char 1)); restore it or build into a new folder"),
    "site: future manifest": Case(lambda c: _site_manifest(c, '{"schema_version": 7, "runs": []}'), ExitCode.BAD_INPUT,
                                  "{site}/manifest.json: field 'schema_version' is 7, newer than this reportgen writes "
                                  "(3); upgrade reportgen"),
    "site: manifest run id with ../": Case(
        lambda c: _site_manifest(c, json.dumps({"schema_version": 1, "runs": [
            {"run_id": "../../x", "run_json_sha256": "0", "renderer_version": "0"}]})), ExitCode.BAD_INPUT,
        "{site}/manifest.json: field 'runs[0].run_id' '../../x' is not a safe folder name"),
    "site: manifest run id ending in a newline": Case(
        lambda c: _site_manifest(c, json.dumps({"schema_version": 1, "runs": [
            {"run_id": "a", "run_json_sha256": "0", "renderer_version": "0"},
            {"run_id": "b\n", "run_json_sha256": "0", "renderer_version": "0"}]})), ExitCode.BAD_INPUT,
        "{site}/manifest.json: field 'runs[1].run_id' 'b\\n' is not a safe folder name"),
    "site: manifest columns of different lengths": Case(
        lambda c: _site_manifest(c, json.dumps({"schema_version": 3, "runs": {
            "run_id": ["a", "b"], "run_json_sha256": ["0"], "renderer_version": ["0", "0"], "created_utc": ["t", "t"]}})),
        ExitCode.BAD_INPUT, "{site}/manifest.json: fields 'runs.run_id', 'runs.run_json_sha256', 'runs.renderer_version' "
        "and 'runs.created_utc' must be lists of one length (a value per run); restore the manifest or build into a new "
        "folder"),
    "site: manifest column run id with ../": Case(
        lambda c: _site_manifest(c, json.dumps({"schema_version": 3, "runs": {
            "run_id": ["a", "../x"], "run_json_sha256": ["0", "0"], "renderer_version": ["0", "0"],
            "created_utc": ["t", "t"]}})), ExitCode.BAD_INPUT,
        "{site}/manifest.json: field 'runs.run_id' holds '../x', which is not a safe folder name; restore the manifest "
        "or build into a new folder"),
    "site: manifest column of numbers": Case(
        lambda c: _site_manifest(c, json.dumps({"schema_version": 3, "runs": {
            "run_id": ["a"], "run_json_sha256": [1], "renderer_version": ["0"], "created_utc": ["t"]}})),
        ExitCode.BAD_INPUT, "{site}/manifest.json: field 'runs.run_json_sha256' must be a list of strings; restore the "
        "manifest or build into a new folder"),
    "site: manifest nested too deep": Case(
        lambda c: _site_manifest(c, '{"schema_version": 2, "runs": [' + "[" * 100_000 + "]" * 100_000 + "]}"),
        ExitCode.BAD_INPUT, "{site}/manifest.json: nested deeper than 64 levels; restore it or build into a new folder"),
    "site: manifest entry not an object": Case(
        lambda c: _site_manifest(c, '{"schema_version": 2, "runs": [{"run_id": "a", "run_json_sha256": "0", '
                                    '"renderer_version": "0"}, "b"]}'), ExitCode.BAD_INPUT,
        "{site}/manifest.json: field 'runs[1]' must have string run_id, run_json_sha256, renderer_version"),
    "site: symlink published": Case(_publish_site_with_symlink, ExitCode.BAD_INPUT,
                                    "{site}/runs/passwd: is a symbolic link; a published site must hold only real files"),
    # --- arguments
    "label: NUL character": Case(lambda c: _profile(c, "a\x00b"), ExitCode.USAGE,
                                 "--label: contains control characters; use printable text"),
    "label: escape sequence": Case(lambda c: _profile(c, "\x1b[31mred"), ExitCode.USAGE,
                                   "--label: contains control characters; use printable text"),
    "label: too long": Case(lambda c: _profile(c, "x" * 201), ExitCode.USAGE,
                            "--label: 201 characters; keep it under 200"),
    "base URL: javascript:": Case(lambda c: [*_build(c), "--base-url", "javascript:alert(1)//"], ExitCode.USAGE,
                                  "--base-url 'javascript:alert(1)//': expected a path like /myrepo/ or an http(s) URL"),
    "base URL: attribute breakout": Case(lambda c: [*_build(c), "--base-url", '/x/"onload="alert(1)'], ExitCode.USAGE,
                                         "--base-url '/x/\"onload=\"alert(1)': expected a path like /myrepo/ or an "
                                         "http(s) URL"),
}


def test_the_catalogue_is_large_and_its_codes_are_documented() -> None:
    assert len(CASES) >= 30
    assert {int(c.code) for c in CASES.values()} <= DOCUMENTED_CODES


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_changes_nothing(name: str, ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    argv = case.setup(ctx)
    for key, value in ctx.env.items():
        monkeypatch.setenv(key, value)
    before = snapshot(ctx.store, ctx.site)
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    if argv[0] == "build" and name.startswith("bundle:"):
        # Issue 12: a bad bundle no longer fails the build: it is named in one warning line (and on the index)
        # and left out, the store's good runs are built, and the store is not touched.
        assert (code, err) == (0, "reportgen: warning: " + ctx.fmt(case.message) + f" (run {RUN_B} left out of "
                                  "this build)\n")
        assert out == f"built {ctx.site}: 3 page(s) written, 1 run(s) (0 rendered, 1 unchanged, 0 kept from earlier " \
            "builds); 1 unreadable run(s) left out\n"
        assert RUN_B in (ctx.site / "index.html").read_text()
        assert {k: v for k, v in snapshot(ctx.store).items() if k.startswith(str(ctx.store))} == \
            {k: v for k, v in before.items() if k.startswith(str(ctx.store))}
        return
    assert (code, err) == (int(case.code), "reportgen: error: " + ctx.fmt(case.message) + "\n")
    assert out == ""
    assert snapshot(ctx.store, ctx.site) == before


def test_the_catalogue_through_a_real_process(ctx: Ctx) -> None:
    """Two cases end to end as a user runs them: exit status and stderr of the process itself."""
    from conftest import run_cli

    argv = CASES["site: future manifest"].setup(ctx)
    before = snapshot(ctx.store, ctx.site)
    proc = run_cli(*argv)
    assert (proc.returncode, proc.stdout) == (3, "")
    assert proc.stderr == "reportgen: error: " + ctx.fmt(CASES["site: future manifest"].message) + "\n"
    proc = run_cli(*_gzip_bomb(ctx), env={"REPORTGEN_MAX_TRACE_BYTES": "100000"})
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1 and "expands past 100000 bytes" in proc.stderr
    assert snapshot(ctx.store, ctx.site) == before


# ---------------------------------------------------------------------------------------------
# Hostile but legal: accepted, and made safe


HOSTILE_LABELS = ["../../x", "a/b", "..", "/etc/passwd", "ü日本語 🚀 ÿ", "x" * 200, "C:\\Windows\\..\\x", "-rf --help",
                  "<script>alert(1)</script>"]


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_hostile_labels_are_accepted_and_stay_in_the_store(label: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.json", chrome_trace())
    store = tmp_path / "box" / "store"
    assert main(["import", str(trace), "--store", str(store), "--label", label]) == 0
    (run,) = load_store(store)
    assert run.label == label
    assert sorted(p.name for p in (tmp_path / "box").iterdir()) == ["store"]
    assert [p.name for p in store.iterdir() if p.name != ".catalog"] == [run.run_id] and is_valid_run_id(run.run_id)
    capsys.readouterr()


HOSTILE_VARIANTS = ["../../../escaped", "a/b/c", "/abs", "..", ".hidden", "ü日本語", "v" * 300, "nul\u2400 and tab\t"]


def test_hostile_variant_names_never_become_paths_outside_the_site(tmp_path: Path) -> None:
    variants = tuple(variant(n, 10.0 + i, trace_path=f"traces/t{i}.pt.trace.json.gz")
                     for i, n in enumerate(HOSTILE_VARIANTS))
    run = synthetic_run(variants=variants)
    box = tmp_path / "box"
    store = box / "store"
    write_synthetic(store, replace(run, scenario=replace(run.scenario, name="../../scenario/..")))
    site_builder.build_site(store, box / "site", "/")
    assert sorted(p.name for p in box.iterdir()) == [".site.lock", "site", "store"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box"]
    names = [p.relative_to(box / "site").as_posix() for p in (box / "site").rglob("*")]
    assert all(re.fullmatch(r"[A-Za-z0-9._/-]+", n) and ".." not in n.split("/") for n in names), names
    timelines = sorted(p.name for p in (box / "site" / "runs" / run.run_id).glob("timeline-*.svg"))
    assert len(timelines) == len(HOSTILE_VARIANTS)


def test_hostile_trace_file_name_becomes_a_safe_variant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    write_trace(folder / ";<svg onload=x>..%2f..json", chrome_trace())
    store = tmp_path / "store"
    assert main(["import", str(folder), "--store", str(store)]) == 0
    (run,) = load_store(store)
    (v,) = run.variants
    assert re.fullmatch(r"[A-Za-z0-9._-]+", v.name) and v.trace_path == f"traces/{v.name}.pt.trace.json.gz"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "traces"]
    capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# Property: the trace reader raises nothing but TraceError


_json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
_json = st.recursive(_json_leaf, lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.text(max_size=6), ch, max_size=4),
                     max_leaves=20)
_event_dicts = st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(["X", "B", "E", "M", "i", "s", "f", "t", "C", None]) | _json_leaf,
    "ts": st.floats() | st.integers() | _json_leaf, "dur": st.floats() | st.integers() | _json_leaf,
    "name": _json_leaf, "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "neuron_hw"]) | _json_leaf,
    "pid": _json_leaf, "tid": _json_leaf, "id": _json_leaf, "args": _json})
_traces = st.fixed_dictionaries({"traceEvents": st.lists(_event_dicts | _json, max_size=6)},
                                optional={"displayTimeUnit": _json, "baseTimeNanoseconds": _json,
                                          "deviceProperties": _json, "distributedInfo": _json})


def _read_or_trace_error(data: bytes) -> None:
    try:
        trace = read_trace_bytes(data, "h.json")
    except TraceError as exc:
        assert exc.message.startswith("h.json: ") and "\n" not in exc.message
    else:
        assert all(e.duration_us >= 0 and e.start_us == e.start_us for e in trace.events)


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_trace_reader_on_arbitrary_bytes(data: bytes) -> None:
    _read_or_trace_error(data)
    _read_or_trace_error(gzip.compress(data, mtime=0))


@given(_traces, st.booleans(), st.integers(0, 200))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_trace_reader_on_arbitrary_trace_shaped_json(trace: dict, compress: bool, cut: int) -> None:
    raw = json.dumps(trace, allow_nan=True).encode()
    _read_or_trace_error(gzip.compress(raw, mtime=0) if compress else raw)
    _read_or_trace_error(raw[: max(0, len(raw) - cut)])



def test_runs_listing_never_passes_terminal_control_characters(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A run.json label or variant name with escapes, newlines or bidi overrides stays one inert line."""
    evil = "\x1b]0;owned\x07\x1b[2J\nfake\trow\u202eevil\r"
    run = synthetic_run(label=evil, variants=(variant("v\x1b[31m", 10.0),))
    write_synthetic(tmp_path, run)
    assert main(["runs", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1] == (f"{run.run_id}\t2026-11-30T00:00:00Z\tcpu\t-\trmsnorm\t"
                                   "\ufffd]0;owned\ufffd\ufffd[2J\ufffdfake\ufffdrow"
                                   "\ufffdevil\ufffd\tv\ufffd[31m\tok")
    assert len(out.splitlines()) == 2


def test_a_symlink_in_an_imported_folder_cannot_pull_in_a_file_from_elsewhere(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    private = write_trace(tmp_path / "private.json", chrome_trace(ops=("secret_op",)))
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "leak.json").symlink_to(private)
    store = tmp_path / "store"
    assert main(["import", str(folder), "--store", str(store)]) == 3
    assert capsys.readouterr().err == (f"reportgen: error: {folder}: no trace files (*.json, *.json.gz) and no "
                                       "TorchNeuron profile_output/ (*_pid_*/*/trace.json) in this folder (symbolic links "
                                       "are not followed: leak.json); pass a trace file or a profile_output/ folder\n")
    write_trace(folder / "real.json", chrome_trace())
    assert main(["import", str(folder), "--store", str(store)]) == 0
    (run,) = load_store(store)
    assert [v.name for v in run.variants] == ["real"]
    assert "skipped symbolic links in the folder: leak.json" in run.notes
    assert not [p for p in store.rglob("*") if p.is_file() and b"secret_op" in p.read_bytes()]
    capsys.readouterr()


def test_trace_op_names_with_lone_surrogates_or_controls_import_and_build(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A \\ud800 escape is valid JSON but not text, and an ESC is text but not XML: the run imports, stores and
    builds, the names keep a visible U+FFFD, and every chart is well-formed SVG."""
    import xml.etree.ElementTree as ET

    trace = write_trace(tmp_path / "t.json", chrome_trace(ops=("aten::a\ud800b", "aten::c\x1bd" * 6)))
    store, site_dir = tmp_path / "store", tmp_path / "site"
    assert main(["import", str(trace), "--store", str(store)]) == 0
    (run,) = load_store(store)
    names = {op.name for v in run.variants for op in v.ops}
    assert "aten::a\ufffdb" in names and "aten::c\x1bd" * 6 in names
    assert main(["build", "--runs", str(store), "--out", str(site_dir)]) == 0
    charts = sorted((site_dir / "runs" / run.run_id).glob("*.svg"))
    assert charts
    for chart in charts:
        ET.fromstring(chart.read_bytes())
    capsys.readouterr()
