"""Signing decision receipts: a compact JWS (RFC 7515) with EdDSA over Ed25519 (RFC 8037),
made by PyJWT. Header ``{"alg": "EdDSA", "kid": <signing key id>, "typ": "toolgate-receipt+jwt"}``;
payload ``ReceiptClaims``. About 60 µs a receipt (docs/performance.md)."""

from __future__ import annotations

import jwt

from app.receipts.claims import RECEIPT_TYPE, ReceiptClaims
from app.receipts.keys import KeyFileError, KeyRing, PublicKeys
from app.settings import ReceiptSettings, SettingsError


class ReceiptSigner:
    """Signs receipts with the signing key of ``ring``; ``public_keys`` are the keys that
    verify them (published at ``/.well-known/toolgate-keys``). Thread-safe."""

    def __init__(self, ring: KeyRing) -> None:
        self._key = ring.signing_key
        self._headers = {"kid": ring.kid, "typ": RECEIPT_TYPE}
        self.public_keys: PublicKeys = ring.public

    def sign(self, claims: ReceiptClaims) -> str:
        """The compact JWS of ``claims``."""
        return jwt.encode(claims.payload(), self._key, algorithm="EdDSA", headers=self._headers)


def receipt_signer(settings: ReceiptSettings) -> ReceiptSigner | None:
    """The signer of ``TOOLGATE_RECEIPT_KEY_FILES``, or None when it is unset (no receipts).
    Raises ``SettingsError`` for an unusable key file."""
    if not settings.receipt_key_files:
        return None
    try:
        return ReceiptSigner(KeyRing.load(settings.receipt_key_files))
    except KeyFileError as exc:
        raise SettingsError(f"TOOLGATE_RECEIPT_KEY_FILES: {exc}") from None
