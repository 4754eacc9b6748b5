"""One normalization per kind of value (docs/session.md "Provenance"): two values of a kind are
the same value when their keys are equal. ``toolgate.lib.value_key`` (policies/toolgate/lib/
values.rego) computes the same keys; both are checked against tests/data/value_keys.json.

``key(kind, value) -> str | None``, None when ``value`` is not a value of ``kind``:

- ``url``: ``scheme://[userinfo@]host[:port]path[?query]`` as ``toolgate.lib.url_parts`` reads
  it (a backslash is a slash; no scheme: read as ``http://``); scheme and host lowercased, the
  host percent-decoded, without a trailing dot and in IDNA A-labels; a default port and the
  fragment dropped; an empty path is ``/``.
- ``domain``: the host of a URL or a bare host name, as in a URL.
- ``email``: ``local@domain`` lowercased, a display name dropped, the domain mapped by UTS 46
  and in IDNA A-labels as a URL's host (``mallory@évil.example`` is ``mallory@xn--vil-9la.example``).
- ``iban``: uppercase without spaces: two letters, two digits, 11-30 letters or digits (the
  check digits are not verified: a made-up IBAN in a message is still the value to trace).
- ``phone``: ``+`` and the digits of an international number (``00`` read as ``+``), the
  digits of a national one; 7-15 digits.
- ``path``: ``toolgate.lib.path_normalize`` (repeated and ``.`` segments dropped).
- ``amount``, ``number``: the decimal number without trailing zeros (``100.50 EUR`` ->
  ``100.5``): a currency symbol or ISO code is dropped, ``,``/``.`` read as the decimal
  separator when last and followed by 1-2 digits, else as thousands separators.
- ``text``: lowercased, runs of whitespace one space, trimmed.

Lookalikes are never folded: ``pаypal.com`` with a Cyrillic ``а`` is another value than
``paypal.com``, so it is neither the user's nor a trusted one (the same holds for full-width
letters in an IBAN); UTS 46 mapping applies to host names as browsers apply it.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import unquote

import idna

# The pattern of toolgate.lib.url_parts.
_URL = re.compile(
    r"^([A-Za-z][A-Za-z0-9+.-]*)://(?:([^/?#]*)@)?(\[[0-9A-Fa-f:.]*\]|[^/?#:]*)(?::([0-9]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$",
    re.DOTALL,
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_BARE_HOST = re.compile(r"^(?://)?[^/?#\s@:][^/?#\s]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WELL_FORMED_ESCAPES = re.compile(r"^(?:[^%]|%[0-9A-Fa-f]{2})*$")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_EMAIL = re.compile(r"^(?:[^<>]*<)?([A-Za-z0-9.!#$%&'*+/=?^_{|}~-]+)@([^\s<>@]+?)>?$")
_EMAIL_DOMAIN = re.compile(
    r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$"
)
_IBAN = re.compile(r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$")
_PHONE = re.compile(r"^(\+|00)?[0-9 ().\-/]+$")
_CURRENCY = re.compile(r"[€$£¥]|\b[A-Z]{3}\b")
_NUMBER = re.compile(r"^[+-]?[0-9][0-9,.' ]*$")
_WHITESPACE = re.compile(r"[\t\n\f\r ]+")


def _host(raw: str) -> str | None:
    if _WELL_FORMED_ESCAPES.match(raw):
        raw = unquote(raw)
    host = raw.lower().removesuffix(".")
    if host.isascii() or host.startswith("["):
        return host
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        return None


def _url_parts(value: str) -> re.Match[str] | None:
    slashed = value.replace("\\", "/")
    if _CONTROL.search(slashed):
        return None
    if not _SCHEME.match(slashed):
        if not _BARE_HOST.match(slashed):
            return None
        slashed = "http://" + slashed.removeprefix("//")
    return _URL.match(slashed)


def url_key(value: str) -> str | None:
    """See the module docstring."""
    parts = _url_parts(value)
    if parts is None:
        return None
    scheme, userinfo, raw_host, port, path, query, _ = parts.groups()
    host = _host(raw_host)
    if not host:
        return None
    scheme = scheme.lower()
    port = "" if port is None or port == _DEFAULT_PORTS.get(scheme) else port
    return "".join((
        f"{scheme}://", f"{userinfo}@" if userinfo else "", host, f":{port}" if port else "", path or "/",
        f"?{query}" if query else "",
    ))


def domain_key(value: str) -> str | None:
    """See the module docstring."""
    parts = _url_parts(value)
    return _host(parts.group(3)) or None if parts is not None else None


def email_key(value: str) -> str | None:
    """See the module docstring."""
    found = _EMAIL.match(value.strip())
    if found is None:
        return None
    domain = found.group(2)
    if not domain.isascii():
        try:
            domain = idna.encode(domain, uts46=True).decode("ascii")
        except idna.IDNAError:
            return None
    domain = domain.lower()
    return f"{found.group(1).lower()}@{domain}" if _EMAIL_DOMAIN.match(domain) else None


def iban_key(value: str) -> str | None:
    """See the module docstring."""
    compact = value.replace(" ", "").upper()
    return compact if value.isascii() and _IBAN.match(compact) else None


def phone_key(value: str) -> str | None:
    """See the module docstring."""
    text = value.strip()
    found = _PHONE.match(text)
    if found is None:
        return None
    digits = re.sub(r"[^0-9]", "", text[len(found.group(1) or ""):])
    if not 7 <= len(digits) <= 15:
        return None
    return f"+{digits}" if found.group(1) else digits


def path_key(value: str) -> str | None:
    """See the module docstring."""
    segments = [s for s in value.split("/") if s not in ("", ".")]
    return ("/" if value.startswith("/") else "") + "/".join(segments) if value else None


def _decimal_text(number: Decimal) -> str:
    text = format(number.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def amount_key(value: Any) -> str | None:
    """See the module docstring."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return _decimal_text(Decimal(str(value))) if value == value and abs(value) != float("inf") else None
    if not isinstance(value, str):
        return None
    text = _CURRENCY.sub("", value).strip()
    if not _NUMBER.match(text):
        return None
    text = text.replace(" ", "").replace("'", "")
    decimal_at = max(text.rfind(","), text.rfind("."))
    if decimal_at >= 0 and 1 <= len(text) - decimal_at - 1 <= 2:
        whole, fraction = text[:decimal_at], text[decimal_at + 1:]
    else:
        whole, fraction = text, ""
    whole = whole.replace(",", "").replace(".", "")
    try:
        return _decimal_text(Decimal(f"{whole}.{fraction}" if fraction else whole))
    except InvalidOperation:
        return None


def text_key(value: str) -> str | None:
    """See the module docstring."""
    text = _WHITESPACE.sub(" ", value.lower()).strip(" ")
    return text or None


_STRING_KEYS = {
    "url": url_key, "domain": domain_key, "email": email_key, "iban": iban_key, "phone": phone_key,
    "path": path_key, "text": text_key,
}


def key(kind: str, value: Any) -> str | None:
    """The key of ``value`` as a value of ``kind`` (see the module docstring); None when it is
    not one. Raises ``KeyError`` for an unknown kind."""
    if kind in ("amount", "number"):
        return amount_key(value)
    normalize = _STRING_KEYS[kind]
    return normalize(value) if isinstance(value, str) else None
