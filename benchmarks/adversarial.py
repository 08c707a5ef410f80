#!/usr/bin/env python3
"""The adversarial pass of issue 35, as one command anyone can rerun.

    /work/main/.venv/bin/python benchmarks/adversarial.py --out benchmarks/results/adversarial.json

It builds a wheel of this checkout, installs it into a fresh virtual environment outside the checkout (the
wheel alone, ``--no-deps --no-index``; its dependencies, torch among them, come from the interpreter running
this script through a ``.pth`` line, which the output says), and then tries, as a hostile user and a hostile
pull request would:

- every command's arguments, config files, run bundles, ``withdrawn.json``/``manifest.json``, traces to import;
- the Action's script (``reportgen/ci/action.sh``) against a real local bare git remote;
- the pull-request comment poster (``python -m reportgen.ci.comment``) against a real local HTTP server, with a
  second server on another port that records every request carrying the token;
- SIGKILL and SIGINT at fixed points of ``profile``, ``import``, ``build``, ``rm`` and ``compare --output``
  (a point is a state of the file system or of the output, polled; never a sleep), each followed by checks
  of the store and the site.

Each case runs from its own empty temporary folder (with a copy of a small store and site), with a time
limit: a hang is a case that ran past it. Every case is classified (clean refusal, accepted, exit 70,
traceback, hang, unclean refusal, ...), and independently checked for a command run by an injected payload
(a marker file), a leaked token and, for refusals, a store or site changed. Deterministic (seed 0) and
self-cleaning (one temporary folder, removed at the end unless ``--keep``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html.parser
import json
import os
import platform
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "reportgen", "templates", "scenarios")
DOCUMENTED = {1, 2, 3, 4, 5, 6, 7, 130}
TOKEN = "ghs_adversarialTOKEN0123456789abcdef"
RUN_ID_RE = re.compile(r"\b(\d{8}T\d{6}Z-[A-Za-z0-9._-]+)")
TINY = ["--device", "cpu", "--variants", "naive,fused", "--samples", "3", "--warmup", "0", "--shape", "4,8"]
SMALL_LIMITS = {"REPORTGEN_MAX_TRACE_EVENTS": "20000", "REPORTGEN_MAX_TRACE_BYTES": str(4 * 1024 * 1024)}

Arg = str | bytes


# --- the installation under test --------------------------------------------------------------------------


def install(tmp: Path) -> tuple[Path, str]:
    """A wheel of this checkout in a fresh venv; returns its bin folder and a note on where dependencies come from."""
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SOURCES:
        (shutil.copytree(ROOT / name, src / name, ignore=ignore) if (ROOT / name).is_dir()
         else shutil.copy2(ROOT / name, src / name))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp / "wheels"), str(src)], check=True, capture_output=True)
    (wheel,) = (tmp / "wheels").glob("reportgen-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True)
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    deps = sysconfig.get_paths()["purelib"]
    (purelib / "zz_dependencies.pth").write_text(deps + "\n")
    return venv / "bin", (f"wheel {wheel.name} installed with --no-deps --no-index into a fresh venv; its "
                          f"dependencies (torch, matplotlib, jinja2 ...) come from {deps} through a .pth line")


# --- local servers -----------------------------------------------------------------------------------------


class Servers:
    """The API stand-in (its answer set per case) and the other origin, which records any request with the token."""

    def __init__(self) -> None:
        self.behave: Callable[[str, str], tuple[int, dict[str, str], bytes, float]] = lambda m, p: (200, {}, b"[]", 0)
        self.leaks: list[str] = []
        self.api_seen: list[tuple[str, str]] = []
        self.api = self._serve(self._api_handler())
        self.other = self._serve(self._other_handler())
        self.api_url = f"http://127.0.0.1:{self.api.server_address[1]}"
        self.other_url = f"http://127.0.0.1:{self.other.server_address[1]}"

    @staticmethod
    def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        return httpd

    def _carries_token(self, h: BaseHTTPRequestHandler) -> bool:
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(min(n, 1 << 20)) if n else b""
        return TOKEN in str(h.headers) or TOKEN in h.path or TOKEN.encode() in body

    def _other_handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Other(BaseHTTPRequestHandler):
            def _any(self) -> None:
                if outer._carries_token(self):
                    outer.leaks.append(f"{self.command} {self.path}")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"[]")

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        return Other

    def _api_handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Api(BaseHTTPRequestHandler):
            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(min(n, 1 << 20))
                outer.api_seen.append((self.command, self.path))
                code, headers, body, delay = outer.behave(self.command, self.path)
                try:
                    if delay < 0:  # dribble: one byte every -delay seconds, for ever
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(10 ** 9))
                        self.end_headers()
                        self.wfile.write(b"[")
                        for _ in range(200):
                            time.sleep(-delay)
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        return
                    time.sleep(delay)
                    self.send_response(code)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    if "Content-Length" not in headers:
                        self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        return Api

    def close(self) -> None:
        for s in (self.api, self.other):
            s.shutdown()
            s.server_close()


# --- cases and their classification ------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    group: str
    argv: list[Arg]
    prog: str = "reportgen"           # reportgen | comment | action | sh
    setup: Callable[[Ctx], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    expect: str = "refuse"            # refuse | either | accept
    timeout: float = 90
    behave: Callable[[str, str], tuple[int, dict[str, str], bytes, float]] | None = None


@dataclass
class Ctx:
    w: Path           # the case's folder (cwd), holding results/ and site/
    mark: Path        # created only if an injected command runs
    root: Path
    shared: dict[str, Any]


def sub(value: Arg, ctx: Ctx) -> Arg:
    pairs = {"{mark}": str(ctx.mark), "{w}": str(ctx.w), "{api}": ctx.shared["servers"].api_url,
             "{other}": ctx.shared["servers"].other_url, "{remote}": str(ctx.shared.get("remote", "")),
             "RUN0": ctx.shared["template_runs"][-1]}
    for k, v in pairs.items():
        value = value.replace(k, v) if isinstance(value, str) else value.replace(k.encode(), os.fsencode(v))
    return value


def remove_tree(path: Path) -> None:
    """``rm -rf``: it removes a tree thousands of folders deep (a case's own output) where shutil.rmtree's
    recursion stops at Python's limit."""
    subprocess.run(["rm", "-rf", "--", str(path)], check=False)


def tree_hash(path: Path) -> str:
    """Names, kinds and contents of everything under ``path`` (links not followed, FIFOs never opened)."""
    h = hashlib.sha256()
    if not os.path.lexists(path):
        return "absent"
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(os.fsencode(os.path.relpath(p, path)) + b"\0" + str(stat.S_IFMT(st.st_mode)).encode())
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    h.update(hashlib.sha256(fh.read()).digest())
            elif stat.S_ISLNK(st.st_mode):
                h.update(os.fsencode(os.readlink(p)))
    return h.hexdigest()


def base_env(ctx: Ctx, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REPORTGEN_", "GITHUB_", "RG_"))}
    env.update({"PATH": f"{ctx.shared['bin']}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
                "HOME": str(ctx.root / "home"), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "TMPDIR": str(ctx.w / "tmp"), **SMALL_LIMITS})
    (ctx.w / "tmp").mkdir(exist_ok=True)
    env.update({k: str(sub(v, ctx)) for k, v in extra.items()})
    return env


def command(case: Case, ctx: Ctx) -> list[Arg]:
    b = ctx.shared["bin"]
    head: list[Arg] = {"reportgen": [str(b / "reportgen")],
                       "comment": [str(b / "python"), "-m", "reportgen.ci.comment"],
                       "action": ["bash", str(ctx.shared["action_sh"])],
                       "sh": ["bash", "-c"]}[case.prog]
    return [*head, *(sub(a, ctx) for a in case.argv)]


def one_line_refusal(prog: str, stderr: str) -> bool:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    prefix = "reportgen-action:" if prog == "action" else ("reportgen-action:", "reportgen: error:")
    if prog == "comment":
        prefix = ("reportgen-action:", "reportgen: error:", "reportgen:")
    return len(lines) == 1 and lines[0].startswith(prefix)


def classify(case: Case, rc: int | None, out: str, err: str) -> str:
    if rc is None:
        return "hang"
    if "Traceback (most recent call last)" in out + err:
        return "traceback"
    if rc == 70:
        return "exit_70"
    if rc == 0:
        return "accepted" if case.expect in ("accept", "either") else "accepted_but_should_refuse"
    if rc in DOCUMENTED and one_line_refusal(case.prog, err):
        return "clean_refusal" if case.expect in ("refuse", "either") else "refused_but_should_accept"
    return "unclean_refusal"


def run_case(case: Case, ctx: Ctx) -> dict[str, Any]:
    servers: Servers = ctx.shared["servers"]
    servers.behave = case.behave or (lambda m, p: (200, {"Content-Type": "application/json"}, b"[]", 0))
    leaks_before = len(servers.leaks)
    if case.setup:
        case.setup(ctx)
    before = (tree_hash(ctx.w / "results"), tree_hash(ctx.w / "site"))
    argv = command(case, ctx)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=ctx.w, env=base_env(ctx, case.env), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=case.timeout, start_new_session=True)
        rc, out, err = proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        rc, out, err = None, (exc.stdout or b"").decode(errors="replace"), (exc.stderr or b"").decode(errors="replace")
    seconds = time.monotonic() - t0
    if case.expect == "refuse" and any(a in HELP for a in case.argv):
        case.expect = "either"  # the value was read as -h/--help: the help and exit 0 are right
    verdict = classify(case, rc, out, err)
    flags = []
    if ctx.mark.exists():
        flags.append("payload_run")
    if len(servers.leaks) > leaks_before or TOKEN in out + err:
        flags.append("token_leaked")
    if rc not in (0, None) and (tree_hash(ctx.w / "results"), tree_hash(ctx.w / "site")) != before:
        flags.append("changed_on_refusal")
    return {"id": case.id, "group": case.group, "verdict": verdict, "flags": flags, "rc": rc,
            "seconds": round(seconds, 2), "stderr_tail": err[-400:], "argv": [repr(a) for a in argv[1:]][:12],
            "env": {k: repr(v)[:200] for k, v in case.env.items()}}


# --- hostile values ----------------------------------------------------------------------------------------

LONG = "x" * 300
NAMES: list[Arg] = [LONG, "a" * 5000, "", " ", "-", "--", "-h", "--help", "-x", "--store=/", "a\nb", "a\rb",
                    "\x1b[31mred", "\x07bell", "a\u202eb", "\u202e", "\ufeffx", b"\xff\xfe", b"caf\xe9", "../../etc",
                    "/", ".", "..", "results", "site", "results/../results", "$(touch {mark})", "`touch {mark}`",
                    ";touch {mark}", "|touch {mark}", "*", "?", "[a-z]", "~", "~root", "%s%n", "{}", "\\", "'",
                    "\"", "latest~99999", "latest~" + "9" * 5000, "latest~-1", "latest~nan", "latest~1e9",
                    "latest~0x10", "latest~ 1", "LATEST", "<script>alert(1)</script>", "x" * 64 + "\u00e9"]
LEGAL_INTS = ("1_000", " 5", "5 ", "\u0665")  # Python's int() takes these (1000, 5, 5, 5): accepting them is right
NUMBERS = ["nan", "inf", "-inf", "1e400", "-1", "0", "9" * 5000, "1e-400", "0x10", "1_000", " 5", "5 ", "",
           "+", "--5", "\u0665", "1e9", "2147483648"]


HELP = ("-h", "--help")  # a value read as the help flag: printing the help and exiting 0 is right


def name_cases() -> list[Case]:
    """(A NUL byte cannot be in an argument or an environment value: the system refuses it before reportgen runs.)"""
    cases: list[Case] = []
    for i, v in enumerate(NAMES):
        cases.append(Case(f"rm-name-{i}", "args:rm", ["rm", v, "--store", "results"],
                          expect="either" if v in HELP else "refuse"))
        cases.append(Case(f"compare-name-{i}", "args:compare", ["compare", v, "latest", "--store", "results"],
                          expect="either" if v in ("results", "site", *HELP) else "refuse"))
    for i, v in enumerate(NAMES[:40]):
        cases.append(Case(f"runs-scenario-{i}", "args:runs", ["runs", "--scenario", v, "--store", "results"],
                          expect="either"))
    for i, v in enumerate(NAMES[:40:2]):  # profile imports torch: every other name keeps the pass short
        cases.append(Case(f"profile-scenario-{i}", "args:profile", ["profile", *TINY, "--scenario", v,
                                                                     "--store", "results"]))
    # a store or site folder may have any name the system takes (a space, '$(...)', a newline: data, never run);
    # too long, empty, or the site over the store, the working folder or a parent must be refused
    must_refuse = {LONG, "a" * 5000, ""}
    for i, v in enumerate(NAMES[:30]):
        cases.append(Case(f"store-{i}", "args:store", ["runs", "--store", v],
                          expect="refuse" if v in must_refuse else "either"))
        cases.append(Case(f"build-out-{i}", "args:build", ["build", "--runs", "results", "--out", v],
                          expect="refuse" if v in must_refuse | {"/", ".", "..", "results", "results/../results"}
                          else "either"))
    return cases


def number_cases() -> list[Case]:
    cases: list[Case] = []
    for i, v in enumerate(NUMBERS):
        cases.append(Case(f"profile-samples-{i}", "args:profile", ["profile", *TINY[:4], "--shape", "4,8", "--samples", v,
                                                                    "--store", "results"], timeout=120,
                          expect="either" if v in LEGAL_INTS else "refuse"))
        cases.append(Case(f"compare-threshold-{i}", "args:compare", ["compare", "latest~1", "latest", "--threshold",
                                                                      v, "--store", "results"],
                          expect="either" if v in (*LEGAL_INTS, "1e9", "2147483648") else "refuse"))
        cases.append(Case(f"ab-sessions-{i}", "args:ab", ["ab", "--base", ".", "--head", ".", "--sessions", v]))
        cases.append(Case(f"doctor-timeout-{i}", "args:doctor", ["doctor", "--timeout-s", v, "--out", "dr"]))
    for flag in ("--rounds", "--max-seconds", "--samples", "--threads", "--seed"):
        for v in ("nan", "-1", "0", "9" * 5000, "1e400"):
            cases.append(Case(f"ab{flag}-{v[:8]}", "args:ab", ["ab", "--base", ".", "--head", ".", flag, v]))
    for flag, vals in {"--shape": ["4," * 40 + "4", "0,8", "-4,8", "4,,8", "99999999999,99999999999", "4,8.5",
                                   "nan", "", "4;8", "\u0664,8"],
                       "--dtype": ["int8", "", "float32\n", "FLOAT32", "torch.float32"],
                       "--variants": ["naive,naive", "", ",", "naive,", "nope", "naive\n", "-x"],
                       "--sweep": ["4,8\n4,16", "4,8;" * 8 + "4,8", ";", "4,8;;", "nan", "x" * 5000],
                       "--param": ["eps", "=1", "eps=", "eps=nan", "a\nb=1", "eps=1\n", "x" * 300 + "=1"],
                       "--sweep-param": ["eps=", "eps=1,1", "eps", "=1,2"],
                       "--machine": ["box\n", "", "-x", "a b", "x" * 300, "\u202ebox", "../box"],
                       "--baseline": ["nope", "", "naive\n"],
                       "--seed": ["nan", "-1", "9" * 5000, "1.5"]}.items():
        for j, v in enumerate(vals):
            cases.append(Case(f"profile{flag}-{j}", "args:profile", ["profile", *TINY[:8], flag, v, "--store",
                                                                       "results"], timeout=90,
                              expect="either" if v == "\u0664,8" else "refuse"))  # int() reads U+0664 as 4
    return cases


def _mkfifo(p: Path) -> None:
    os.mkfifo(p)


def path_cases() -> list[Case]:
    """Paths into the store and the site, links, FIFOs, loops, devices."""
    def loop(ctx: Ctx) -> None:
        os.symlink("loop2", ctx.w / "loop1")
        os.symlink("loop1", ctx.w / "loop2")

    def fifo(ctx: Ctx) -> None:
        os.mkfifo(ctx.w / "fifo")

    def link_to_run(ctx: Ctx) -> None:
        run = sorted(p for p in (ctx.w / "results").iterdir() if p.is_dir())[0]
        os.symlink(run / "run.json", ctx.w / "out-link")

    def site_link(ctx: Ctx) -> None:
        os.symlink("site", ctx.w / "site-link")

    def file_as_dir(ctx: Ctx) -> None:
        (ctx.w / "afile").write_text("x")

    cases: list[Case] = []
    outs: list[tuple[str, Callable[[Ctx], None] | None]] = [
        ("results/x.md", None), ("site/index.html", None), ("site/x.md", None), ("results/RUN0/run.json", None),
        ("results/withdrawn.json", None), ("site/manifest.json", None), ("loop1/x", loop), ("loop1", loop),
        ("fifo", fifo), ("out-link", link_to_run), ("site-link/index.html", site_link), ("afile/x.md", file_as_dir),
        ("/dev/full", None), ("/proc/self/nothing/x", None), ("x" * 300, None), ("d/" * 2000 + "x", None),
        ("-", None), ("", None), (".", None), ("results", None), ("site", None), ("/", None)]
    for i, (out, setup) in enumerate(outs):
        cases.append(Case(f"compare-output-{i}", "args:compare-output",
                          ["compare", "latest~1", "latest", "--store", "results", "--output", out], setup=setup))
        cases.append(Case(f"doctor-out-{i}", "args:doctor", ["doctor", "--out", out], setup=setup))
    for i, (p, setup) in enumerate([("loop1", loop), ("fifo", fifo), ("afile", file_as_dir), ("/dev/null", None),
                                     ("/dev/zero", None), ("/proc/self", None), ("site", None), ("results/RUN0", None)]):
        cases.append(Case(f"store-path-{i}", "args:store", ["runs", "--store", p], setup=setup,
                          expect="either" if p in ("site", "results/RUN0") else "refuse"))
        cases.append(Case(f"build-runs-path-{i}", "args:build", ["build", "--runs", p, "--out", "site2"], setup=setup))
        cases.append(Case(f"build-out-path-{i}", "args:build", ["build", "--runs", "results", "--out", p],
                          setup=setup))
        cases.append(Case(f"import-path-{i}", "import", ["import", p, "--store", "results"], setup=setup))
    for i, v in enumerate(["results", "site", "loop1", LONG, "a\x01b", "fifo"]):
        cases.append(Case(f"env-store-{i}", "env", ["runs"], env={"REPORTGEN_STORE": v},
                          setup=loop if v == "loop1" else fifo if v == "fifo" else None,
                          expect="either" if v in ("results", "site") else "refuse"))
    for i, v in enumerate(["box\n", "-x", "a b", LONG, "\x1b]0;t\x07", "\u202e", ""]):
        cases.append(Case(f"env-machine-{i}", "env", ["machine", "--json"], env={"REPORTGEN_MACHINE": v},
                          expect="either" if v == "" else "refuse"))
    return cases


def init_publish_cases() -> list[Case]:
    def git_repo(ctx: Ctx) -> None:
        subprocess.run(["git", "init", "-q", "-b", "main", str(ctx.w)], check=True)

    cases: list[Case] = []
    for i, v in enumerate(["", "@", "x\n  run: touch {mark}", "$(touch {mark})", "o/r@v1 #", "-x", "o/r@" + LONG * 4,
                           "o/r@\u202e", "o/r@${{ secrets.X }}", "'", "o/r@v1\r"]):
        cases.append(Case(f"init-action-ref-{i}", "init", ["init", "--dir", "repo", "--action-ref", v],
                          setup=lambda c: (c.w / "repo").mkdir()))
    for i, v in enumerate([LONG, "a\x01b", "loop1", "fifo", "/dev/null", "afile", "-", b"\xff", "d/" * 2000]):
        def setup(ctx: Ctx, v: Arg = v) -> None:
            if v == "loop1":
                os.symlink("loop1", ctx.w / "loop1")
            if v == "fifo":
                os.mkfifo(ctx.w / "fifo")
            if v == "afile":
                (ctx.w / "afile").write_text("x")
        cases.append(Case(f"init-dir-{i}", "init", ["init", "--dir", v], setup=setup))
    for i, (flag, v) in enumerate([("--branch", "refs/heads/main"), ("--branch", "--upload-pack=touch {mark}"),
                                   ("--branch", "a..b"), ("--branch", ""), ("--branch", "HEAD"), ("--branch", "@{-1}"),
                                   ("--branch", "x\ny"), ("--remote", "--upload-pack=touch {mark}"),
                                   ("--remote", "ext::sh -c touch% {mark}"), ("--remote", "-x"),
                                   ("--remote", "$(touch {mark})"), ("--site", "loop1"), ("--site", "results"),
                                   ("--site", LONG), ("--repo", "-x"), ("--repo", "--upload-pack=x")]):
        push = ["--push"] if flag in ("--remote", "--branch") else []
        cases.append(Case(f"publish-{i}", "publish", ["publish", flag, v, *push], setup=git_repo))
    return cases


# --- config files ------------------------------------------------------------------------------------------


def config_cases() -> list[Case]:
    texts: list[bytes] = [
        b'machine = 5.5\n', b'machine = "box\\n"\n', b'baseline = "naive\\n"\n', b'params = { eps = "1\\n" }\n',
        b'threshold = "x"\n', b'threshold = nan\n', b'threshold = inf\n', b'threshold = -1\n',
        b'threshold = ' + b'9' * 5000 + b'\n', b'store = 5\n', b'store = "a\\u0000b"\n', b'store = ""\n',
        b'site = "results"\n', b'store = "site"\n', b'scenarios = "x"\n', b'scenarios = [1, 2]\n',
        b'device = "tpu"\n', b'base_url = "javascript:alert(1)"\n', b'sweep = "4,8\\n4,8"\n', b'unknown = 1\n',
        b'x = ' + b'[' * 5000 + b']' * 5000 + b'\n', b'a = ' + b'{b = ' * 2000 + b'1' + b'}' * 2000 + b'\n',
        b'machine = "' + b'x' * (10 * 1024 * 1024) + b'"\n', b'\xff\xfe\xfd', 'machine = "box"\n'.encode("utf-16"),
        b'machine = "box"\n\n\n\n', b'machine = "box"\0\n', b'[[[', b'machine = \n', b'machine = "\x1b[2J"\n',
        b'params = { "a b" = "1" }\n', b'params = [1]\n', b'sweep_params = { eps = "1,1" }\n',
        b'machine = "' + "\u202e".encode() + b'"\n', b'store = "' + b'x' * 300 + b'"\n', b'= 1\n']
    cases: list[Case] = []
    for i, t in enumerate(texts):
        def setup(ctx: Ctx, t: bytes = t) -> None:
            (ctx.w / "reportgen.toml").write_bytes(t)
        cases.append(Case(f"config-toml-{i}", "config", ["config"], setup=setup,
                          expect="either" if t.endswith(b'"box"\n\n\n\n') else "refuse"))
        if i % 3 == 0:
            cases.append(Case(f"config-toml-build-{i}", "config", ["build", "--runs", "results"], setup=setup,
                              expect="either" if t.endswith(b'"box"\n\n\n\n') else "refuse"))
    for i, t in enumerate([b'[tool.reportgen]\nmachine = 5\n', b'\xff\xfe[tool', '[tool.reportgen]\n'.encode("utf-16"),
                           b'[tool.reportgen\n', b'[tool]\nreportgen = 5\n', b'[tool.reportgen]\n' + b'x = [' * 3000,
                           b'[project]\nname = "\xff"\n']):
        def setup(ctx: Ctx, t: bytes = t) -> None:
            (ctx.w / "pyproject.toml").write_bytes(t)
        cases.append(Case(f"config-pyproject-{i}", "config", ["config"], setup=setup))

    def parent(ctx: Ctx) -> None:  # an unrelated broken pyproject.toml in a parent folder
        (ctx.w / "pyproject.toml").write_bytes(b"\xff\xfe not toml")
        (ctx.w / "sub").mkdir()
    cases.append(Case("config-parent-unrelated", "config", ["runs", "--store", "../results"], setup=parent,
                      expect="either"))
    cases[-1].argv = ["-c", "cd sub && reportgen runs --store ../results"]
    cases[-1].prog = "sh"
    return cases


# --- bundles, withdrawn.json, manifest.json ----------------------------------------------------------------


def _runs(ctx: Ctx) -> list[Path]:
    return sorted(p for p in (ctx.w / "results").iterdir() if (p / "run.json").is_file())


def bundle_cases() -> list[Case]:
    def edit(fn: Callable[[dict[str, Any]], Any]) -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            p = _runs(ctx)[-1] / "run.json"
            d = json.loads(p.read_text())
            out = fn(d)
            p.write_bytes(out if isinstance(out, bytes) else json.dumps(d if out is None else out).encode())
        return setup

    def v0(d: dict[str, Any]) -> dict[str, Any]:
        return d["variants"][0]

    big_n = 300_000
    muts: dict[str, Callable[[dict[str, Any]], Any]] = {
        "no-variants": lambda d: d.pop("variants"), "no-run-id": lambda d: d.pop("run_id"),
        "no-schema": lambda d: d.pop("schema_version"), "schema-99": lambda d: d.update(schema_version=99),
        "schema-str": lambda d: d.update(schema_version="4"),
        "schema-huge": lambda d: b'{"schema_version": ' + b"9" * 5000 + b"}",
        "variants-dict": lambda d: d.update(variants={}), "variants-str": lambda d: d.update(variants="x"),
        "variant-int": lambda d: d.update(variants=[1]), "samples-str": lambda d: v0(d).update(samples_us="x"),
        "samples-empty": lambda d: v0(d).update(samples_us=[]), "samples-neg": lambda d: v0(d).update(samples_us=[-1.0] * 5),
        "samples-inf": lambda d: v0(d).update(samples_us=[1e308] * 50),
        "samples-nan": lambda d: json.dumps(d).replace('"samples_us": [', '"samples_us": [NaN, ', 1).encode(),
        "samples-Infinity": lambda d: json.dumps(d).replace('"samples_us": [', '"samples_us": [Infinity, ', 1).encode(),
        "samples-huge": lambda d: v0(d).update(samples_us=[float(i % 97 + 1) for i in range(big_n)]),
        "samples-strings": lambda d: v0(d).update(samples_us=["1"] * 5),
        "samples-nested": lambda d: v0(d).update(samples_us=[[1]]),
        "samples-bigint": lambda d: json.dumps(d).replace('"samples_us": [', '"samples_us": [' + "9" * 5000 + ", ", 1).encode(),
        "created-bad": lambda d: d.update(created_utc="2026-13-45T25:61:61Z"),
        "created-zero": lambda d: d.update(created_utc="0000-00-00T00:00:00Z"),
        "created-int": lambda d: d.update(created_utc=5), "created-empty": lambda d: d.update(created_utc=""),
        "created-far": lambda d: d.update(created_utc="9999-12-31T23:59:59Z"),
        "run-id-mismatch": lambda d: d.update(run_id="20200101T000000Z-x-000000"),
        "run-id-path": lambda d: d.update(run_id="../../etc"), "run-id-nul": lambda d: d.update(run_id="a\0b"),
        "name-nul": lambda d: v0(d).update(name="na\0ive"), "name-esc": lambda d: v0(d).update(name="\x1b[2J\x07\r"),
        "name-html": lambda d: v0(d).update(name="<script>alert(1)</script>"),
        "name-long": lambda d: v0(d).update(name="n" * 100000),
        "name-int": lambda d: v0(d).update(name=5), "status-bad": lambda d: v0(d).update(status="bogus"),
        "dup-variants": lambda d: d.update(variants=d["variants"] + d["variants"]),
        "deep": lambda d: d.update(notes=json.loads("[" * 900 + "]" * 900)),
        "deep-raw": lambda d: b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b"}",
        "not-json": lambda d: b"{not json", "empty": lambda d: b"", "nul": lambda d: b"\0" * 100,
        "non-utf8": lambda d: json.dumps(d).encode().replace(b'"naive"', b'"na\xffive"', 1),
        "utf16": lambda d: json.dumps(d).encode("utf-16"), "list": lambda d: [1, 2, 3],
        "scenario-str": lambda d: d.update(scenario="x"), "device-dict": lambda d: d.update(device={}),
        "env-null": lambda d: d.update(environment=None), "ops-str": lambda d: v0(d).update(ops="x"),
        "trace-path-escape": lambda d: v0(d).update(trace_path="../../../../etc/passwd"),
        "trace-path-abs": lambda d: v0(d).update(trace_path="/etc/passwd"),
        "artifact-escape": lambda d: v0(d).update(artifacts=["../../../etc/passwd"]),
        "peak-nan": lambda d: json.dumps(d).replace('"flops_per_s": ', '"flops_per_s": NaN, "x": ', 1).encode(),
        "sweep-bad": lambda d: d.update(sweep=[{"shape": 5}]), "label-huge": lambda d: d.update(label="L" * 1_000_000),
        "params-deep": lambda d: d["scenario"].update(parameters={"a": json.loads("[" * 500 + "]" * 500)}),
    }
    cases: list[Case] = []
    for name, fn in muts.items():
        setup = edit(fn)
        cases.append(Case(f"bundle-{name}-build-strict", "bundle", ["build", "--runs", "results", "--strict"], setup=setup,
                          expect="either", timeout=180))
        cases.append(Case(f"bundle-{name}-compare", "bundle", ["compare", "latest~1", "latest", "--store", "results"],
                          setup=setup, expect="either", timeout=180))
        if name in ("no-run-id", "schema-99", "deep-raw", "non-utf8", "samples-huge", "created-bad", "run-id-path",
                    "name-esc", "dup-variants", "samples-inf"):
            cases.append(Case(f"bundle-{name}-runs", "bundle", ["runs", "--store", "results"], setup=setup,
                              expect="either"))
            cases.append(Case(f"bundle-{name}-build", "bundle", ["build", "--runs", "results"], setup=setup,
                              expect="either", timeout=180))

    def wd(text: bytes | None, kind: str = "file") -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            p = ctx.w / "results" / "withdrawn.json"
            if kind == "fifo":
                os.mkfifo(p)
            elif kind == "dir":
                p.mkdir()
            elif kind == "loop":
                os.symlink("withdrawn.json", p)
            elif kind == "dev":
                os.symlink("/dev/zero", p)
            else:
                p.write_bytes(text or b"")
        return setup

    withdrawns = {
        "fifo": wd(None, "fifo"), "dir": wd(None, "dir"), "loop": wd(None, "loop"), "devzero": wd(None, "dev"),
        "deep": wd(b'{"schema_version": 1, "withdrawals": ' + b"[" * 50000 + b"]" * 50000 + b"}"),
        "bigint": wd(b'{"schema_version": ' + b"9" * 5000 + b', "withdrawals": []}'),
        "not-json": wd(b"{"), "list": wd(b"[]"), "wrong-type": wd(b'{"schema_version": 1, "withdrawals": "x"}'),
        "entry-int": wd(b'{"schema_version": 1, "withdrawals": [1]}'), "non-utf8": wd(b'{"\xff": 1}'),
        "schema-99": wd(b'{"schema_version": 99, "withdrawals": []}'), "nan": wd(b'{"schema_version": NaN}'),
        "huge-reason": wd(json.dumps({"schema_version": 1, "withdrawals": [
            {"run_id": "x", "reason": "r" * 3_000_000, "withdrawn_utc": "2026-01-01T00:00:00Z"}]}).encode()),
        "empty": wd(b""),
    }
    for name, setup in withdrawns.items():
        for cmd in (["runs", "--store", "results"], ["rm", "latest", "--store", "results", "--reason", "x"],
                    ["build", "--runs", "results"], ["compare", "latest~1", "latest", "--store", "results"]):
            cases.append(Case(f"withdrawn-{name}-{cmd[0]}", "withdrawn", list(cmd), setup=setup, timeout=60,
                              expect="either" if name in ("empty",) else "refuse"))

    def mf(text: bytes | None, kind: str = "file") -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            p = ctx.w / "site" / "manifest.json"
            p.unlink()
            if kind == "fifo":
                os.mkfifo(p)
            elif kind == "loop":
                os.symlink("manifest.json", p)
            else:
                p.write_bytes(text or b"")
        return setup

    manifests = {"fifo": mf(None, "fifo"), "loop": mf(None, "loop"), "deep": mf(b"[" * 50000 + b"]" * 50000),
                 "bigint": mf(b'{"schema_version": ' + b"9" * 5000 + b"}"), "not-json": mf(b"{"), "list": mf(b"[]"),
                 "non-utf8": mf(b'{"\xff": 1}'), "runs-str": mf(b'{"schema_version": 1, "base_url": "/", "runs": "x"}'),
                 "schema-99": mf(b'{"schema_version": 99}'), "empty": mf(b"")}
    for name, setup in manifests.items():
        cases.append(Case(f"manifest-{name}-build", "manifest", ["build", "--runs", "results"], setup=setup,
                          timeout=60, expect="either"))
        cases.append(Case(f"manifest-{name}-publish", "manifest", ["publish", "--repo", "."], setup=setup,
                          timeout=60))
    return cases


# --- traces to import --------------------------------------------------------------------------------------


def trace_cases() -> list[Case]:
    def ev(i: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": i * 2, "dur": 1,
                "args": {"Input Dims": [[4, 8]]}}

    def trace(events: Any, **top: Any) -> bytes:
        return json.dumps({"schemaVersion": 1, "traceEvents": events, **top}).encode()

    def put(name: str, data: bytes, gz: bool = False) -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            (ctx.w / name).write_bytes(gzip.compress(data, 9) if gz else data)
        return setup

    ok = [ev(i) for i in range(50)]
    items: dict[str, tuple[str, bytes, bool]] = {
        "bad-json": ("t.json", b'{"traceEvents": [', False), "empty": ("t.json", b"", False),
        "not-object": ("t.json", b"[1,2,3]", False), "events-str": ("t.json", trace("x"), False),
        "events-ints": ("t.json", trace([1, 2, 3]), False), "no-events": ("t.json", b'{"schemaVersion": 1}', False),
        "deep-dims": ("t.json", trace([{**ev(0), "args": {"Input Dims": json.loads("[" * 900 + "]" * 900)}}]), False),
        "deep-raw": ("t.json", b'{"traceEvents": [' + b"[" * 100000 + b"]" * 100000 + b"]}", False),
        "bigint-ts": ("t.json", trace(ok).replace(b'"ts": 0', b'"ts": ' + b"9" * 5000, 1), False),
        "nan-dur": ("t.json", trace(ok).replace(b'"dur": 1', b'"dur": NaN', 1), False),
        "inf-ts": ("t.json", trace(ok).replace(b'"ts": 0', b'"ts": Infinity', 1), False),
        "neg-dur": ("t.json", trace([{**e, "dur": -5} for e in ok]), False),
        "str-ts": ("t.json", trace([{**e, "ts": "x"} for e in ok]), False),
        "nul-name": ("t.json", trace([{**e, "name": "a\0b"} for e in ok]), False),
        "esc-name": ("t.json", trace([{**e, "name": "\x1b[2J\x07"} for e in ok]), False),
        "non-utf8": ("t.json", trace(ok).replace(b"aten::add", b"aten::\xff", 1), False),
        "utf16": ("t.json", trace(ok).decode().encode("utf-16"), False),
        "over-limit-events": ("t.json.gz", trace([ev(i) for i in range(20001)]), True),
        "at-limit-events": ("t.json.gz", trace([ev(i) for i in range(19990)]), True),
        "gzip-bomb-zeros": ("t.json.gz", b'{"traceEvents": [], "x": "' + b"0" * (60 * 1024 * 1024) + b'"}', True),
        "gzip-bomb-spaces": ("t.json.gz", b" " * (60 * 1024 * 1024), True),
        "gzip-truncated": ("t.json.gz", gzip.compress(trace(ok))[:-20], False),
        "gzip-garbage": ("t.json.gz", b"\x1f\x8b\x08\x00garbage", False),
        "gzip-concat": ("t.json.gz", gzip.compress(trace(ok)) + gzip.compress(trace(ok)), False),
        "dup-keys": ("t.json", b'{"traceEvents": [], "traceEvents": 5}', False),
        "huge-name": ("t.json", trace([{**e, "name": "n" * 1_000_000} for e in ok[:2]]), False),
        "many-threads": ("t.json", trace([{**ev(i), "tid": i} for i in range(5000)]), False),
        "flow-loop": ("t.json", trace([*ok, {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 0, "cat": "ac2g", "name": "x"},
                                        {"ph": "f", "id": 1, "pid": 1, "tid": 1, "ts": 0, "cat": "ac2g", "name": "x",
                                         "bp": "e"}]), False),
        "nul-bytes": ("t.json", b"\0" * 1000, False),
        "dash-name": ("-t.json", trace(ok), False),
        "newline-name": ("t\nx.json", trace(ok), False),
    }
    cases = []
    for name, (fname, data, gz) in items.items():
        expect = "either" if name in ("at-limit-events", "esc-name", "nul-name", "neg-dur", "many-threads", "flow-loop",
                                      "dash-name", "newline-name", "gzip-concat", "huge-name") else "refuse"
        arg = "./" + fname if fname.startswith("-") else fname
        cases.append(Case(f"import-{name}", "import", ["import", arg, "--store", "results"],
                          setup=put(fname, data, gz), expect=expect, timeout=180))
    cases.append(Case("import-dash-raw", "import", ["import", "-t.json", "--store", "results"],
                      setup=put("-t.json", trace(ok))))

    def profile_dir(kind: str) -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            root = ctx.w / "profile_output"
            (ctx.root / "secret").mkdir(exist_ok=True)
            (ctx.root / "secret" / "key.txt").write_text("SECRET")
            root.mkdir()
            if kind == "session-link":
                os.symlink(ctx.root / "secret", root / "session_1")
            elif kind == "loop":
                os.symlink("session_1", root / "session_1")
            elif kind == "fifo":
                (root / "session_1").mkdir()
                os.mkfifo(root / "session_1" / "x.ntff")
            elif kind == "empty":
                pass
        return setup

    for kind in ("session-link", "loop", "fifo", "empty"):
        cases.append(Case(f"import-profile-output-{kind}", "import", ["import", "profile_output", "--store", "results"],
                          setup=profile_dir(kind)))
    return cases


# --- the Action's script and the comment poster --------------------------------------------------------------


def make_remote(root: Path) -> tuple[Path, Path]:
    """A bare remote holding one commit of a user repository, and a clone of it (shared by the Action's cases)."""
    src = root / "action-src"
    src.mkdir()
    (src / "reportgen.toml").write_text('machine = "ci-box"\n')
    (src / "README.md").write_text("user repo\n")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root / "home")}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"],
                ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "base"]):
        subprocess.run(["git", *cmd], cwd=src, check=True, env=env, capture_output=True)
    remote = root / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(remote)], check=True, env=env, capture_output=True)
    return remote, src


