"""Approval grants: compact signed tokens that carry one human approval of one tool call (DESIGN §5).

Wire form (ASCII, four dot-separated parts)::

    tgg1.<kid>.<payload>.<mac>

    payload = base64url(RFC 8785 canonical JSON of the ``GrantClaims``), no padding
    mac     = base64url(HMAC-SHA256(K, "tgg1." + kid + "." + payload)), no padding
    K       = HMAC-SHA256(secret of kid, "toolgate approval grant v1")

- ``tgg1`` is the type marker and format version. A JWT has three parts and a base64url JSON
  header, so a grant never parses as a JWT and a JWT never parses as a grant. The key ``K`` is
  derived with a label of its own, so even a secret reused elsewhere yields a different key.
- The claims are canonical JSON (an injective encoding; never delimiter-joined strings). They
  repeat the type marker and version (``typ``, ``v``) so a payload cannot be replayed in a
  future format.
- Keys come from ``Settings.approval_signing_keys`` (``kid:secret`` pairs, secrets >= 32
  bytes): the first signs, every one verifies, so keys rotate without downtime.
- The MAC is compared in constant time (``hmac.compare_digest``) over its canonical base64url
  text, so no other spelling of the same bytes is accepted. Nothing is decoded before the MAC
  is verified.

Errors: ``verify`` raises ``GrantInvalid`` (format, kid, MAC, claims) or ``GrantExpired``;
``GrantSigner.sign`` raises ``DependencyUnavailable`` when no signing key is configured.
Grants and secrets are never logged; exception texts name the check, never the token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.bodies import release_validation_error
from app.errors import DependencyUnavailable
from app.fingerprint import canonical_json
from app.settings import DEV_APPROVAL_KEY

PREFIX = "tgg1"
GRANT_TYPE: Literal["toolgate.approval-grant"] = "toolgate.approval-grant"
GRANT_VERSION: Literal[1] = 1
MAX_GRANT_CHARS = 4096
_KEY_LABEL = b"toolgate approval grant v1"
_B64URL = re.compile(r"^[A-Za-z0-9_-]+$")
_KID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class GrantError(Exception):
    """A presented grant is refused. ``str(exc)`` is a log detail (never the grant itself)."""


class GrantInvalid(GrantError):
    """Malformed, unknown kid, bad MAC, or claims of the wrong shape or type."""


class GrantExpired(GrantError):
    """Well-formed and correctly signed, but past ``expires_at_ms``."""


class GrantClaims(BaseModel):
    """What a grant binds. Times are Unix epoch milliseconds; ``input_fingerprint`` is the
    ``app.fingerprint.fingerprint`` of the normalized input the policy saw (64 hex digits)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    typ: Literal["toolgate.approval-grant"] = GRANT_TYPE
    v: Literal[1] = GRANT_VERSION
    approval_id: str = Field(min_length=1, max_length=128)
    tenant: str = Field(min_length=1)
    subject: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    version: str = Field(min_length=1)
    tool_call_id: str | None
    input_fingerprint: str = Field(pattern=r"^[0-9a-f]{64}$")
    approved: Literal[True] = True
    approver: str = Field(min_length=1)
    approver_roles: tuple[str, ...]
    #: Every approver of a quorum, in the order they approved; ``quorum`` how many were needed.
    approvers: tuple[str, ...] = ()
    quorum: int = Field(1, ge=1)
    #: The policy's approval reasons and revision when approval was asked: a changed policy
    #: asks again when its reasons are no longer among these.
    reasons: tuple[str, ...] = ()
    policy_revision: str | None = None
    #: The fingerprint of the input as the approver narrowed it (None: approved as requested).
    approved_input_fingerprint: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    decision_id: str = Field(min_length=1, max_length=64)
    issued_at_ms: int = Field(ge=0)
    expires_at_ms: int = Field(ge=0)

    def binding(self) -> dict[str, str | None]:
        """The members compared with the current request on use (see ``approvals``)."""
        return {
            "approval_id": self.approval_id,
            "tenant": self.tenant,
            "subject": self.subject,
            "tool": self.tool,
            "version": self.version,
            "tool_call_id": self.tool_call_id,
            "input_fingerprint": self.input_fingerprint,
        }


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not _B64URL.match(text):
        raise GrantInvalid("payload is not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise GrantInvalid("payload is not base64url") from exc


def _mac_key(secret: bytes) -> bytes:
    return hmac.new(secret, _KEY_LABEL, hashlib.sha256).digest()


class GrantSigner:
    """Signs and verifies grants with a key ring ``[(kid, secret)]``; the first key signs.

    ``production=True`` refuses the development approval key (by its secret, whatever its
    kid), so a grant signed with it can never verify on a production gateway.
    """

    def __init__(self, keys: list[tuple[str, bytes]], *, production: bool = False) -> None:
        for kid, secret in keys:
            if not _KID.match(kid) or len(secret) < 32:
                raise ValueError("approval keys need a kid of [A-Za-z0-9_-]{1,64} and a secret of >= 32 bytes")
            if production and hmac.compare_digest(secret, DEV_APPROVAL_KEY[1]):
                raise ValueError("the development approval key is refused in production")
        self._keys = {kid: _mac_key(secret) for kid, secret in keys}
        self._signing_kid = keys[0][0] if keys else None

    @property
    def kids(self) -> tuple[str, ...]:
        """The configured key ids, the signing one first."""
        return tuple(self._keys)

    def _mac(self, kid: str, signing_input: str) -> str:
        return _b64(hmac.new(self._keys[kid], signing_input.encode("ascii"), hashlib.sha256).digest())

    def require_signing_key(self) -> str:
        """The signing kid; raises ``DependencyUnavailable`` (503) when no key is configured."""
        if self._signing_kid is None:
            raise DependencyUnavailable(
                "approvals cannot be granted: no signing key is configured",
                log_detail="TOOLGATE_APPROVAL_KEYS is unset",
            )
        return self._signing_kid

    def sign(self, claims: GrantClaims) -> str:
        """The grant text for ``claims`` under the first key (deterministic for equal claims).

        Raises ``DependencyUnavailable`` (503) when no approval key is configured.
        """
        self.require_signing_key()
        assert self._signing_kid is not None
        payload = _b64(canonical_json(claims.model_dump(mode="json")))
        signing_input = f"{PREFIX}.{self._signing_kid}.{payload}"
        return f"{signing_input}.{self._mac(self._signing_kid, signing_input)}"

    def verify(self, grant: str, *, now_ms: int) -> GrantClaims:
        """Check form, kid, MAC (constant time), claims and expiry; return the claims.

        ``now_ms`` is the current Unix time in milliseconds. Raises ``GrantInvalid`` or
        ``GrantExpired``; nothing else escapes.
        """
        if not isinstance(grant, str) or not grant.isascii() or len(grant) > MAX_GRANT_CHARS:
            raise GrantInvalid("grant is not ASCII text of at most 4096 characters")
        parts = grant.split(".")
        if len(parts) != 4 or parts[0] != PREFIX:
            raise GrantInvalid("grant does not have the form tgg1.<kid>.<payload>.<mac>")
        _, kid, payload, mac = parts
        if kid not in self._keys:
            raise GrantInvalid("grant key id is not configured")
        expected = self._mac(kid, f"{PREFIX}.{kid}.{payload}")
        if not hmac.compare_digest(expected.encode("ascii"), mac.encode("ascii")):
            raise GrantInvalid("grant signature does not verify")
        try:
            claims = GrantClaims.model_validate_json(_unb64(payload))
        except ValidationError as exc:
            release_validation_error(exc)
            raise GrantInvalid(f"grant claims are not valid ({exc.error_count()} problems)") from None
        if now_ms >= claims.expires_at_ms:
            raise GrantExpired("grant expired")
        return claims
