"""The values of given kinds in free text (a transaction's subject, a file, a message), in order
of appearance, as ``(kind, key)`` (keys: ``app.provenance.normalize``).

The patterns find what a model could copy out of the text into a call: ``http(s)://`` and
``www.`` links (as ``toolgate.lib.links_in``, trailing punctuation not part of them), bare
host names, e-mail addresses (as ``toolgate.lib.emails_in``), IBANs written whole or in groups
of four, international phone numbers (``+`` or ``00``) and North American ones, absolute and
``./``/``~/`` file paths, amounts (digits with thousands and decimal separators, a currency
around them or not). Kinds are looked for in that order of precedence, and a text claimed by
one kind is not read again as another (an IBAN's digit groups are not amounts, a link's host
is not a bare host name: the link's host counts as its domain, ``app.provenance.facts``).
A found text that is not a value of its kind (``normalize.key`` None) is
skipped. At most ``MAX_VALUES`` values are returned, from the first ``MAX_TEXT_CHARS``
characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.provenance.normalize import key

MAX_VALUES = 64
MAX_TEXT_CHARS = 65_536

#: In order of precedence (see the module docstring).
_PATTERNS: dict[str, re.Pattern[str]] = {
    "url": re.compile(r"(?i)\b(?:https?://|www\.)[^\s<>\"'`]+"),
    "email": re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"),
    "iban": re.compile(r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b"),
    "phone": re.compile(r"(?<![\w+])(?:(?:\+|00)[1-9][0-9 ().\-]{5,18}[0-9]|\(?[0-9]{3}\)?[ .-][0-9]{3}[ .-][0-9]{4})(?!\w)"),
    "path": re.compile(r"(?<![\w.:/~])(?:~|\.{1,2})?/(?:[\w.-]+/+)*[\w.-]+"),
    "domain": re.compile(r"(?i)(?<![@\w.-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}(?![\w-])"),
    "amount": re.compile(
        r"(?:[€$£¥] ?|\b[A-Z]{3} )?(?<![\w.,])[0-9]{1,3}(?:[,.' ]?[0-9]{3})*(?:[.,][0-9]{1,2})?(?![\w]|[.,][0-9])(?: ?[€$£¥]| [A-Z]{3}\b)?"
    ),
}
_TRAILING = ".,;:!?)]}"
#: A kind's pattern cannot match a text whose lowercase holds none of these (a cheap test
#: before the scan); the other kinds need a digit.
_NEEDS: dict[str, tuple[str, ...]] = {"url": ("http", "www."), "email": ("@",), "path": ("/",), "domain": (".",)}
_DIGITS = tuple("0123456789")


def values_in(text: str, kinds: Iterable[str]) -> list[tuple[str, str]]:
    """The distinct ``(kind, key)`` of the values of ``kinds`` in ``text``, in order of
    appearance (see the module docstring)."""
    text = text[:MAX_TEXT_CHARS]
    wanted = set(kinds)
    claimed: list[tuple[int, int]] = []
    found: list[tuple[int, str, str]] = []
    lowered = text.lower()
    has_digit = any(digit in text for digit in _DIGITS)
    for kind in (k for k in _PATTERNS if k in wanted):
        needs = _NEEDS.get(kind)
        if (needs is not None and not any(n in lowered for n in needs)) or (needs is None and not has_digit):
            continue
        for match in _PATTERNS[kind].finditer(text):
            start, end = match.span()
            if any(start < taken_end and taken_start < end for taken_start, taken_end in claimed):
                continue
            claimed.append((start, end))
            raw = match.group(0).rstrip(_TRAILING) if kind in ("url", "domain", "path") else match.group(0)
            if kind == "url" and not raw.lower().startswith(("http://", "https://")):
                raw = "http://" + raw
            value_key = key(kind, raw)
            if value_key is not None:
                found.append((start, kind, value_key))
    found.sort()
    distinct: list[tuple[str, str]] = []
    for _, kind, value_key in found:
        if (kind, value_key) not in distinct:
            distinct.append((kind, value_key))
            if len(distinct) == MAX_VALUES:
                break
    return distinct
