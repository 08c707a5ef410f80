"""Rendering a ``Comparison``: the PR comment (Markdown, shrunk to fit), its JSON twin, and the terminal notes."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reportgen import __version__
from reportgen.compare.diff import show_value
from reportgen.compare.model import Comparison, Outcome, Pairing, Verdict
from reportgen.errors import UsageError
from reportgen.model.codec import to_jsonable
from reportgen.render.jinja import md_env
from reportgen.text.formatting import url_absolute
from reportgen.text.markdown import clip
from reportgen.text.terminal import json_safe_escapes, terminal_safe

COMPARE_SCHEMA_VERSION = 1
"""Version of the ``--format json`` document."""

MARKER = "<!-- reportgen-compare -->"
"""Hidden line in every comment so CI can find and update its one comment."""

GITHUB_COMMENT_LIMIT = 65_536
MAX_COMMENT_CHARS = GITHUB_COMMENT_LIMIT - 1_536
"""What the comment must fit in, counted in UTF-16 code units (as GitHub's limit is), with margin."""

MAX_LISTED = 25
"""The most ops the comment lists per list (added, removed, calls changed); JSON lists all."""

MAX_NAMED_IN_VERDICT = 3

TEMPLATE = "compare.md.j2"


def comment_length(text: str) -> int:
    """Length as GitHub counts it (UTF-16 code units), never less than the number of characters."""
    return len(text.encode("utf-16-le")) // 2


def valid_site_url(site_url: str) -> bool:
    """True for an absolute http(s) URL with a host."""
    parts = urllib.parse.urlsplit(site_url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def run_page_url(site_url: str, run_id: str) -> str:
    """The permanent page of ``run_id`` under the site root ``site_url``, percent-encoded for Markdown."""
    if not valid_site_url(site_url):
        raise UsageError(f"site_url {clip(site_url, 60)!r}: expected an http(s) URL such as https://user.github.io/repo/")
    root = url_absolute(site_url.rstrip("/"))
    return f"{root}/runs/{urllib.parse.quote(run_id, safe='')}/"


@dataclass(frozen=True)
class _Cut:
    """How much of the detail the comment keeps: variant rows and op-diff sections."""

    rows: int
    sections: int
    shapes: int = 0


def render_markdown(comparison: Comparison, site_url: str | None = None,
                    limit_chars: int = MAX_COMMENT_CHARS) -> str:
    """The PR comment, shrunk to ``limit_chars``: op-diff sections go first, then per-shape rows, then variant rows;
    never the verdict."""
    template = md_env().get_template(TEMPLATE)
    links = _links(comparison, site_url)

    def render(cut: _Cut) -> str:
        return template.render(c=comparison, links=links, rows=comparison.variants[: cut.rows],
                               omitted_rows=len(comparison.variants) - cut.rows,
                               memory_rows=comparison.memory[: cut.rows],
                               sections=comparison.op_diffs[: cut.sections],
                               omitted_sections=len(comparison.op_diffs) - cut.sections,
                               shapes=comparison.shapes[: cut.shapes],
                               omitted_shapes=len(comparison.shapes) - cut.shapes,
                               marker=MARKER, version=__version__, max_listed=MAX_LISTED,
                               max_named=MAX_NAMED_IN_VERDICT, Outcome=Outcome, Verdict=Verdict,
                               Pairing=Pairing)

    def fits(cut: _Cut) -> bool:
        return comment_length(render(cut)) <= limit_chars

    n_rows, n_sections, n_shapes = len(comparison.variants), len(comparison.op_diffs), len(comparison.shapes)
    rows = _largest(lambda k: fits(_Cut(k, 0)), n_rows)
    shapes = _largest(lambda k: fits(_Cut(rows, 0, k)), n_shapes) if rows == n_rows else 0
    sections = _largest(lambda k: fits(_Cut(rows, k, shapes)), n_sections) if shapes == n_shapes else 0
    return render(_Cut(rows, sections, shapes))


def _largest(ok: Callable[[int], bool], upper: int) -> int:
    """The largest k in [0, upper] with ok(k), for ok true up to some k and false after (ok(0) assumed).

    Gallops up from 1 before bisecting, so the cost follows the size of the answer, not of ``upper``.
    """
    lo, step = 0, 1
    while lo < upper and ok(min(lo + step, upper)):
        lo = min(lo + step, upper)
        step *= 2
    hi = min(lo + step, upper) - 1 if lo < upper else upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _links(comparison: Comparison, site_url: str | None) -> dict[str, str] | None:
    if not site_url:
        return None
    return {"base": run_page_url(site_url, comparison.base.run_id),
            "head": run_page_url(site_url, comparison.head.run_id)}


def comparison_json(comparison: Comparison, site_url: str | None = None) -> str:
    """The same content as data: the full comparison (nothing truncated), versioned."""
    doc: dict[str, Any] = {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "kind": "reportgen-compare",
        "reportgen_version": __version__,
        "verdict": comparison.verdict.value,
        "regressions": [v.name for v in comparison.regressions],
        "memory_regressions": [m.name for m in comparison.memory_regressions],
        "improvements": [v.name for v in comparison.improvements],
        "links": _links(comparison, site_url),
        **to_jsonable(comparison),
    }
    text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"
    return json_safe_escapes(text)  # no raw C1 control or bidi override, in a file or on a terminal


def terminal_notes(comparison: Comparison) -> tuple[str, ...]:
    """The lines ``compare`` writes to standard error: each environment difference, and the drift note when the
    drift between runs left a change inconclusive (escaped for a terminal)."""
    lines = [f"reportgen: warning: environment.{w.field} differs: {show_value(w.base)} (base) "
             f"vs {show_value(w.head)} (head)" for w in comparison.warnings]
    if comparison.drift_unknown:
        lines.append(f"reportgen: note: {comparison.drift_note}")
    return tuple(terminal_safe(line) for line in lines)
