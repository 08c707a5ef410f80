"""Escaping of data for Markdown (GFM): table cells, inline text, headings, and raw HTML blocks.

Every string from data is first flattened: each line break CommonMark, HTML or Unicode knows
(``\\r``, ``\\n``, ``\\v``, ``\\f``, U+0085, U+2028, U+2029, and the other C0/C1 controls) becomes a
space or a visible escape, so it can end no table row, heading or HTML block (a blank line,
even ``\\r\\r``, ends a ``<details>`` block and turns what follows into live Markdown).
Then every ASCII punctuation character that can start Markdown syntax is backslash-escaped
(CommonMark allows escaping any ASCII punctuation), and ``@`` is followed by a WORD JOINER
(U+2060) so GitHub does not turn ``@name`` into a mention. The visible characters are unchanged.
"""

from __future__ import annotations

import html
import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&\"'=:$%^;/?,])")
_WORD_JOINER = "\u2060"
_LINE_BREAKS = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
CLIP_CHARS = 120
"""Strings from data are cut to this many characters where a line must stay short (the PR comment)."""


def flatten(text: object) -> str:
    """``text`` on one line: line breaks become spaces, other controls visible escapes (``\\x1b``), tabs spaces."""
    s = _LINE_BREAKS.sub(" ", str(text)).replace("\t", " ")
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def md_escape(text: object) -> str:
    """``text`` made inert in GFM inline context, a heading and a table cell."""
    s = _SPECIAL.sub(r"\\\1", flatten(text))
    return s.replace("@", "@" + _WORD_JOINER)


def html_inline(text: object) -> str:
    """``text`` for raw HTML inside Markdown (``<summary>``): flattened, HTML-escaped, with no live @mention.

    Inside an HTML block GFM does not parse Markdown, so HTML escaping is what makes it inert; the
    flattening keeps the block from ending early.
    """
    return html.escape(flatten(text)).replace("@", "@" + _WORD_JOINER)


def clip(text: object, n: int = CLIP_CHARS) -> str:
    """``text`` cut to ``n`` characters with an ellipsis."""
    s = str(text)
    return s if len(s) <= n else s[: n - 1] + "\u2026"
