"""The PR-comment poster against real local HTTP servers: the token never leaves the API's origin, and any
answer that is not what GitHub sends is one line (exit 3), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import ROOT

from reportgen.compare.report import MARKER

TOKEN = "ghs_secret_token_value"
Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Server:
    """A real HTTP server on 127.0.0.1 answering with ``answer``; every request's method, path and headers kept."""

    answer: Callable[[str, str], Reply]
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[str, str], Reply]], Server]]:
    started: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[str, str], Reply]) -> Server:
        server = Server(answer)

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                server.seen.append((self.command, self.path, dict(self.headers)))
                code, headers, body = server.answer(self.command, self.path)
                self.send_response(code)
                for k, v in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = _any  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        started.append(httpd)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        return server

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def json_reply(value: object, code: int = 200) -> Reply:
    return code, {"Content-Type": "application/json"}, json.dumps(value).encode()


def github(method: str, path: str) -> Reply:
    """A well-behaved API: no comments yet, the POST creates one."""
    return json_reply([]) if method == "GET" else json_reply({"id": 9, "body": "x"}, 201)


def post_comment(tmp_path: Path, api_url: str, token: str = TOKEN, pr: str = "7") -> subprocess.CompletedProcess[str]:
    """``python -m reportgen.ci.comment`` as the action runs it."""
    body = tmp_path / "comment.md"
    body.write_text(f"{MARKER}\nhello\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update({"GITHUB_TOKEN": token, "GITHUB_REPOSITORY": "o/r", "GITHUB_API_URL": api_url,
                "PYTHONPATH": str(ROOT), "HTTP_PROXY": "", "http_proxy": ""})
    return subprocess.run([sys.executable, "-m", "reportgen.ci.comment", "--pr", pr, "--body", str(body)],
                          capture_output=True, text=True, env=env, timeout=60)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_comment_token_never_leaves_api_origin(tmp_path: Path, serve: Callable[..., Server], code: int) -> None:
    """An API that redirects to another origin (another port on the same host): refused, naming the target's
    origin; the other server never sees a request, so never the token."""
    other = serve(github)
    api = serve(lambda m, p: (code, {"Location": f"{other.url}{p}"}, b""))
    proc = post_comment(tmp_path, api.url)
    assert not any(TOKEN in str(headers) for _m, _p, headers in other.seen)
    assert proc.returncode == 3
    line = one_line(proc)
    assert f"was redirected to another origin ({other.url})" in line and "comment was not posted" in line
    assert TOKEN not in line
    assert other.seen == [] and len(api.seen) == 1
    assert api.seen[0][2]["Authorization"] == f"Bearer {TOKEN}"


def test_comment_follows_a_same_origin_redirect_with_the_token(tmp_path: Path, serve: Callable[..., Server]) -> None:
    """A redirect within the API's origin (GitHub's moved repository) is repeated verbatim, token included."""
    def answer(method: str, path: str) -> Reply:
        if path.startswith("/repos/o/r/"):
            return 307, {"Location": path.replace("/repos/o/r/", "/repositories/42/")}, b""
        return github(method, path)

    api = serve(answer)
    proc = post_comment(tmp_path, api.url)
    assert proc.returncode == 0, proc.stderr
    assert [(m, p.split("?")[0]) for m, p, _h in api.seen] == [
        ("GET", "/repos/o/r/issues/7/comments"), ("GET", "/repositories/42/issues/7/comments"),
        ("POST", "/repos/o/r/issues/7/comments"), ("POST", "/repositories/42/issues/7/comments")]
    assert all(h["Authorization"] == f"Bearer {TOKEN}" for _m, _p, h in api.seen)


@pytest.mark.parametrize("url", ["http://example.invalid", "ftp://127.0.0.1/", "file:///etc/passwd",
                                 "http://127.0.0.1.example.invalid/", "api.github.com", "http://[::1"])
def test_comment_token_goes_only_over_https_or_to_this_machine(tmp_path: Path, url: str) -> None:
    proc = post_comment(tmp_path, url)
    assert proc.returncode == 3
    line = one_line(proc)
    assert "GITHUB_API_URL" in line and "comment was not posted" in line and TOKEN not in line


