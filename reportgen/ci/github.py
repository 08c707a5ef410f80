"""A small client for GitHub's REST API that never sends the token anywhere but the API's own origin.

The token goes only to the origin (scheme, host, port) of ``GITHUB_API_URL``: the URL must be
``https``, or ``http`` to this machine (``127.0.0.1``, ``localhost``, ``::1``: a test's stand-in,
reached without a proxy). Redirects are not followed by urllib: one to the same origin is repeated
verbatim (as GitHub asks of API clients), one to any other origin is refused, naming it. Every answer
is read with a size limit and must be JSON; what the caller needs of its shape is checked by
``expect_list`` / ``expect_object_with_id``, and anything else is an ``ApiError`` that quotes
(clipped, escaped) what the API returned. Standard library only.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reportgen.errors import ApiError
from reportgen.text.documents import Limits, load_json
from reportgen.text.markdown import clip
from reportgen.text.terminal import terminal_safe

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
MAX_ANSWER_BYTES = 16 * 1024 * 1024
ANSWER_SECONDS = 60.0  # one whole answer, however slowly it trickles in (the socket's timeout is per read)
READ_CHUNK = 64 * 1024
QUOTE_CHARS = 80
_REPOSITORY_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_DEFAULT_PORTS = {"https": 443, "http": 80}


def quoted(text: object) -> str:
    """``text`` clipped and escaped for one line of an error message."""
    return repr(terminal_safe(clip(str(text), QUOTE_CHARS)))


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``, lower-cased, with the scheme's default port filled in."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:  # a bad port or IPv6 literal
        raise ApiError(f"GitHub API: {quoted(url)} is not a valid URL; check GITHUB_API_URL") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    return scheme, host, port if port is not None else _DEFAULT_PORTS.get(scheme, 0)


def origin_text(url: str) -> str:
    """``scheme://host:port`` of ``url``, escaped, for a message."""
    scheme, host, port = origin(url)
    return terminal_safe(clip(f"{scheme}://{host}:{port}", QUOTE_CHARS))


def check_api_url(api_url: str) -> str:
    """``api_url`` without a trailing slash; refuse anything but https (or http to this machine)."""
    scheme, host, _port = origin(api_url)
    if not host or any(c in api_url for c in "\0\r\n\t "):
        raise ApiError(f"GITHUB_API_URL {quoted(api_url)}: not a URL; give the API's https URL, "
                       "e.g. https://api.github.com", field="GITHUB_API_URL")
    if scheme != "https" and not (scheme == "http" and host in LOOPBACK_HOSTS):
        raise ApiError(f"GITHUB_API_URL {quoted(api_url)}: the token is sent only over https (or http to "
                       "127.0.0.1/localhost); give the API's https URL, e.g. https://api.github.com",
                       field="GITHUB_API_URL")
    return api_url.rstrip("/")


def check_token(token: str) -> str:
    """The token, when it can be an HTTP header value (printable ASCII, no space); the message never shows it."""
    if not token or not all("!" <= c <= "~" for c in token):
        raise ApiError("GITHUB_TOKEN: not a token (empty, or holding spaces, line breaks or other characters a "
                       "token never has); pass the action's token input, e.g. ${{ github.token }}",
                       field="GITHUB_TOKEN")
    return token


def check_repository(repository: str) -> str:
    """``OWNER/NAME`` as GitHub sets ``GITHUB_REPOSITORY``; refuse anything that would change the request path."""
    if not _REPOSITORY_RE.match(repository) or ".." in repository:
        raise ApiError(f"GITHUB_REPOSITORY {quoted(repository)}: expected OWNER/NAME, e.g. octocat/hello-world",
                       field="GITHUB_REPOSITORY")
    return repository


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib follows no redirect (it would carry the Authorization header to any host): the 3xx comes back."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass(frozen=True)
class Answer:
    """One API answer: the request it answers (for messages), its status, its raw body and the parsed JSON."""

    what: str
    status: int
    raw: bytes
    data: Any

    def refuse(self, expected: str) -> ApiError:
        """The error for an answer that is not what the caller needs."""
        shown = quoted(self.raw.decode("utf-8", errors="replace"))
        return ApiError(f"GitHub API: {self.what} answered {shown} (HTTP {self.status}); expected {expected}; "
                        "check that GITHUB_API_URL is GitHub's REST API")


def expect_list(answer: Answer, of: str) -> list[dict[str, Any]]:
    """The answer as a list of JSON objects, or ApiError."""
    if not isinstance(answer.data, list) or not all(isinstance(x, dict) for x in answer.data):
        raise answer.refuse(f"a JSON list of {of}")
    return answer.data


