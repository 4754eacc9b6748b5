"""The values of given kinds in free text (a transaction's subject, a file, a message), in order
of appearance, as ``(kind, key)`` (keys: ``app.provenance.normalize``).

The patterns find what a model could copy out of the text into a call: ``http(s)://`` and
``www.`` links (as ``toolgate.lib.links_in``, trailing punctuation not part of them), bare
host names, e-mail addresses (as ``toolgate.lib.emails_in``, and with a non-ASCII domain),
IBANs written whole or in groups of four, international phone numbers (``+`` or ``00``) and North American ones, absolute and
``./``/``~/`` file paths, amounts (digits with thousands and decimal separators, a currency
around them or not). One scan finds them all, left to right, and a text taken by one value is
not read again as another (an IBAN's digit groups are not amounts, a link's host is not a bare
host name: the link's host counts as its domain, ``app.provenance.results.with_host``); where
two kinds could start at the same place, the earlier in that order wins.
A found text that is not a value of its kind (``normalize.key`` None) is
skipped. At most ``MAX_VALUES`` values are returned, from the first ``MAX_TEXT_CHARS``
characters; ``scan`` says whether that cut any.

Every pattern runs in time linear in the text: each repetition is bounded or cannot fail
once begun, none is nested in another unbounded one, and a value cannot begin inside a run
of the characters it is made of (a lookbehind), so no text is rescanned from every offset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from app.provenance.normalize import key

MAX_VALUES = 64
MAX_TEXT_CHARS = 65_536

#: In order of precedence (see the module docstring).
_PATTERNS: dict[str, str] = {
    "url": r"(?i:\b(?:https?://|www\.)[^\s<>\"'`]+)",
    "email": r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[\w.-]{1,252}\.[^\W\d_]{2,63}",
    "iban": r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b",
    "phone": r"(?<![\w+])(?:(?:\+|00)[1-9][0-9 ().\-]{5,18}[0-9]|\(?[0-9]{3}\)?[ .-][0-9]{3}[ .-][0-9]{4})(?!\w)",
    "path": r"(?<![\w.:/~])(?:~|\.{1,2})?/(?:[\w.-]{1,255}/{1,8}){0,64}[\w.-]{1,255}",
    "domain": r"(?i:(?<![@\w.-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,126}[a-z]{2,63}(?![\w-]))",
    "amount": r"(?:[€$£¥] ?|\b[A-Z]{3} )?(?<![\w.,])[0-9]{1,3}(?:[,.' ]?[0-9]{3}){0,12}(?:[.,][0-9]{1,2})?(?![\w]|[.,][0-9])"
              r"(?: ?[€$£¥]| [A-Z]{3}\b)?",
}
_TRAILING = ".,;:!?)]}"
#: A kind's pattern cannot match a text whose lowercase holds none of these (a cheap test
#: before the scan); the other kinds need a digit.
_NEEDS: dict[str, tuple[str, ...]] = {"url": ("http", "www."), "email": ("@",), "path": ("/",), "domain": (".",)}
_DIGITS = tuple("0123456789")


@lru_cache(maxsize=128)
def _scanner(kinds: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for ``kinds`` (in precedence order), each kind a named group: one scan finds
    them all; where two could start at the same place, the earlier kind wins."""
    return re.compile("|".join(f"(?P<{kind}>{_PATTERNS[kind]})" for kind in kinds))


def scan(text: str, kinds: Iterable[str]) -> tuple[list[tuple[str, str]], bool]:
    """The distinct ``(kind, key)`` of the values of ``kinds`` in ``text``, in order of
    appearance (see the module docstring), and whether they are all of them (False when the
    text was longer than ``MAX_TEXT_CHARS`` or held more than ``MAX_VALUES`` values)."""
    complete = len(text) <= MAX_TEXT_CHARS
    text = text[:MAX_TEXT_CHARS]
    wanted = set(kinds)
    lowered = text.lower()
    has_digit = any(digit in text for digit in _DIGITS)
    active = tuple(
        k for k in _PATTERNS
        if k in wanted and (any(n in lowered for n in _NEEDS[k]) if k in _NEEDS else has_digit)
    )
    distinct: list[tuple[str, str]] = []
    if not active:
        return distinct, complete
    for match in _scanner(active).finditer(text):
        kind = str(match.lastgroup)
        raw = match.group(0).rstrip(_TRAILING) if kind in ("url", "domain", "path") else match.group(0)
        if kind == "url" and not raw.lower().startswith(("http://", "https://")):
            raw = "http://" + raw
        value_key = key(kind, raw)
        if value_key is not None and (kind, value_key) not in distinct:
            if len(distinct) == MAX_VALUES:
                return distinct, False
            distinct.append((kind, value_key))
    return distinct, complete


def values_in(text: str, kinds: Iterable[str]) -> list[tuple[str, str]]:
    """``scan``'s values."""
    return scan(text, kinds)[0]
