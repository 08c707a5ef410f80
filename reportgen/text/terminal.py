"""Text from data made safe to print on a terminal: control characters shown, never executed.

Labels, variant names, JSON keys and file names come from bundles anyone can write. Printed raw,
an ESC starts a terminal escape sequence (recolour, retitle, hide the rest of the line, OSC 8
links), BEL rings, CR overwrites the line, and a bidi override reorders what follows. Every
``print`` of data, and every error message, goes through ``terminal_safe``.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0 and C1 controls, DEL (C1 includes CSI \x9b and the line break \x85)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides and isolates
    "\u2028\u2029]"  # line and paragraph separators
)
_UNSAFE_KEEPING_LINES = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "\x00-\x09\x0b-\x1f"))


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character, bidi override and line separator as a visible escape (``\\x1b``).

    ``keep_newlines`` leaves ``\\n`` alone, for printing a whole document (a Markdown comment).
    """
    pattern = _UNSAFE_KEEPING_LINES if keep_newlines else _UNSAFE
    return pattern.sub(_visible, str(text))


def printable(text: str) -> str:
    """``text`` as one cell of a terminal line: every non-printable character (controls, tabs, line breaks, bidi and
    other format characters, separators) becomes U+FFFD, so a tab-separated listing keeps its columns."""
    return "".join(c if c.isprintable() or c == " " else "\ufffd" for c in text)


def json_safe_escapes(text: str) -> str:
    """A JSON document with C1 controls, bidi overrides and separators written as ``\\uXXXX`` (same value)."""
    return _UNSAFE_KEEPING_LINES.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