def action_cases() -> list[Case]:
    def workspace(ctx: Ctx) -> None:
        work = ctx.w / "ws"
        subprocess.run(["git", "clone", "-q", str(ctx.shared["remote"]), str(work)], check=True, capture_output=True,
                       env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(ctx.root / "home")})
        (ctx.w / "rt").mkdir()
        sha = subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        ctx.shared["sha"] = sha
        (ctx.w / "event.json").write_text(json.dumps({"pull_request": {"number": 7, "base": {"sha": sha}}}))

    def env(**extra: str) -> dict[str, str]:
        return {"GITHUB_WORKSPACE": "{w}/ws", "RUNNER_TEMP": "{w}/rt", "GITHUB_OUTPUT": "{w}/rt/out",
                "GITHUB_REF_NAME": "main", "GITHUB_REPOSITORY": "o/r", "GITHUB_TOKEN": TOKEN,
                "GITHUB_API_URL": "{api}", "RG_INSTALL": "", "RG_DEVICE": "cpu", **extra}

    push_inputs: list[tuple[str, str]] = [
        ("RG_RESULTS_BRANCH", "--upload-pack=touch {mark};git-upload-pack"), ("RG_RESULTS_BRANCH", "$(touch {mark})"),
        ("RG_RESULTS_BRANCH", "a;touch {mark}"), ("RG_RESULTS_BRANCH", "refs/heads/x"), ("RG_RESULTS_BRANCH", "-b"),
        ("RG_RESULTS_BRANCH", "a..b"), ("RG_RESULTS_BRANCH", "x\n--upload-pack=touch {mark}"),
        ("RG_RESULTS_BRANCH", "@{-1}"), ("RG_RESULTS_BRANCH", "x y"), ("RG_RESULTS_BRANCH", "`touch {mark}`"),
        ("RG_MACHINE", "ci-box\n--dtype\nbfloat16"), ("RG_MACHINE", "--dtype bfloat16"), ("RG_MACHINE", "$(touch {mark})"),
        ("RG_SCENARIOS", "*"), ("RG_SCENARIOS", "rmsnorm\n--dtype bfloat16"), ("RG_SCENARIOS", "$(touch {mark})"),
        ("RG_SCENARIOS", "--help"), ("RG_DEVICE", "cpu\r"), ("RG_DEVICE", "-h"), ("RG_DEVICE", "$(touch {mark})"),
        ("RG_BASE_URL", "javascript:alert(1)"), ("RG_BASE_URL", "x\ny"), ("RG_SITE_DIR", "{w}/ws/.git"),
        ("RG_SITE_DIR", "-x"), ("GITHUB_SHA", "--upload-pack=touch {mark}"), ("GITHUB_SHA", "$(touch {mark})"),
        ("GITHUB_REF_NAME", "main\n--dtype"), ("GITHUB_REF_NAME", "$(touch {mark})"), ("RG_THRESHOLD", "5\n--x"),
    ]
    cases: list[Case] = []
    for i, (k, v) in enumerate(push_inputs):
        cases.append(Case(f"action-push-{k}-{i}", "action", ["push"], prog="action", setup=workspace,
                          env=env(**{k: v}), expect="either", timeout=240))
    pr_events = [{"pull_request": {"number": "$(touch {mark})", "base": {"sha": "x"}}},
                 {"pull_request": {"number": 7, "base": {"sha": "--upload-pack=touch {mark}"}}},
                 {"pull_request": {"number": "7;touch {mark}", "base": {"sha": "0" * 40}}},
                 {"pull_request": {"number": -1, "base": {"sha": "0" * 40}}}, {"pull_request": {}}, [],
                 {"pull_request": {"number": 7, "base": {"sha": "0" * 40 + "\n--x"}}}]
    for i, event in enumerate(pr_events):
        def setup(ctx: Ctx, event: Any = event) -> None:
            workspace(ctx)
            (ctx.w / "event.json").write_text(str(sub(json.dumps(event), ctx)))
        cases.append(Case(f"action-pr-event-{i}", "action", ["pull-request"], prog="action", setup=setup,
                          env=env(GITHUB_EVENT_PATH="{w}/event.json"), timeout=120))
    for i, (k, v) in enumerate([("RG_SCENARIOS", "a\nb"), ("RG_AB_ARGS", "--x\n--y"), ("RG_THRESHOLD", "1\r"),
                                ("GITHUB_EVENT_PATH", "{w}/nothing.json")]):
        cases.append(Case(f"action-pr-input-{i}", "action", ["pull-request"], prog="action", setup=workspace,
                          env=env(**{"GITHUB_EVENT_PATH": "{w}/event.json", k: v}), timeout=120))
    cases.append(Case("action-mode-injection", "action", ["$(touch {mark})"], prog="action", setup=workspace, env=env()))
    cases.append(Case("action-mode-empty", "action", [], prog="action", setup=workspace, env=env()))
    return cases


