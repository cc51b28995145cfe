"""Text that reaches the terminal from a file or an exception, made inert.

A model file, a rules module or an exception's message may hold terminal
control sequences (an ESC that sets the window title, erases the line and
prints a fake green "fired ...; wrote out.pt2"), a carriage return that
overwrites what was printed, or Unicode bidi overrides that reorder a path
on screen. :func:`printable` shows each such character visibly as a Python
escape (``\\x1b``, ``\\u202e``) instead; everything else passes unchanged.
It is applied where the command line writes to the terminal: the log
formatter (:mod:`.logs`: every message, warning and error), the tracebacks
of ``PYPM_TRACEBACK=1`` (:mod:`.app`), the result lines
(:func:`.output.say`), the rich tables and the status line
(:mod:`.output`, which also keeps rich from reading ``[...]`` in a name as
markup) and the usage errors (:mod:`.parsing`).
"""
from __future__ import annotations

import re

#: C0 controls (but tab and newline, see below), DEL, C1 controls, the
#: bidi marks, embeddings, overrides and isolates (U+061C, U+200E-200F,
#: U+202A-202E, U+2066-2069), the line and paragraph separators (U+2028-2029,
#: line breaks to some terminals) and lone surrogates (an undecodable file
#: name's bytes: they cannot be written as UTF-8)
_UNSAFE = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
           "\u2066-\u2069\ud800-\udfff")
_ONE_LINE = re.compile(f"[\n{_UNSAFE}]")
_LINES = re.compile(f"[{_UNSAFE}]")
_SHORT = {"\n": "\\n", "\r": "\\r"}


def _escape(m: "re.Match[str]") -> str:
    ch = m.group()
    if ch in _SHORT:
        return _SHORT[ch]
    c = ord(ch)
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text, lines: bool = False) -> str:
    """``text`` (``str()`` of it) with every control character (C0 but tab,
    DEL, C1), bidi control, line/paragraph separator and lone surrogate
    written as its escape (``\\x1b``, ``\\r``, ``\\x7f``, ``\\x9b``,
    ``\\u202e``, ``\\udcff``): nothing in it can move the cursor, change
    colours, set the window title or reorder the text. Newlines are escaped too (one
    message is one line) unless ``lines`` is true (an explanation, a
    traceback). Text without such characters is returned as is."""
    text = text if isinstance(text, str) else str(text)
    return (_LINES if lines else _ONE_LINE).sub(_escape, text)
