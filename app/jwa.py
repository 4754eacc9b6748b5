"""The JSON Web Algorithms toolgate verifies (RFC 7518 §3.1, RFC 8037 §3.1): one table that
settings validation and the token verifier both read.

``ALG_FAMILY`` maps each asymmetric ``alg`` to the key type it needs, so that a key is never
used with an algorithm of another family (RFC 8725 §2.1, algorithm confusion).
"""

from __future__ import annotations

ALG_FAMILY: dict[str, str] = {
    "RS256": "RSA", "RS384": "RSA", "RS512": "RSA",
    "PS256": "RSA", "PS384": "RSA", "PS512": "RSA",
    "ES256": "EC", "ES384": "EC", "ES512": "EC",
    "EdDSA": "OKP",
}  # fmt: skip
ASYMMETRIC_ALGORITHMS: frozenset[str] = frozenset(ALG_FAMILY)
#: HS256 only with a configured secret of at least 32 bytes (``app.auth.keys``).
SUPPORTED_ALGORITHMS: frozenset[str] = ASYMMETRIC_ALGORITHMS | {"HS256"}
