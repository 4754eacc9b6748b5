"""Verified claims -> ``Subject``, with the type checks PyJWT does not do (RFC 7519 §2, §4.1).

``exp``/``iat``/``nbf`` must be JSON numbers (not bools, not strings, finite: RFC 7519 §2
NumericDate; PyJWT alone accepts ``"1700000000"``); ``sub`` and the tenant claim non-empty
printable strings; roles a list of strings or one space-separated string (OAuth ``scope``
style), missing or ``null`` -> ``()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from app.auth.rejection import reject
from app.models import Subject


def _numeric_date(payload: dict[str, Any], name: str) -> None:
    value = payload[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise reject(f"claim {name} is not a number ({type(value).__name__})")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        raise reject(f"claim {name} is not finite")


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

    def subject(self, payload: dict[str, Any]) -> Subject:
        """The ``Subject`` of a payload whose signature verified. Raises ``Unauthenticated``."""
        for name in ("exp", "iat", "nbf"):
            if name in payload:
                _numeric_date(payload, name)
        if "exp" not in payload:
            raise reject("claim exp is missing")
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

    def _roles(self, raw: Any) -> tuple[str, ...]:
        if raw is None:
            return ()
        if isinstance(raw, str):
            return tuple(raw.split())
        if isinstance(raw, list) and all(isinstance(role, str) for role in raw):
            return tuple(role for role in raw if role)
        raise reject(f"claim {self.roles_claim!r} is not a list of strings or a string")