HOSTILE_ANSWERS = {
    "html": (200, {"Content-Type": "text/html"}, b"<html><body>\x1b[31mSign in\x07</body></html>" + b"x" * 500),
    "list of strings": json_reply(["a", "b"]),
    "object": json_reply({"message": "Not Found"}),
    "marked comment without id": json_reply([{"body": MARKER, "user": {"type": "Bot"}}]),
    "marked comment with a string id": json_reply([{"id": "1; rm", "body": MARKER, "user": {"type": "Bot"}}]),
    "user a string": json_reply([{"id": 3, "body": MARKER, "user": "Bot"}]),
    "deep nesting": (200, {}, b"[" * 200_000 + b"]" * 200_000),
    "not utf-8": (200, {}, b"\xff\xfe[1]"),
    "error page": (500, {"Content-Type": "text/html"}, b"<h1>oops</h1>"),
}


@pytest.mark.parametrize("shape", list(HOSTILE_ANSWERS))
def test_comment_unexpected_api_answer_is_one_line(tmp_path: Path, serve: Callable[..., Server], shape: str) -> None:
    api = serve(lambda m, p: HOSTILE_ANSWERS[shape])
    proc = post_comment(tmp_path, api.url)
    assert proc.returncode == 3
    line = one_line(proc)
    assert line.startswith("reportgen-action: GitHub API: ") and "/issues/7/comments" in line
    assert "\x1b" not in line and "\x07" not in line and len(line) < 600


@pytest.mark.parametrize("answer", [json_reply({"body": "no id"}, 201), json_reply(["x"], 201), (201, {}, b"<p>")])
def test_comment_created_answer_must_be_a_comment(tmp_path: Path, serve: Callable[..., Server],
                                                  answer: Reply) -> None:
    api = serve(lambda m, p: json_reply([]) if m == "GET" else answer)
    proc = post_comment(tmp_path, api.url)
    assert proc.returncode == 3
    assert "POST /issues/7/comments answered" in one_line(proc)


@pytest.mark.parametrize(("token", "pr", "expected"), [(TOKEN + "\n", "7", "GITHUB_TOKEN: not a token"),
                                                     ("a b", "7", "GITHUB_TOKEN: not a token"),
                                                     (TOKEN, "0", "--pr 0: not a pull-request number"),
                                                     (TOKEN, "-3", "--pr -3: not a pull-request number"),
                                                     (TOKEN, "1e3", "argument --pr: invalid int value: '1e3'")])
def test_comment_bad_token_or_pr_is_one_line_without_the_token(tmp_path: Path, serve: Callable[..., Server],
                                                              token: str, pr: str, expected: str) -> None:
    api = serve(github)
    proc = post_comment(tmp_path, api.url, token=token, pr=pr)
    assert proc.returncode in (2, 3)
    line = one_line(proc)
    assert expected in line and token.strip() not in line and api.seen == []


def test_comment_answer_trickling_for_ever_is_cut_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """An API that sends its answer a byte at a time, never finishing (each single read returns in time, so the
    socket's timeout never fires): refused when the whole answer is not in by the deadline, not waited on."""
    from reportgen.ci import github as github_module
    from reportgen.ci.comment import GitHub, post_or_update
    from reportgen.errors import ApiError

    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(10**9))
            self.end_headers()
            self.wfile.write(b"[")
            while not stop.wait(0.02):  # the hostile server's pace, not a synchronisation
                self.wfile.write(b" ")
                self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setattr(github_module, "ANSWER_SECONDS", 1.0)
    try:
        gh = GitHub(f"http://127.0.0.1:{httpd.server_address[1]}", "o/r", TOKEN)
        with pytest.raises(ApiError, match=r"GitHub API: an answer was still arriving after 1 s; check GITHUB_API_URL"):
            post_or_update(gh, 7, "body")
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()


def test_comment_body_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, serve: Callable[..., Server]) -> None:
    """`--body` naming a FIFO (nothing ever writes to it): one line naming it, exit 3, no request sent."""
    api = serve(github)
    fifo = tmp_path / "body.fifo"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update({"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "o/r", "GITHUB_API_URL": api.url, "PYTHONPATH": str(ROOT)})
    proc = subprocess.run([sys.executable, "-m", "reportgen.ci.comment", "--pr", "7", "--body", str(fifo)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 3
    line = one_line(proc)
    assert f"{fifo}: is a FIFO, not a regular file; the comment body must be a UTF-8 file" in line
    assert api.seen == []