def comment_id(answer: Answer, item: Mapping[str, Any]) -> int:
    """The positive integer ``id`` of ``item`` (a comment the answer holds), or ApiError."""
    cid = item.get("id")
    if isinstance(cid, bool) or not isinstance(cid, int) or cid <= 0:
        raise answer.refuse("comments with a positive integer id")
    return cid


def expect_object_with_id(answer: Answer) -> int:
    """The answer's own positive integer ``id`` (a created or updated comment), or ApiError."""
    if not isinstance(answer.data, dict):
        raise answer.refuse("a JSON object with an id")
    return comment_id(answer, answer.data)


class GitHub:
    """The REST calls the comment needs, sent with the token to the API's origin only."""

    def __init__(self, api_url: str, repository: str, token: str) -> None:
        self.api = check_api_url(api_url)
        self.base = f"{self.api}/repos/{check_repository(repository)}"
        self.token = check_token(token)
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if origin(self.api)[0] == "http":
            handlers.append(urllib.request.ProxyHandler({}))  # plain http to this machine: no proxy sees the token
        self._opener = urllib.request.build_opener(*handlers)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Answer:
        """Send one request; follow same-origin redirects; refuse others; parse the JSON answer."""
        url, data = f"{self.base}{path}", (json.dumps(body).encode() if body is not None else None)
        what = f"{method} {terminal_safe(clip(path, QUOTE_CHARS))}"
        for _hop in range(MAX_REDIRECTS + 1):
            status, location, raw = self._send(method, url, data)
            if status not in REDIRECT_CODES:
                break
            url = self._redirect_target(url, location, what)
        else:
            raise ApiError(f"GitHub API: {what} was redirected more than {MAX_REDIRECTS} times; "
                           "check GITHUB_API_URL")
        if status >= 400:
            raise ApiError(f"GitHub API: {what} failed with HTTP {status} "
                           f"({quoted(raw.decode('utf-8', errors='replace'))}); check the token's "
                           "pull-requests: write permission and GITHUB_REPOSITORY")
        return Answer(what, status, raw, _parse(what, status, raw))

    def _redirect_target(self, url: str, location: str | None, what: str) -> str:
        if not location:
            raise ApiError(f"GitHub API: {what} answered a redirect without a Location; check GITHUB_API_URL")
        target = urllib.parse.urljoin(url, location)
        if origin(target) != origin(self.api):
            raise ApiError(f"GitHub API: {what} was redirected to another origin ({origin_text(target)}); "
                           f"the token is sent only to {origin_text(self.api)}; "
                           "set GITHUB_API_URL to the API's final address")
        return target

    def _send(self, method: str, url: str, data: bytes | None) -> tuple[int, str | None, bytes]:
        """(status, Location header, body) of one request; a 3xx or 4xx/5xx answer is returned, not raised."""
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json"})
        deadline = time.monotonic() + ANSWER_SECONDS
        try:
            with self._opener.open(req, timeout=30) as resp:
                return resp.status, resp.headers.get("Location"), _read(resp, deadline)
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, exc.headers.get("Location"), (_read(exc, deadline) if exc.fp is not None else b"")
            finally:
                exc.close()
        except http.client.HTTPException as exc:  # not HTTP at all, or cut short
            raise ApiError(f"GitHub API: {method} {quoted(url)} got no valid HTTP answer "
                           f"({type(exc).__name__}); check GITHUB_API_URL") from None


def _read(stream: Any, deadline: float) -> bytes:
    """The answer's body, read in pieces as they arrive: refused when larger than MAX_ANSWER_BYTES or still
    arriving at ``deadline`` (an answer trickling a byte at a time never times out a single read)."""
    read = getattr(stream, "read1", None) or stream.read
    chunks: list[bytes] = []
    size = 0
    while chunk := read(READ_CHUNK):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ApiError(f"GitHub API: an answer is larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB; "
                           "check GITHUB_API_URL")
        if time.monotonic() > deadline:
            raise ApiError(f"GitHub API: an answer was still arriving after {ANSWER_SECONDS:g} s; "
                           "check GITHUB_API_URL")
    return b"".join(chunks)


def _parse(what: str, status: int, raw: bytes) -> Any:
    """The JSON value of ``raw`` (None when empty), read by the one document reader (size, depth, digits,
    UTF-8); ApiError naming what came back when it is not JSON."""
    if not raw.strip():
        return None
    source = f"GitHub API: {what} answered {quoted(raw.decode('utf-8', errors='replace'))} (HTTP {status})"
    return load_json(raw, source, Limits(MAX_ANSWER_BYTES), fix="check that GITHUB_API_URL is GitHub's REST API",
                     error=ApiError)
