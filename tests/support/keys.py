"""Test key material and raw token building, shared by unit and API tests.

Keys (generated once per test process):

* ``K1`` RSA-2048, kid ``k1`` (published in the JWKS by default)
* ``K2`` RSA-2048, kid ``k2`` (published only when a test says so)
* ``KA`` RSA-2048, kid ``attacker`` (never published)
* ``EC1`` EC P-256, kid ``ec1``; ``ED1`` Ed25519, kid ``ed1``

Tokens:

* ``baseline_claims(now, **changes)`` is the catalog's baseline claims B (issuer
  ``https://idp.test.local``, audience ``policy-gateway``, ``sub=svc-tool-runner``,
  ``tenant=t-alpha``, ``iat=nbf=now``, ``exp=now+300``, uuid4 ``jti``); pass ``REMOVE`` as a
  value to drop a claim.
* ``raw_jwt(header, payload, sign)`` assembles a compact JWS by hand: dicts are serialised as
  compact JSON, bytes are used exactly as given, each part base64url-encoded without padding,
  and ``sign(signing_input: bytes) -> bytes`` signs ``ASCII(b64(header) + "." + b64(payload))``.
  No library check runs, so any header or claim can be produced.
* ``KeyPair.token(claims, alg=..., **header)`` is the usual well-formed case.
* Signers: ``KeyPair.signer(alg)`` (RS*/PS*/ES*/EdDSA, JWS signature encoding of RFC 7518),
  ``hs_signer(secret_bytes, alg)`` (HMAC with any bytes, including a PEM or an empty key).
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

ISSUER = "https://idp.test.local"
AUDIENCE = "policy-gateway"
SUBJECT = "svc-tool-runner"
TENANT = "t-alpha"
#: The HS256 secret named by case jwt-007 (exactly 32 bytes).
CASE_HS_SECRET = "test-secret-32-bytes-long-000000"

#: Marker for ``baseline_claims``: remove this claim.
REMOVE = object()

Signer = Callable[[bytes], bytes]

_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def json_bytes(obj: Any) -> bytes:
    """Compact JSON, as token producers usually write it."""
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def raw_jwt(header: dict[str, Any] | bytes, payload: dict[str, Any] | bytes, sign: Signer) -> str:
    """Assemble and sign a compact JWS with no library checks (see the module docstring)."""
    h = header if isinstance(header, bytes) else json_bytes(header)
    p = payload if isinstance(payload, bytes) else json_bytes(payload)
    signing_input = f"{b64url(h)}.{b64url(p)}"
    return f"{signing_input}.{b64url(sign(signing_input.encode('ascii')))}"


def hs_signer(secret: bytes, alg: str = "HS256") -> Signer:
    """HMAC signer over arbitrary key bytes (empty keys and PEM text included)."""
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    return lambda data: hmac.new(secret, data, digest).digest()


def baseline_claims(now: int | None = None, **changes: Any) -> dict[str, Any]:
    """Claims B of the catalog; keyword arguments replace claims, ``REMOVE`` drops them."""
    now = int(time.time()) if now is None else now
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": SUBJECT,
        "tenant": TENANT,
        "iat": now,
        "nbf": now,
        "exp": now + 300,
        "jti": str(uuid.uuid4()),
    }
    for name, value in changes.items():
        if value is REMOVE:
            claims.pop(name, None)
        else:
            claims[name] = value
    return claims


@dataclass(frozen=True)
class KeyPair:
    """A private key with its kid; helpers for JWKs, PEMs and signing."""

    kid: str
    private_key: Any
    default_alg: str

    @property
    def public_key(self) -> Any:
        return self.private_key.public_key()

    def public_pem(self, *, pkcs1: bool = False) -> bytes:
        """SubjectPublicKeyInfo PEM (with final newline), or PKCS#1 ``RSA PUBLIC KEY`` PEM."""
        fmt = serialization.PublicFormat.PKCS1 if pkcs1 else serialization.PublicFormat.SubjectPublicKeyInfo
        return self.public_key.public_bytes(serialization.Encoding.PEM, fmt)

    def public_der(self) -> bytes:
        """DER SubjectPublicKeyInfo bytes."""
        return self.public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def private_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def jwk(self, *, kid: Any = REMOVE, alg: str | None = None, use: str | None = "sig") -> dict[str, Any]:
        """The public JWK (RFC 7517/7518/8037) with this pair's kid (``kid=None`` omits it,
        another string replaces it); ``alg``/``use`` members only when not None."""
        return public_jwk(self.public_key, kid=self.kid if kid is REMOVE else kid, alg=alg, use=use)

    def signer(self, alg: str | None = None) -> Signer:
        """Signer producing the JWS signature bytes for ``alg`` (RFC 7518 §3)."""
        return make_signer(self.private_key, alg or self.default_alg)

    def token(self, claims: dict[str, Any], *, alg: str | None = None, **header: Any) -> str:
        """A well-formed token: header ``{"alg", "typ": "JWT", "kid"}`` plus ``header`` extras
        (pass ``kid=None`` to omit the kid)."""
        alg = alg or self.default_alg
        full: dict[str, Any] = {"alg": alg, "typ": "JWT", "kid": self.kid}
        full.update(header)
        full = {k: v for k, v in full.items() if v is not None}
        return raw_jwt(full, claims, self.signer(alg))

    def self_signed_cert_pem(self, common_name: str = "attacker.test") -> bytes:
        """A self-signed X.509 certificate for this key (for x5u / x5c cases)."""
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _dt.datetime.now(_dt.UTC)
        algorithm = None if isinstance(self.private_key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(days=1))
            .not_valid_after(now + _dt.timedelta(days=30))
            .sign(self.private_key, algorithm)
        )
        return cert.public_bytes(serialization.Encoding.PEM)

    def cert_der_b64(self) -> str:
        """Standard base64 DER of the self-signed certificate (the ``x5c`` encoding)."""
        pem = self.self_signed_cert_pem()
        der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
        return base64.b64encode(der).decode("ascii")


