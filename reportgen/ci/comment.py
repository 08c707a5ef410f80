"""Post or update the one reportgen comment on a pull request (found by its hidden marker).

``python -m reportgen.ci.comment --pr N --body FILE`` with ``GITHUB_TOKEN``, ``GITHUB_REPOSITORY`` and
``GITHUB_API_URL`` (GitHub sets the last two; tests point it at a local server). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from reportgen.compare.report import MARKER

PER_PAGE = 100
MAX_PAGES = 50


class GitHub:
    """The few REST calls the comment needs."""

    def __init__(self, api_url: str, repository: str, token: str) -> None:
        self.base = f"{api_url.rstrip('/')}/repos/{repository}"
        self.token = token

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")

    def comments(self, pr: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for page in range(1, MAX_PAGES + 1):
            batch = self.request("GET", f"/issues/{pr}/comments?per_page={PER_PAGE}&page={page}")
            out.extend(batch)
            if len(batch) < PER_PAGE:
                break
        return out


def find_own_comment(comments: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The bot comment that carries the marker (the first one, if several)."""
    return next((c for c in comments if (c.get("user") or {}).get("type") == "Bot"
                 and MARKER in (c.get("body") or "")), None)


def post_or_update(gh: GitHub, pr: int, body: str) -> str:
    """Update the marked comment, or create it; returns "updated" or "created"."""
    mine = find_own_comment(gh.comments(pr))
    if mine is not None:
        gh.request("PATCH", f"/issues/comments/{mine['id']}", {"body": body})
        return "updated"
    gh.request("POST", f"/issues/{pr}/comments", {"body": body})
    return "created"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reportgen.ci.comment")
    parser.add_argument("--pr", type=int, required=True)
    parser.add_argument("--body", type=Path, required=True)
    args = parser.parse_args(argv)
    token, repo = os.environ.get("GITHUB_TOKEN", ""), os.environ.get("GITHUB_REPOSITORY", "")
    if not token or not repo:
        print("reportgen-action: GITHUB_TOKEN or GITHUB_REPOSITORY is not set; the comment was not posted",
              file=sys.stderr)
        return 3
    gh = GitHub(os.environ.get("GITHUB_API_URL", "https://api.github.com"), repo, token)
    try:
        what = post_or_update(gh, args.pr, args.body.read_text(encoding="utf-8"))
    except (urllib.error.URLError, OSError) as exc:
        print(f"reportgen-action: the comment could not be posted ({exc}); check the token's "
              "pull-requests: write permission", file=sys.stderr)
        return 3
    print(f"reportgen-action: {what} the comment on pull request #{args.pr}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
