"""The input fingerprint (DESIGN §4): one definition shared by idempotency, approvals and the
decision log, so that a fingerprint in a decision record matches the one in Redis and in a grant.

    fingerprint = SHA-256( RFC 8785 canonical JSON of
                           {"tenant", "subject", "tool", "version", "input"} )   (lower-case hex)

RFC 8785 canonical JSON sorts keys and fixes number and string forms, so the same payload sent
with another key order or other whitespace has the same fingerprint.

``canonical_json`` is also what the decision log hashes (``app.audit.chain``), so it is on the
hot path of every call: orjson (compiled) writes the text, after one walk over the value that
rewrites floats in ECMAScript's number form (RFC 8785 §3.2.2.3) as ``orjson.Fragment``s and
checks what orjson would write differently from RFC 8785. orjson sorts object members by code
point, RFC 8785 by UTF-16 code unit: the two orders differ only between a character above
U+FFFF and one in U+E000-U+FFFF, so a value with a member name above U+FFFF goes to the
``rfc8785`` package instead, as does any value the walk does not know (a type other than dict,
list, tuple, str, int, float, bool, None, or an integer beyond +-(2**53 - 1)): that package then
writes it or raises its error. Both write the same bytes for every value (tests/unit/
test_canonical_json.py checks them against each other on random documents).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson
import rfc8785

from app.errors import ValidationFailed

_MAX_EXACT_INT = 2**53 - 1
_SORT = orjson.OPT_SORT_KEYS


class _NotFast(Exception):
    """The value needs the ``rfc8785`` package (see the module docstring)."""


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical JSON of ``value`` (UTF-8 bytes).

    Raises ``rfc8785.CanonicalizationError`` (a ``ValueError``) for values I-JSON cannot carry:
    integers beyond +-(2**53 - 1), lone surrogates in strings, non-finite floats.
    """
    try:
        return orjson.dumps(_prepared(value), option=_SORT)
    except (_NotFast, orjson.JSONEncodeError):
        return rfc8785.dumps(value)


def _prepared(value: Any) -> Any:
    """``value`` with its floats as ``orjson.Fragment``s of their RFC 8785 text (the same object
    when it holds none); raises ``_NotFast`` for what orjson would write otherwise."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT:
            return value
        raise _NotFast
    if kind is float:
        return orjson.Fragment(es_number(value))
    if kind is dict:
        out = None
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                raise _NotFast
            new = _prepared(item)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if kind is list or kind is tuple:
        copy = None
        for index, item in enumerate(value):
            new = _prepared(item)
            if new is not item:
                if copy is None:
                    copy = list(value)
                copy[index] = new
        return value if copy is None else copy
    raise _NotFast


def es_number(number: float) -> str:
    """The ECMAScript ``Number::toString`` text of a finite float (RFC 8785 §3.2.2.3): the
    shortest digits that read back as ``number`` (Python's ``repr`` finds the same), written
    without an exponent from 1e-6 up to below 1e21 and as ``d.ddde±n`` beyond. Raises
    ``_NotFast`` for NaN and infinities (``rfc8785`` refuses them)."""
    if not math.isfinite(number):
        raise _NotFast
    if number == 0:
        return "0"
    text = repr(number)
    if "e" not in text:
        # repr writes 1e-4 <= |x| < 1e16 without an exponent, with the same shortest digits as
        # ECMAScript, which differs only in writing an integral value without ".0".
        return text[:-2] if text.endswith(".0") else text
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # number = 0.<digits> x 10^point, then without leading and trailing zeros.
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        out = digits + "0" * (point - count)
    elif 0 < point <= 21:
        out = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        out = "0." + "0" * -point + digits
    else:
        shown = point - 1
        out = digits[0] + ("." + digits[1:] if count > 1 else "") + ("e+" if shown >= 0 else "e-") + str(abs(shown))
    return sign + out


def fingerprint(tenant: str, subject_id: str, tool: str, version: str, normalized_input: dict[str, Any]) -> str:
    """SHA-256 (64 lower-case hex digits) of the canonical ``{tenant, subject, tool, version,
    input}`` document.

    Raises ``ValidationFailed`` (422) when the input cannot be canonicalized (see
    ``canonical_json``): such input can neither be fingerprinted nor signed in a grant.
    """
    payload = {
        "tenant": tenant,
        "subject": subject_id,
        "tool": tool,
        "version": version,
        "input": normalized_input,
    }
    try:
        data = canonical_json(payload)
    except (rfc8785.CanonicalizationError, UnicodeError):
        raise ValidationFailed(
            "input cannot be canonicalized (RFC 8785)",
            http_status=422,
            details={"problems": [{"path": "/input", "message": "integers must be within +-(2^53-1) and strings valid Unicode"}]},
        ) from None
    return hashlib.sha256(data).hexdigest()