def make_signer(private_key: Any, alg: str) -> Signer:
    """JWS signer for RS*/PS*/ES*/EdDSA with a cryptography private key."""
    if alg.startswith("RS"):
        h = _HASHES[alg[2:]]
        return lambda data: private_key.sign(data, padding.PKCS1v15(), h())
    if alg.startswith("PS"):
        h = _HASHES[alg[2:]]
        pss = padding.PSS(mgf=padding.MGF1(h()), salt_length=h.digest_size)
        return lambda data: private_key.sign(data, pss, h())
    if alg.startswith("ES"):
        h = _HASHES[alg[2:]]
        size = (private_key.curve.key_size + 7) // 8

        def sign_ec(data: bytes) -> bytes:
            r, s = decode_dss_signature(private_key.sign(data, ec.ECDSA(h())))
            return r.to_bytes(size, "big") + s.to_bytes(size, "big")

        return sign_ec
    if alg == "EdDSA":
        return private_key.sign
    raise ValueError(f"no signer for {alg}")


def _b64_uint(n: int) -> str:
    return b64url(n.to_bytes((n.bit_length() + 7) // 8 or 1, "big"))


def public_jwk(public_key: Any, *, kid: str | None, alg: str | None = None, use: str | None = "sig") -> dict[str, Any]:
    """Build a public JWK dict for an RSA, EC or Ed25519 public key."""
    if isinstance(public_key, rsa.RSAPublicKey):
        numbers = public_key.public_numbers()
        jwk: dict[str, Any] = {"kty": "RSA", "n": _b64_uint(numbers.n), "e": _b64_uint(numbers.e)}
    elif isinstance(public_key, ec.EllipticCurvePublicKey):
        numbers = public_key.public_numbers()
        crv, size = {"secp256r1": ("P-256", 32), "secp384r1": ("P-384", 48), "secp521r1": ("P-521", 66)}[
            public_key.curve.name
        ]
        jwk = {
            "kty": "EC",
            "crv": crv,
            "x": b64url(numbers.x.to_bytes(size, "big")),
            "y": b64url(numbers.y.to_bytes(size, "big")),
        }
    elif isinstance(public_key, ed25519.Ed25519PublicKey):
        raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
    else:
        raise TypeError(f"unsupported key {type(public_key).__name__}")
    if kid is not None:
        jwk["kid"] = kid
    if alg is not None:
        jwk["alg"] = alg
    if use is not None:
        jwk["use"] = use
    return jwk


def jwks(*items: KeyPair | dict[str, Any]) -> dict[str, Any]:
    """A JWK Set document from key pairs (their public JWK) and/or ready JWK dicts."""
    return {"keys": [item.jwk() if isinstance(item, KeyPair) else item for item in items]}


def _rsa() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


K1 = KeyPair("k1", _rsa(), "RS256")
K2 = KeyPair("k2", _rsa(), "RS256")
KA = KeyPair("attacker", _rsa(), "RS256")
EC1 = KeyPair("ec1", ec.generate_private_key(ec.SECP256R1()), "ES256")
ED1 = KeyPair("ed1", ed25519.Ed25519PrivateKey.generate(), "EdDSA")
