"""Text that came from callers, made safe to show a person: on a terminal, in a table, in a
log line read with ``less``.

Decision records hold caller-supplied text (reasons of execution reports, approval answers,
tool input quoted in policy reasons, tenant and subject names from tokens). Printed raw, a
newline forges a table row, an ANSI escape (``ESC [``) moves the cursor or rewrites the
screen, a bidirectional override (Trojan Source) shows text in another order than it is
stored. ``printable`` escapes every such character so that what is shown is exactly what is
stored, one record per line:

    category Cc (C0 and C1 controls, DEL), Cf (format: bidi overrides and isolates, zero-width
    characters, soft hyphen), Zl / Zp (U+2028, U+2029), and the backslash itself
    ->  \\xNN below U+0100, \\uNNNN in the BMP, \\UNNNNNNNN above; the backslash as \\\\

so an escaped text never contains a control character and reads back unambiguously.
``json_printable`` does the same to JSON text (the escapes are JSON's own ``\\uNNNN``, so the
document still parses to the same value).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


@lru_cache(maxsize=4096)
def _is_unsafe(char: str) -> bool:
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escape(char: str) -> str:
    if char == "\\":
        return "\\\\"
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every control, format and line-separator character (and ``\\``) escaped,
    see the module docstring. Plain printable text comes back unchanged."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(char) if char == "\\" or _is_unsafe(char) else char for char in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


_BEYOND_ASCII = re.compile(r"[^\x00-\x7e]")


def json_printable(json_text: str) -> str:
    """JSON text (as ``json.dumps`` writes it, which already escapes U+0000-U+001F) with the
    other characters ``printable`` escapes written as JSON ``\\uNNNN`` escapes: the same JSON
    value, safe on a terminal. Such characters can only occur inside JSON strings, where an
    escape means the same character."""
    return _BEYOND_ASCII.sub(lambda match: _json_escape(match.group()) if _is_unsafe(match.group()) else match.group(), json_text)