def comment_cases() -> list[Case]:
    def body(ctx: Ctx) -> None:
        (ctx.w / "body.md").write_text("<!-- reportgen-compare -->\nhello\n")

    def j(value: Any, code: int = 200, **headers: str) -> tuple[int, dict[str, str], bytes, float]:
        return code, {"Content-Type": "application/json", **headers}, json.dumps(value).encode(), 0

    def raw(data: bytes, code: int = 200, delay: float = 0, ctype: str = "application/json"
            ) -> Callable[[str, str], tuple[int, dict[str, str], bytes, float]]:
        return lambda m, p: (code, {"Content-Type": ctype}, data, delay)

    def redirect(code: int, where: str) -> Callable[[str, str], tuple[int, dict[str, str], bytes, float]]:
        return lambda m, p: (code, {"Location": where + p}, b"", 0)

    def created_after_get(answer: tuple[int, dict[str, str], bytes, float]
                          ) -> Callable[[str, str], tuple[int, dict[str, str], bytes, float]]:
        return lambda m, p: j([]) if m == "GET" else answer

    other = "OTHER"  # replaced by the other server's URL when the case runs
    behaviours: dict[str, Callable[[str, str], tuple[int, dict[str, str], bytes, float]]] = {}
    for code in (301, 302, 303, 307, 308):
        behaviours[f"redirect-{code}-other-origin"] = redirect(code, other)
    behaviours["redirect-localhost-other-port"] = redirect(307, "OTHERLOCALHOST")
    behaviours["redirect-scheme-relative"] = redirect(307, "//OTHERHOSTPORT")
    behaviours["redirect-userinfo"] = redirect(307, "http://127.0.0.1@OTHERHOSTPORT")
    behaviours["redirect-no-location"] = lambda m, p: (302, {}, b"", 0)
    behaviours["redirect-loop"] = lambda m, p: (307, {"Location": p}, b"", 0)
    behaviours["redirect-ftp"] = lambda m, p: (307, {"Location": "ftp://127.0.0.1/x"}, b"", 0)
    behaviours["redirect-crlf"] = lambda m, p: (307, {"Location": "/x%0d%0aAuthorization:%20x"}, b"", 0)
    behaviours["html"] = raw(b"<html><body>hi</body></html>", ctype="text/html")
    behaviours["list-of-strings"] = raw(b'["a", "b"]')
    behaviours["object"] = raw(b'{"a": 1}')
    behaviours["deep"] = raw(b"[" * 100000 + b"]" * 100000)
    behaviours["bigint"] = raw(b"[" + b"9" * 5000 + b"]")
    behaviours["nan"] = raw(b"[NaN]")
    behaviours["non-utf8"] = raw(b'["\xff"]')
    behaviours["huge"] = raw(b"[" + b" " * (40 * 1024 * 1024) + b"]")
    behaviours["empty-200"] = raw(b"")
    behaviours["500-html"] = raw(b"<h1>oops</h1>", code=500, ctype="text/html")
    behaviours["401"] = lambda m, p: j({"message": "Bad credentials " + "\x1b[2J"}, 401)
    behaviours["404"] = lambda m, p: j({"message": "Not Found"}, 404)
    behaviours["created-no-id"] = created_after_get(j({"x": 1}, 201))
    behaviours["created-id-str"] = created_after_get(j({"id": "1;touch"}, 201))
    behaviours["created-list"] = created_after_get(j([1], 201))
    behaviours["own-comment-bad-id"] = lambda m, p: j([{"id": "../../x", "user": {"type": "Bot"},
                                                        "body": "<!-- reportgen-compare -->"}])
    behaviours["own-comment-bigint-id"] = lambda m, p: (200, {}, b'[{"id": ' + b"9" * 5000 +
                                                        b', "user": {"type": "Bot"}, "body": "<!-- reportgen-compare -->"}]', 0)
    behaviours["endless-pages"] = lambda m, p: j([{"id": i, "user": {"type": "User"}, "body": "x"} for i in range(100)])
    behaviours["slow-35s"] = raw(b"[]", delay=35)
    behaviours["dribble"] = raw(b"", delay=-1)
    cases: list[Case] = []
    for name, fn in behaviours.items():
        def behave(m: str, p: str, fn: Callable[..., Any] = fn) -> tuple[int, dict[str, str], bytes, float]:
            return fn(m, p)
        cases.append(Case(f"comment-api-{name}", "comment", ["--pr", "7", "--body", "body.md"], prog="comment",
                          setup=body, env={"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "o/r", "GITHUB_API_URL": "{api}"},
                          behave=behave, timeout=80))
    for i, (k, v) in enumerate([("GITHUB_API_URL", "{other}"[:0] + "http://example.invalid"),
                                ("GITHUB_API_URL", "file:///etc/passwd"), ("GITHUB_API_URL", "ftp://127.0.0.1/"),
                                ("GITHUB_API_URL", "http://127.0.0.1:1"), ("GITHUB_API_URL", "{api}\n"),
                                ("GITHUB_API_URL", ""), ("GITHUB_API_URL", "http://user:pw@127.0.0.1:1/"),
                                ("GITHUB_TOKEN", ""), ("GITHUB_TOKEN", "a\nb"), ("GITHUB_TOKEN", "a b"),
                                ("GITHUB_REPOSITORY", "../../x"), ("GITHUB_REPOSITORY", ""),
                                ("GITHUB_REPOSITORY", "o/r?x=1#"), ("GITHUB_REPOSITORY", "o/r/../../users")]):
        e = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "o/r", "GITHUB_API_URL": "{api}", k: v}
        cases.append(Case(f"comment-env-{k}-{i}", "comment", ["--pr", "7", "--body", "body.md"], prog="comment",
                          setup=body, env=e, timeout=80))
    for i, argv in enumerate([["--pr", "-1", "--body", "body.md"], ["--pr", "9" * 5000, "--body", "body.md"],
                              ["--pr", "nan", "--body", "body.md"], ["--pr", "7", "--body", "nothing"],
                              ["--pr", "7", "--body", "fifo"], ["--pr", "7", "--body", "."],
                              ["--pr", "7", "--body", "bad.md"], ["--pr", "7", "--body", "big.md"],
                              ["--pr", "0", "--body", "body.md"], ["--pr", "7/../../x", "--body", "body.md"]]):
        def setup(ctx: Ctx) -> None:
            body(ctx)
            os.mkfifo(ctx.w / "fifo")
            (ctx.w / "bad.md").write_bytes(b"\xff\xfe\x00")
            (ctx.w / "big.md").write_bytes(b"x" * (30 * 1024 * 1024))
        cases.append(Case(f"comment-args-{i}", "comment", argv, prog="comment", setup=setup, timeout=60,
                          env={"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "o/r", "GITHUB_API_URL": "{api}"}))
    return cases


# --- kills --------------------------------------------------------------------------------------------------


def listed(ctx: Ctx, env: dict[str, str]) -> tuple[int, list[str], str]:
    p = subprocess.run([str(ctx.shared["bin"] / "reportgen"), "runs", "--all", "--store", "results"], cwd=ctx.w,
                       env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, RUN_ID_RE.findall(p.stdout), p.stderr


class HTMLCheck(html.parser.HTMLParser):
    pass


def site_state(site: Path) -> tuple[bool, frozenset[str] | None, str]:
    try:
        text = (site / "index.html").read_text()
        HTMLCheck().feed(text)
        manifest = json.loads((site / "manifest.json").read_text())
        ids = frozenset(r["digest"]["run_id"] for r in manifest["runs"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return False, None, f"{type(exc).__name__}: {exc}"
    return "</html>" in text.lower(), ids, ""


@dataclass
class Kill:
    id: str
    argv: list[str]
    trigger: str                      # description
    when: Callable[[Ctx, Path, Path], bool]   # (ctx, stdout file, stderr file) -> fire now
    sig: int
    setup: Callable[[Ctx], None] | None = None
    timeout: float = 240


def new_entry(pattern: str, where: str = "results", inside: str | None = None) -> Callable[[Ctx, Path, Path], bool]:
    """Fires when an entry of ``where`` whose name matches ``pattern`` exists (holding ``inside``, or any file when
    ``inside`` is "*")."""
    rx = re.compile(pattern)

    def when(ctx: Ctx, _o: Path, _e: Path) -> bool:
        try:
            for name in os.listdir(ctx.w / where):
                if not rx.search(name):
                    continue
                if inside is None:
                    return True
                sub_ = ctx.w / where / name
                if (any(True for _ in os.scandir(sub_)) if inside == "*" else os.path.exists(sub_ / inside)):
                    return True
        except OSError:
            pass
        return False
    return when


def new_run_dir(ctx: Ctx, _o: Path, _e: Path) -> bool:
    return any(not n.startswith(".") and n not in ctx.shared["template_runs"] and n != "withdrawn.json"
               for n in os.listdir(ctx.w / "results"))


def output_bytes(n: int, which: str = "out") -> Callable[[Ctx, Path, Path], bool]:
    def when(_c: Ctx, o: Path, e: Path) -> bool:
        return (o if which == "out" else e).stat().st_size >= n
    return when


def staged_bytes(n: int) -> Callable[[Ctx, Path, Path], bool]:
    def when(ctx: Ctx, _o: Path, _e: Path) -> bool:
        try:
            for d in os.scandir(ctx.w / "results"):
                if re.search(IMPORT_TMP, d.name):
                    return any(f.is_file() and f.stat().st_size >= n for f in os.scandir(d.path))
        except OSError:
            pass
        return False
    return when


def withdrawn_replaced(ctx: Ctx, _o: Path, _e: Path) -> bool:
    try:
        return os.stat(ctx.w / "results" / "withdrawn.json").st_ino != ctx.shared["withdrawn_ino"]
    except OSError:
        return False


def site_changed(ctx: Ctx, _o: Path, _e: Path) -> bool:
    try:
        return os.stat(ctx.w / "site").st_ino != ctx.shared["site_ino"]
    except OSError:
        return False


BUNDLE_TMP = r"^\.tmp-.*-p\d+-\d{8}"  # a bundle being written: .tmp-<host>-p<pid>-<run id>-XXXX
IMPORT_TMP = r"^\.tmp-.*-p\d+-import-"


def kill_cases() -> list[Kill]:
    def bigger_withdrawn(ctx: Ctx) -> None:
        ws = [{"run_id": f"20200101T000000Z-x-{i:06d}", "reason": "r", "withdrawn_utc": "2026-01-01T00:00:00Z"}
              for i in range(20000)]
        (ctx.w / "results" / "withdrawn.json").write_text(json.dumps({"schema_version": 1, "withdrawals": ws}))

    def trace_file(ctx: Ctx) -> None:
        shutil.copy(ctx.shared["import_trace"], ctx.w / "big.trace.json.gz")

    def add_run_then(ctx: Ctx) -> None:  # the site is one run behind the store: a build has something new to write
        shutil.rmtree(ctx.w / "results" / ctx.shared["template_runs"][0])

    points: list[tuple[str, list[str], str, Callable[[Ctx, Path, Path], bool], Callable[[Ctx], None] | None]] = [
        ("profile", ["profile", *TINY, "--store", "results", "--quiet"], "work folder appears",
         new_entry(r"^\.tmp-work-", "tmp"), None),
        ("profile", ["profile", *TINY, "--store", "results", "--quiet"], "temp bundle has traces/",
         new_entry(BUNDLE_TMP, inside="traces"), None),
        ("profile", ["profile", *TINY, "--store", "results", "--quiet"], "temp bundle appears", new_entry(BUNDLE_TMP), None),
        ("profile", ["profile", *TINY, "--store", "results", "--quiet"], "temp bundle has run.json",
         new_entry(BUNDLE_TMP, inside="run.json"), None),
        ("profile", ["profile", *TINY, "--store", "results", "--quiet"], "new run folder appears", new_run_dir, None),
        ("profile", ["profile", *TINY, "--store", "results"], "first stderr byte", output_bytes(1, "err"), None),
        ("profile", ["profile", *TINY, "--store", "results"], "first stdout byte", output_bytes(1), None),
        ("import", ["import", "big.trace.json.gz", "--store", "results"], "staging appears", new_entry(IMPORT_TMP), trace_file),
        ("import", ["import", "big.trace.json.gz", "--store", "results"], "staging holds the trace copy",
         new_entry(IMPORT_TMP, inside="*"), trace_file),
        ("import", ["import", "big.trace.json.gz", "--store", "results"], "temp bundle has run.json",
         new_entry(BUNDLE_TMP, inside="run.json"), trace_file),
        ("import", ["import", "big.trace.json.gz", "--store", "results"], "new run folder appears", new_run_dir, trace_file),
        ("import", ["import", "big.trace.json.gz", "--store", "results"], "first stdout byte", output_bytes(1), trace_file),
        ("import", ["import", "big.trace.json.gz", "--store", "results"], "staged copy over 20 kB", staged_bytes(20_000),
         trace_file),
        ("build", ["build", "--runs", "results"], "staging folder appears", new_entry(r"^\.site-tmp-", "."), add_run_then),
        ("build", ["build", "--runs", "results"], "staging has index.html",
         new_entry(r"^\.site-tmp-", ".", inside="index.html"), add_run_then),
        ("build", ["build", "--runs", "results"], "staging has manifest.json",
         new_entry(r"^\.site-tmp-", ".", inside="manifest.json"), add_run_then),
        ("build", ["build", "--runs", "results"], "staging has runs/", new_entry(r"^\.site-tmp-", ".", inside="runs"),
         add_run_then),
        ("build", ["build", "--runs", "results"], "site swapped", site_changed, add_run_then),
        ("build", ["build", "--runs", "results"], "first stdout byte", output_bytes(1), add_run_then),
        ("build", ["build", "--runs", "results"], "staging has assets/", new_entry(r"^\.site-tmp-", ".", inside="assets"),
         add_run_then),
        ("build", ["build", "--runs", "results"], "staging has history/",
         new_entry(r"^\.site-tmp-", ".", inside="history"), add_run_then),
        ("build", ["build", "--runs", "results"], "old site moved aside", new_entry(r"^\.site-old-", "."), add_run_then),
        ("rm", ["rm", "latest", "--store", "results", "--reason", "k"], "withdrawal temp file appears",
         new_entry(r"^\.withdrawn\..*\.tmp$"), bigger_withdrawn),
        ("rm", ["rm", "latest", "--store", "results", "--reason", "k"], "first stdout byte", output_bytes(1),
         bigger_withdrawn),
        ("rm", ["rm", "latest", "--store", "results", "--reason", "k"], "withdrawn.json replaced", withdrawn_replaced,
         bigger_withdrawn),
        ("rm", ["rm", "latest", "--store", "results", "--reason", "k"], "lock file appears", new_entry(r"^\.withdrawn\.lock$"),
         bigger_withdrawn),
        ("compare", ["compare", "latest~1", "latest", "--store", "results", "--output", "out.md"],
         "output temp file appears", new_entry(r"^\.out\.md\..*\.tmp$", "."), None),
        ("compare", ["compare", "latest~1", "latest", "--store", "results", "--output", "out.md"],
         "output file appears", new_entry(r"^out\.md$", "."), None),
        ("compare", ["compare", "latest~1", "latest", "--store", "results", "--format", "json", "--output", "out.json"],
         "JSON output temp file appears", new_entry(r"^\.out\.json\..*\.tmp$", "."), None),
    ]
    kills: list[Kill] = []
    for sig in (signal.SIGKILL, signal.SIGINT):
        for i, (cmd, argv, trigger, when, setup) in enumerate(points):
            kills.append(Kill(f"kill-{cmd}-{i}-{sig.name}", argv, trigger, when, sig, setup))
    return kills


def run_kill(k: Kill, ctx: Ctx) -> dict[str, Any]:
    if k.setup:
        k.setup(ctx)
    env = base_env(ctx, {})
    ctx.shared["site_ino"] = os.stat(ctx.w / "site").st_ino
    wd = ctx.w / "results" / "withdrawn.json"
    ctx.shared["withdrawn_ino"] = os.stat(wd).st_ino if wd.exists() else None
    old_site = site_state(ctx.w / "site")[1]
    rc0, before, _ = listed(ctx, env)
    o, e = ctx.w.parent / f"{ctx.w.name}.out", ctx.w.parent / f"{ctx.w.name}.err"
    with open(o, "wb") as fo, open(e, "wb") as fe:
        proc = subprocess.Popen([str(ctx.shared["bin"] / "reportgen"), *k.argv], cwd=ctx.w, env=env,
                                stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, start_new_session=True)
        fired, t0 = False, time.monotonic()
        while proc.poll() is None and time.monotonic() - t0 < k.timeout:
            if k.when(ctx, o, e):
                os.kill(proc.pid, k.sig)
                fired = True
                break
            time.sleep(0.0005)  # a poll interval, not a synchronisation: the trigger is the state seen
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = None
            proc.wait()
    err = e.read_text(errors="replace")
    problems: list[str] = []
    if rc is None:
        problems.append("hang")
    if "Traceback (most recent call last)" in err + o.read_text(errors="replace"):
        problems.append("traceback")
    if rc == 70:
        problems.append("exit_70")
    # 130 from reportgen's handler; -2 (death by SIGINT, which a shell also shows as 130) only once Python is
    # shutting down after the command's work is done, with nothing on stderr
    if k.sig == signal.SIGINT and fired and rc not in (0, 130) and not (rc == -2 and not err.strip()):
        problems.append(f"sigint_exit_{rc}")
    rc1, after, lerr = listed(ctx, env)
    if rc1 != 0:
        problems.append(f"runs_failed_after: {lerr.strip()[:200]}")
    if len(after) != len(set(after)):
        problems.append("run_listed_twice")
    lost = [r for r in before if r not in after]
    if lost:
        problems.append(f"runs_lost: {lost}")
    for r in after:
        try:
            json.loads((ctx.w / "results" / r / "run.json").read_text())
        except (OSError, ValueError):
            problems.append(f"half_run_visible: {r}")
    if any(r.startswith(".") for r in after):
        problems.append("temp_listed")
    ok, ids, why = site_state(ctx.w / "site")
    if not ok:
        problems.append(f"site_broken: {why}")
    elif k.argv[0] == "build" and ids != old_site and ids != frozenset(after):
        problems.append("site_neither_old_nor_new")
    b = subprocess.run([str(ctx.shared["bin"] / "reportgen"), "build", "--runs", "results"], cwd=ctx.w, env=env,
                       capture_output=True, text=True, timeout=300)
    if b.returncode != 0:
        problems.append(f"build_failed_after: {b.stderr.strip()[-200:]}")
    rc2, again, _ = listed(ctx, env)
    if rc2 != 0 or sorted(again) != sorted(after):
        problems.append("runs_after_build_differs")
    if rc0 != 0:
        problems.append("runs_failed_before")
    return {"id": k.id, "group": f"kill:{k.argv[0]}", "trigger": k.trigger, "signal": k.sig.name, "fired": fired,
            "rc": rc, "problems": problems, "stderr_tail": err[-300:],
            "verdict": "kill_ok" if not problems else ("runs_lost" if any(p.startswith("runs_lost") for p in problems)
                                                       else "kill_problem")}


# --- the template store and site, and the main loop ----------------------------------------------------------


def make_template(root: Path, bin_: Path) -> tuple[Path, list[str], Path]:
    t = root / "template"
    t.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPORTGEN_")}
    env.update({"HOME": str(root / "home"), "MPLBACKEND": "Agg"})
    rg = str(bin_ / "reportgen")
    for label in ("one", "two"):
        subprocess.run([rg, "profile", *TINY, "--store", "results", "--quiet", "--label", label, "--machine", "box"],
                       cwd=t, env=env, check=True, capture_output=True)
    subprocess.run([rg, "import", str(ROOT / "tests" / "data" / "traces" / "cpu_only.trace.json.gz"), "--store",
                    "results"], cwd=t, env=env, check=True, capture_output=True)
    subprocess.run([rg, "build", "--runs", "results", "--out", "site"], cwd=t, env=env, check=True, capture_output=True)
    runs = sorted(p.name for p in (t / "results").iterdir() if (p / "run.json").is_file())
    big = root / "import-trace.json.gz"  # for import kills: big enough to be caught in each stage
    rnd = random.Random(0)
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{rnd.randrange(50)}", "pid": 1, "tid": 1, "ts": i * 3,
               "dur": 2, "args": {"Input Dims": [[4, 8]]}} for i in range(19000)]
    big.write_bytes(gzip.compress(json.dumps({"schemaVersion": 1, "traceEvents": events}).encode(), 6))
    return t, runs, big


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "adversarial.json")
    ap.add_argument("--only", default="", help="run only cases whose id contains this text")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--no-kills", action="store_true")
    ap.add_argument("--merge", type=Path, nargs="+", help="write --out from these parts (results files or logs)")
    ap.add_argument("--part-note", action="append", default=[], help="a note per --merge part, in order")
    ap.add_argument("--rerun", type=Path, nargs="*", default=None,
                    help="with --merge: results files of cases run again after fixes (counted beside, not instead)")
    args = ap.parse_args()
    if args.merge:
        merge(args.merge, args.out, args.part_note, args.rerun)
        return 0
    random.seed(0)
    args.commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,  # the wheel's
                                 text=True).stdout.strip()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped pass still removes its folder
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="rg-adversarial-"))
    servers = Servers()
    try:
        (root / "home").mkdir()
        bin_, note = install(root)
        print(note, flush=True)
        template, runs, big = make_template(root, bin_)
        remote, _src = make_remote(root)
        shared: dict[str, Any] = {"bin": bin_, "servers": servers, "remote": remote, "template_runs": runs,
                                  "import_trace": big, "action_sh": bin_.parent / "action.sh"}
        purelib = Path(subprocess.run([str(bin_ / "python"), "-c", "import reportgen.ci, sys; print(reportgen.ci.ACTION_SCRIPT)"],
                                      check=True, capture_output=True, text=True).stdout.strip())
        shared["action_sh"] = purelib  # the installed wheel's copy of the script
        cases = [*name_cases(), *number_cases(), *path_cases(), *init_publish_cases(), *config_cases(),
                 *bundle_cases(), *trace_cases(), *action_cases(), *comment_cases()]
        other = servers.other_url
        host_port = other.split("//")[1]
        results: list[dict[str, Any]] = []
        ids = [c.id for c in cases]
        assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
        for n, case in enumerate(c for c in cases if args.only in c.id):
            if case.behave is not None:
                inner = case.behave

                def behave(m: str, p: str, inner: Callable[..., Any] = inner) -> tuple[int, dict[str, str], bytes, float]:
                    code, headers, body, delay = inner(m, p)
                    loc = headers.get("Location")
                    if loc:
                        loc = (loc.replace("OTHERLOCALHOST", other.replace("127.0.0.1", "localhost"))
                               .replace("OTHERHOSTPORT", host_port).replace("OTHER", other))
                        headers = {**headers, "Location": loc}
                    return code, headers, body, delay
                case.behave = behave
            w = root / "cases" / f"{n:04d}"
            shutil.copytree(template, w, symlinks=True)
            ctx = Ctx(w, root / "marks" / f"m{n}", root, shared)
            (root / "marks").mkdir(exist_ok=True)
            res = run_case(case, ctx)
            results.append(res)
            shown = "" if res["verdict"] in ("clean_refusal", "accepted") and not res["flags"] else \
                f" | {res['stderr_tail'][-200:]!r}"
            print(f"{n:4d} {res['verdict']:28s} {','.join(res['flags']):20s} rc={res['rc']} {res['seconds']:6.1f}s "
                  f"{case.id}{shown}", flush=True)
            remove_tree(w)
        kills = [] if args.no_kills else [k for k in kill_cases() if args.only in k.id]
        kill_results = []
        for n, k in enumerate(kills):
            w = root / "kills" / f"{n:04d}"
            shutil.copytree(template, w, symlinks=True)
            res = run_kill(k, Ctx(w, root / "marks" / f"k{n}", root, shared))
            kill_results.append(res)
            print(f"K{n:3d} {res['verdict']:12s} fired={res['fired']} rc={res['rc']} {k.id} ({k.trigger}) "
                  f"{res['problems']}", flush=True)
            remove_tree(w)
        report(args, note, results, kill_results, time.monotonic() - started)
    finally:
        servers.close()
        if args.keep:
            print(f"kept {root}")
        else:
            remove_tree(root)
    return 0


