"""Verifying a decision receipt offline, with nothing but the public keys.

``verify_receipt(token, keys)`` checks, in order: a compact JWS; header ``alg`` ``EdDSA``,
``typ`` ``toolgate-receipt+jwt`` and a ``kid`` found in ``keys``; the Ed25519 signature (PyJWT);
claims of the ``ReceiptClaims`` shape. Raises ``ReceiptInvalid`` at the first failure.
"""

from __future__ import annotations

from dataclasses import dataclass

import jwt
from pydantic import ValidationError

from app.receipts.claims import RECEIPT_TYPE, ReceiptClaims
from app.receipts.keys import PublicKeys


class ReceiptInvalid(Exception):
    """The receipt does not verify; the message says why (safe to show)."""


@dataclass(frozen=True)
class VerifiedReceipt:
    """A receipt whose signature and claims verified, and the id of the key that signed it."""

    claims: ReceiptClaims
    kid: str


def verify_receipt(token: str, keys: PublicKeys) -> VerifiedReceipt:
    """Verify ``token`` with ``keys`` (see the module docstring). Raises ``ReceiptInvalid``."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise ReceiptInvalid("not a compact JWS") from None
    if header.get("alg") != "EdDSA":
        raise ReceiptInvalid(f"algorithm {header.get('alg')!r} is not EdDSA")
    if header.get("typ") != RECEIPT_TYPE:
        raise ReceiptInvalid(f"type {header.get('typ')!r} is not {RECEIPT_TYPE}")
    kid = header.get("kid")
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise ReceiptInvalid(f"signed by key {kid!r}, which is not in the key set")
    assert isinstance(kid, str)
    try:
        payload = jwt.decode(
            token, key.key, algorithms=["EdDSA"], options={"require": ["iat"], "verify_iat": False, "verify_aud": False}
        )
    except jwt.InvalidSignatureError:
        raise ReceiptInvalid("the signature is not valid (the receipt was changed, or another key signed it)") from None
    except jwt.PyJWTError as exc:
        raise ReceiptInvalid(f"the receipt cannot be read ({type(exc).__name__})") from None
    try:
        claims = ReceiptClaims.model_validate(payload)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in error["loc"]) or "payload" for error in exc.errors()})
        raise ReceiptInvalid(f"the claims are not a toolgate receipt ({', '.join(fields)})") from None
    return VerifiedReceipt(claims, kid)
