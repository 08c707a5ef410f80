"""Post or update the one reportgen comment on a pull request (found by its hidden marker).

``python -m reportgen.ci.comment --pr N --body FILE`` with ``GITHUB_TOKEN``, ``GITHUB_REPOSITORY`` and
``GITHUB_API_URL`` (GitHub sets the last two; tests point it at a local server). Standard library only.
Exit 0 when the comment was created or updated; 3 with one line on stderr when it was not (no token, an
unreachable or unsafe API URL, a redirect to another origin, an answer that is not what GitHub sends).
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
from pathlib import Path
from typing import Any, NoReturn

from reportgen.ci.github import GitHub, comment_id, expect_list, expect_object_with_id
from reportgen.compare.report import MARKER
from reportgen.errors import ExitCode, ReportgenError
from reportgen.store.files import NotRegularFile, read_regular
from reportgen.text.terminal import terminal_safe

__all__ = ["GitHub", "find_own_comment", "main", "post_or_update"]

PER_PAGE = 100
MAX_PAGES = 50
PREFIX = "reportgen-action:"


def comments(gh: GitHub, pr: int) -> list[tuple[dict[str, Any], int | None]]:
    """Every comment of pull request ``pr`` with, for each marked bot comment, its id (checked)."""
    out: list[tuple[dict[str, Any], int | None]] = []
    for page in range(1, MAX_PAGES + 1):
        answer = gh.call("GET", f"/issues/{pr}/comments?per_page={PER_PAGE}&page={page}")
        batch = expect_list(answer, "comment objects")
        out.extend((c, comment_id(answer, c) if _is_own(c) else None) for c in batch)
        if len(batch) < PER_PAGE:
            break
    return out


def _is_own(comment: dict[str, Any]) -> bool:
    user, body = comment.get("user"), comment.get("body")
    return isinstance(user, dict) and user.get("type") == "Bot" and isinstance(body, str) and MARKER in body


def find_own_comment(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The bot comment that carries the marker (the first one, if several)."""
    return next((c for c in found if _is_own(c)), None)


def post_or_update(gh: GitHub, pr: int, body: str) -> str:
    """Update the marked comment, or create it; returns "updated" or "created"."""
    mine = next((cid for _c, cid in comments(gh, pr) if cid is not None), None)
    if mine is not None:
        expect_object_with_id(gh.call("PATCH", f"/issues/comments/{mine}", {"body": body}))
        return "updated"
    expect_object_with_id(gh.call("POST", f"/issues/{pr}/comments", {"body": body}))
    return "created"


def _read_body(path: Path) -> str:
    try:
        return read_regular(path).decode("utf-8")  # a FIFO or device is refused, never waited on
    except NotRegularFile as exc:
        raise ReportgenError(f"{terminal_safe(str(exc))}; the comment body must be a UTF-8 file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportgenError(f"{path}: the comment body cannot be read ({type(exc).__name__}); "
                             "it must be a UTF-8 file") from None


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line (exit 2), like every other refusal of the action."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{PREFIX} {terminal_safe(message)}; usage: {self.prog} --pr N --body FILE\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m reportgen.ci.comment")
    parser.add_argument("--pr", type=int, required=True)
    parser.add_argument("--body", type=Path, required=True)
    args = parser.parse_args(argv)
    token, repo = os.environ.get("GITHUB_TOKEN", ""), os.environ.get("GITHUB_REPOSITORY", "")
    if not token or not repo:
        print(f"{PREFIX} GITHUB_TOKEN or GITHUB_REPOSITORY is not set; the comment was not posted", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.pr <= 0:
        print(f"{PREFIX} --pr {args.pr}: not a pull-request number; the comment was not posted", file=sys.stderr)
        return ExitCode.USAGE
    try:
        gh = GitHub(os.environ.get("GITHUB_API_URL", "https://api.github.com"), repo, token)
        what = post_or_update(gh, args.pr, _read_body(args.body))
    except ReportgenError as exc:
        print(f"{PREFIX} {terminal_safe(exc.message)}; the comment was not posted", file=sys.stderr)
        return exc.exit_code
    except (urllib.error.URLError, OSError) as exc:
        reason = terminal_safe(getattr(exc, "reason", None) or exc)
        print(f"{PREFIX} the comment could not be posted ({reason}); check GITHUB_API_URL and the token's "
              "pull-requests: write permission", file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(f"{PREFIX} {what} the comment on pull request #{args.pr}", file=sys.stderr)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