def summarise(results: list[dict[str, Any]], kills: list[dict[str, Any]]) -> dict[str, Any]:
    verdicts = Counter(r["verdict"] for r in results)
    flags = Counter(f for r in results for f in r["flags"])
    kill_problems = Counter(p.split(":")[0] for k in kills for p in k["problems"])
    return {
        "clean_refusals": verdicts["clean_refusal"], "accepted": verdicts["accepted"],
        "exit_70": verdicts["exit_70"] + kill_problems["exit_70"],
        "tracebacks": verdicts["traceback"] + kill_problems["traceback"],
        "hangs": verdicts["hang"] + kill_problems["hang"], "payloads_run": flags["payload_run"],
        "tokens_leaked": flags["token_leaked"], "runs_lost": kill_problems["runs_lost"],
        "unclean_refusals": verdicts["unclean_refusal"],
        "accepted_but_should_refuse": verdicts["accepted_but_should_refuse"],
        "refused_but_should_accept": verdicts["refused_but_should_accept"],
        "changed_on_refusal": flags["changed_on_refusal"],
        "kills": len(kills), "kills_fired": sum(k["fired"] for k in kills),
        "kills_clean": sum(not k["problems"] for k in kills), "kill_problems": dict(kill_problems),
    }


def document(results: list[dict[str, Any]], kills: list[dict[str, Any]], parts: list[dict[str, Any]]) -> dict[str, Any]:
    counts = summarise(results, kills)
    return {
        "what": "adversarial pass of issue 35 after the fixes: hostile inputs and kills against a wheel install",
        "command": "/work/main/.venv/bin/python benchmarks/adversarial.py",
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": {"machine": platform.machine(), "cpus": os.cpu_count(), "load_average_end": os.getloadavg()},
        "software": {"python": platform.python_version(), "platform": platform.platform()},
        "parts": parts, "seed": 0, "cases": len(results), "counts": counts,
        "by_group": {g: dict(Counter(r["verdict"] for r in results if r["group"] == g))
                     for g in sorted({r["group"] for r in results})},
        "not_clean": [r for r in results if r["verdict"] not in ("clean_refusal", "accepted") or r["flags"]],
        "kills": kills,
        "all_cases": [[r["id"], r["verdict"], ",".join(r["flags"]), r["rc"], r["seconds"]] for r in results],
    }


