"""Verification keys by algorithm family, so that no key is ever used with another algorithm
(RFC 8725 §2.1, §3.1: algorithm confusion).

``HS256`` -> only a configured secret (>= 32 bytes, never a PEM/DER/SSH/JWK public key);
``RS*``/``PS*`` -> RSA keys; ``ES256/384/512`` -> EC keys on P-256/384/521; ``EdDSA`` ->
Ed25519/Ed448 keys.
"""

from __future__ import annotations

from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt.algorithms import HMACAlgorithm

from app.jwa import ALG_FAMILY

_EC_CURVE = {"ES256": ec.SECP256R1, "ES384": ec.SECP384R1, "ES512": ec.SECP521R1}
MIN_HS256_SECRET_BYTES = 32


def key_family(key: Any) -> str | None:
    """``RSA`` / ``EC`` / ``OKP`` for a *public* key object, else None (private keys, bytes)."""
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "EC"
    if isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        return "OKP"
    return None


def key_fits(alg: str, key: Any) -> bool:
    """True when ``key`` is a public key of the family (and EC curve) that ``alg`` needs."""
    family = ALG_FAMILY.get(alg)
    if family is None or key_family(key) != family:
        return False
    if family == "EC":
        return isinstance(key.curve, _EC_CURVE[alg])
    return True


def load_pem_public_key(text: str) -> Any:
    """A PEM public key (SPKI or PKCS#1) or X.509 certificate -> public key object.
    Raises ``ValueError`` (or a cryptography error) for anything else."""
    if "\\n" in text and "\n" not in text.strip():
        text = text.replace("\\n", "\n")  # environment variables often carry escaped newlines
    data = text.strip().encode("ascii") + b"\n"
    key: Any
    if b"-----BEGIN CERTIFICATE-----" in data:
        key = x509.load_pem_x509_certificate(data).public_key()
    else:
        key = serialization.load_pem_public_key(data)
    if key_family(key) is None:
        raise ValueError(f"unsupported public key type {type(key).__name__}")
    return key


def hmac_secret_problem(secret: str, public_key: str | None) -> str | None:
    """Why ``secret`` cannot be the HS256 key (RFC 8725 §2.1, §3.5), or None: shorter than 32
    bytes, or asymmetric key material (PEM, SSH, DER, JWK, or the configured public key)."""
    key = secret.encode("utf-8")
    if len(key) < MIN_HS256_SECRET_BYTES:
        return "the HS256 secret must be at least 32 bytes"
    try:
        HMACAlgorithm(HMACAlgorithm.SHA256).prepare_key(key)  # refuses PEM, SSH, DER, JWK
    except jwt.InvalidKeyError as exc:
        return f"the HS256 secret is refused: {exc}"
    if "-----BEGIN" in secret or (public_key is not None and secret.strip() == public_key.strip()):
        return "the HS256 secret must not be a public key"
    return None
