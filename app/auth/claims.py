"""Verified claims -> ``Subject``, with the checks PyJWT does not do (RFC 7519 §2, §4.1;
RFC 8725 §3.8-3.10).

- ``exp``/``iat``/``nbf`` must be JSON numbers (not bools, not strings, finite, not negative:
  RFC 7519 §2 NumericDate; PyJWT alone accepts ``"1700000000"``) within a plausible range:
  ``exp`` at most ``max_lifetime_s`` ahead, ``exp - iat`` at most ``max_lifetime_s``, ``nbf``
  not after ``exp``.
- The configured required claims are present (PyJWT checks them too; this names the missing one).
- ``sub`` and the tenant claim are non-empty printable strings; roles a list of strings or one
  space-separated string (OAuth ``scope`` style), missing or ``null`` -> ``()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from app.auth.rejection import reject
from app.models import Subject


def _numeric_date(payload: dict[str, Any], name: str) -> float:
    value = payload[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise reject(f"claim {name} is not a number ({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise reject(f"claim {name} is not finite")
    if number < 0:
        raise reject(f"claim {name} is negative")
    return number


def identity_text(value: Any) -> TypeGuard[str]:
    """A subject, tenant or role: 1-256 printable characters that are valid Unicode (no lone
    surrogates), so it can be logged, hashed (RFC 8785) and stored."""
    if not isinstance(value, str) or not 0 < len(value) <= 256 or not value.isprintable():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class ClaimRules:
    """What a verified payload must hold: the exact issuer, an audience it must contain, and
    the names of the tenant and roles claims."""

    issuer: str
    audience: str
    tenant_claim: str
    roles_claim: str
    required: tuple[str, ...]
    max_lifetime_s: int

    def subject(self, payload: dict[str, Any], now: float) -> Subject:
        """The ``Subject`` of a payload whose signature verified, at Unix time ``now``.
        Raises ``Unauthenticated``."""
        missing = [name for name in self.required if name not in payload]
        if missing:
            raise reject(f"claim {missing[0]} is missing")
        dates: dict[str, float] = {name: _numeric_date(payload, name) for name in ("exp", "iat", "nbf") if name in payload}
        self._plausible(dates, now)
        if payload.get("iss") != self.issuer or not isinstance(payload.get("iss"), str):
            raise reject("issuer mismatch")
        aud = payload.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud
        if not isinstance(audiences, list) or self.audience not in audiences:
            raise reject("audience mismatch")
        sub = payload.get("sub")
        if not identity_text(sub):
            raise reject("claim sub is not a non-empty printable string of at most 256 characters")
        tenant = payload.get(self.tenant_claim)
        if not identity_text(tenant):
            raise reject(f"claim {self.tenant_claim!r} is not a non-empty printable string of at most 256 characters")
        roles = self._roles(payload.get(self.roles_claim))
        if not all(identity_text(role) for role in roles):
            raise reject(f"claim {self.roles_claim!r} holds a role that is not printable text")
        return Subject(id=sub, tenant=tenant, roles=roles)

    def _plausible(self, dates: dict[str, float], now: float) -> None:
        exp = dates["exp"]
        if exp - now > self.max_lifetime_s:
            raise reject(f"claim exp is more than {self.max_lifetime_s} s ahead")
        if "iat" in dates and exp - dates["iat"] > self.max_lifetime_s:
            raise reject(f"the token lives longer than {self.max_lifetime_s} s (exp - iat)")
        if "nbf" in dates and dates["nbf"] > exp:
            raise reject("claim nbf is after exp")

    def _roles(self, raw: Any) -> tuple[str, ...]:
        if raw is None:
            return ()
        if isinstance(raw, str):
            return tuple(raw.split())
        if isinstance(raw, list) and all(isinstance(role, str) for role in raw):
            return tuple(role for role in raw if role)
        raise reject(f"claim {self.roles_claim!r} is not a list of strings or a string")