def report(args: argparse.Namespace, note: str, results: list[dict[str, Any]], kills: list[dict[str, Any]],
           seconds: float) -> None:
    part = {"command": " ".join(["/work/main/.venv/bin/python benchmarks/adversarial.py", *sys.argv[1:]]),
            "install": note, "seconds": round(seconds, 1), "commit": args.commit}
    doc = document(results, kills, [part])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=True) + "\n")
    print(json.dumps(doc["counts"], indent=1))
    print(f"{len(results)} cases, {len(kills)} kills in {seconds:.0f} s; written {args.out}")


LOG_LINE = re.compile(r"^\s*(\d+) (\S+) +(?:(\S+) +)?rc=(\S+) +([\d.]+)s (\S+)(?: \| (.*))?$")


def merge(paths: list[Path], out: Path, part_notes: list[str], reruns: list[Path] | None = None) -> None:
    """One results file from parts run apart (e.g. the cases and the kills at once, on a deadline): each part is
    a results file of this script, or its printed log (a case's argv and env then come from its definition)."""
    defs = {c.id: c for c in [*name_cases(), *number_cases(), *path_cases(), *init_publish_cases(), *config_cases(),
                              *bundle_cases(), *trace_cases(), *action_cases(), *comment_cases()]}
    results: list[dict[str, Any]] = []
    kills: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for path, note in zip(paths, (part_notes + [""] * len(paths))[:len(paths)], strict=True):
        if path.suffix == ".json":
            doc = json.loads(path.read_text())
            kills += doc["kills"]
            detail = {r["id"]: r for r in doc["not_clean"]}
            for cid, verdict, flags, rc, secs in doc.get("all_cases", []):
                results.append(detail.get(cid) or {"id": cid, "group": defs[cid].group, "verdict": verdict,
                                                   "flags": [f for f in flags.split(",") if f], "rc": rc, "seconds": secs})
            old = [{"command": doc.get("command"), "seconds": doc.get("seconds"), **doc.get("software", {})}]
            parts += [{**p, "note": note} for p in doc.get("parts", old)]
            continue
        for line in path.read_text().splitlines():
            m = LOG_LINE.match(line)
            if not m or m.group(6) not in defs:
                continue
            case = defs[m.group(6)]
            rc = None if m.group(4) == "None" else int(m.group(4))
            r = {"id": case.id, "group": case.group, "verdict": m.group(2),
                 "flags": [f for f in (m.group(3) or "").split(",") if f], "rc": rc, "seconds": float(m.group(5))}
            if r["verdict"] not in ("clean_refusal", "accepted") or r["flags"]:
                r.update({"stderr_tail": m.group(7) or "", "argv": [repr(a) for a in case.argv][:12],
                          "env": {k: repr(v)[:200] for k, v in case.env.items()}})
            results.append(r)
        parts.append({"log": path.name, "note": note})
    doc = document(results, kills, parts)
    if reruns:  # the same cases run again after fixes: the counts as first run are kept, these beside them
        again: dict[str, dict[str, Any]] = {}
        for path in reruns:
            rdoc = json.loads(path.read_text())
            detail = {r["id"]: r for r in rdoc["not_clean"]}
            for cid, verdict, flags, rc, secs in rdoc["all_cases"]:
                again[cid] = detail.get(cid) or {"id": cid, "group": defs[cid].group, "verdict": verdict,
                                                 "flags": [f for f in flags.split(",") if f], "rc": rc, "seconds": secs}
            doc["parts"] += [{**p, "note": "rerun after the fixes"} for p in rdoc["parts"]]
        fixed = [again.get(r["id"], r) for r in results]
        doc["after_fixes"] = {"rerun_cases": sorted(again), "counts": summarise(fixed, kills),
                              "rerun_results": [again[c] for c in sorted(again)]}
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=True) + "\n")
    print(json.dumps(doc["counts"], indent=1))


if __name__ == "__main__":
    sys.exit(main())
