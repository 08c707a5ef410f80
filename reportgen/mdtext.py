"""Escaping of data for Markdown (GFM): table cells, inline text. Used as Jinja filters.

Every ASCII punctuation character that can start Markdown syntax is backslash-escaped
(CommonMark allows escaping any ASCII punctuation), newlines become spaces so a table row
stays one row, and ``@`` is followed by a zero-width joiner-free WORD JOINER (U+2060) so
GitHub does not turn ``@name`` into a mention. The visible characters are unchanged.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&\"'=:$%^;/?,])")
_WORD_JOINER = "\u2060"


def md_escape(text: object) -> str:
    """``text`` made inert in GFM inline context and in a table cell."""
    s = str(text)
    s = s.replace("\r\n", " ").replace("\r", " ").replace("\n", " ").replace("\x00", "\ufffd")
    s = _SPECIAL.sub(r"\\\1", s)
    return s.replace("@", "@" + _WORD_JOINER)
