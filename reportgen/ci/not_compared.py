"""The PR comment's line for a scenario ``reportgen ab`` could not compare, written by the action's script.

``python -m reportgen.ci.not_compared NAME EXIT_CODE`` prints it. The name comes from the pull request's
checkout (a scenario file's name), so it is data: the template (``templates/ab_not_compared.md.j2``) md-escapes
it into inert Markdown, and a name such
as ``-[click](https:evil.example)`` or ``-@octocat`` shows as written, never as a link or a mention.
"""

from __future__ import annotations

import sys

from reportgen.render.jinja import render_md


def not_compared_line(scenario: str, exit_code: int) -> str:
    """``**name**: not compared (reportgen ab exit N; see the job log).``, the name escaped."""
    return render_md("ab_not_compared.md.j2", scenario=scenario, exit_code=exit_code).rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("reportgen-action: usage: python -m reportgen.ci.not_compared NAME EXIT_CODE", file=sys.stderr)
        return 2
    print(not_compared_line(args[0], int(args[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
