"""Bundle signatures in OPA's ``.signatures.json`` format: sign (as ``opa build --signing-key``
does) and verify (as ``opa run --verification-key`` does).

``.signatures.json`` is ``{"signatures": ["<JWT>"]}`` with exactly one compact JWS whose payload
is ``{"files": [{"name", "hash", "algorithm": "SHA-256"}], "keyid"?, "scope"?}``. A file's hash
is SHA-256 of its bytes, except for the structured documents (``data.json``, ``.manifest``),
which are hashed over OPA's canonical JSON form: object keys sorted bytewise, no whitespace,
numbers as written, strings as Go's ``encoding/json`` writes them without HTML escaping
(OPA ``v1/bundle/hash.go``). Verification requires that every file of the bundle is listed
with a matching hash, that every listed file is present, and that the scope matches.

Signatures are required whenever a verification key is configured, whether or not the bundle
carries ``.signatures.json`` (OPA advisory GHSA-g2pf-6v5v-qcc8: verification keyed on anything
but the presence of the signing configuration lets a stripped bundle through).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jwt

from app.policy.bundle import MANIFEST, PolicyBundle

HASH_ALGORITHM = "SHA-256"
#: Key id OPA assumes for ``--verification-key`` / ``--signing-key`` without ``-id``.
DEFAULT_KEY_ID = "default"
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "HS256")
_STRUCTURED = {"data.json", MANIFEST, "data.yaml", "data.yml"}


class BundleSignatureError(ValueError):
    """A bundle's signature is missing, malformed, made with another key, or does not cover
    its files exactly. The message names the problem, never key material."""


@dataclass(frozen=True)
class _Number:
    """A JSON number kept as written (Go's ``json.Number``)."""

    literal: str


def _go_string(value: str) -> str:
    # Go escapes U+2028 and U+2029 even with HTML escaping off; json.dumps does not.
    return json.dumps(value, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _canonical(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=lambda k: k.encode("utf-8"))):
            if i:
                out.append(",")
            out.append(_go_string(key))
            out.append(":")
            _canonical(value[key], out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif isinstance(value, _Number):
        out.append(value.literal)
    elif isinstance(value, str):
        out.append(_go_string(value))
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    else:  # pragma: no cover - json.loads yields nothing else
        raise TypeError(f"cannot hash a {type(value).__name__}")


def file_hash(path: str, raw: bytes) -> str:
    """Hex SHA-256 of a bundle file as OPA computes it (see the module docstring). Raises
    ``BundleSignatureError`` for a structured document that is not JSON."""
    if PurePosixPath(path).name in _STRUCTURED:
        try:
            value = json.loads(raw, parse_int=_Number, parse_float=_Number)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BundleSignatureError(f"{path}: not JSON, cannot hash: {exc}") from None
        out: list[str] = []
        _canonical(value, out)
        raw = "".join(out).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def _read_key(key: str) -> str:
    """PEM text, or the path of a file holding it (as OPA's ``--signing-key`` accepts both)."""
    if key.lstrip().startswith("-----BEGIN"):
        return key
    try:
        return Path(key).read_text(encoding="utf-8")
    except OSError as exc:
        raise BundleSignatureError(f"cannot read key file {key}: {exc.strerror}") from None


def key_algorithm(pem: str) -> str | None:
    """The signing algorithm a PEM private key is for: RSA ``RS256``, EC by its curve
    (``ES256``, ``ES384``, ``ES512``), Ed25519 ``EdDSA``; None for anything else (not PEM, an
    encrypted or unknown key)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        return None
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(key.curve.name)
    return None


def sign(
    bundle: PolicyBundle, signing_key: str, *, algorithm: str | None = None, key_id: str = DEFAULT_KEY_ID,
    scope: str | None = None,
) -> bytes:
    """The ``.signatures.json`` for every file of ``bundle``. ``signing_key``: PEM text or a PEM
    file path (an HS256 secret as text, with ``algorithm="HS256"``). ``algorithm`` None: the one
    the key is for (``key_algorithm``). Raises ``BundleSignatureError`` for an unusable key or
    algorithm, naming the ``--signing-alg`` the key needs when it can tell."""
    if algorithm is None:
        algorithm = key_algorithm(_read_key(signing_key))
        if algorithm is None:
            raise BundleSignatureError(
                "cannot tell the signing algorithm from this key (not an unencrypted PEM RSA, EC or Ed25519 private "
                "key): pass --signing-alg (HS256 for a shared secret)")
    if algorithm not in SIGNING_ALGORITHMS:
        raise BundleSignatureError(f"unsupported signing algorithm {algorithm}; one of {', '.join(SIGNING_ALGORITHMS)}")
    files = [{"name": rel, "hash": file_hash(rel, raw), "algorithm": HASH_ALGORITHM} for rel, raw in sorted(bundle.files.items())]
    payload: dict[str, Any] = {"files": files, "keyid": key_id}
    if scope:
        payload["scope"] = scope
    key = signing_key if algorithm == "HS256" and not signing_key.lstrip().startswith("-----BEGIN") else _read_key(signing_key)
    try:
        token = jwt.encode(payload, key, algorithm=algorithm, headers={"kid": key_id})
    except (ValueError, TypeError, jwt.PyJWTError) as exc:
        fits = key_algorithm(key) if isinstance(key, str) else None
        hint = f"; this key signs with {fits}: pass --signing-alg {fits} or leave it out" if fits else ""
        raise BundleSignatureError(f"cannot sign with this key and {algorithm}: {type(exc).__name__}{hint}") from None
    return json.dumps({"signatures": [token]}, indent=2).encode()


@dataclass(frozen=True)
class BundleVerifier:
    """Verifies bundles against one key. ``key``: PEM text or file path (public key or
    certificate; an HS256 secret as text); ``key_id`` and ``scope`` as OPA's
    ``--verification-key-id`` and ``--scope``."""

    key: str
    algorithm: str = "RS256"
    key_id: str = DEFAULT_KEY_ID
    scope: str = ""

    def verify(self, bundle: PolicyBundle) -> None:
        """Raise ``BundleSignatureError`` unless ``bundle`` is signed by this key, with this
        scope, over exactly its files. An unsigned bundle is refused."""
        if bundle.signatures is None:
            raise BundleSignatureError("the bundle is not signed (.signatures.json missing) and a verification key is configured")
        try:
            document = json.loads(bundle.signatures)
        except (ValueError, UnicodeDecodeError):
            raise BundleSignatureError(".signatures.json is not JSON") from None
        tokens = document.get("signatures") if isinstance(document, dict) else None
        if not isinstance(tokens, list) or len(tokens) != 1 or not isinstance(tokens[0], str):
            raise BundleSignatureError(".signatures.json must hold exactly one JWT")
        claims = self._claims(tokens[0])
        if (claims.get("scope") or "") != self.scope:
            raise BundleSignatureError("signature scope mismatch")
        listed = _listed_files(claims)
        for rel, raw in bundle.files.items():
            entry = listed.pop(rel, None)
            if entry is None:
                raise BundleSignatureError(f"{rel} is not included in the bundle signature")
            if entry.get("algorithm") != HASH_ALGORITHM:
                raise BundleSignatureError(f"{rel}: unsupported hash algorithm {entry.get('algorithm')!r}")
            if entry.get("hash") != file_hash(rel, raw):
                raise BundleSignatureError(f"{rel}: digest mismatch")
        if listed:
            raise BundleSignatureError(f"signed files missing from the bundle: {', '.join(sorted(listed))}")

    def _claims(self, token: str) -> dict[str, Any]:
        key = self.key if self.algorithm == "HS256" and not self.key.lstrip().startswith("-----BEGIN") else _read_key(self.key)
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") != self.algorithm:
                raise BundleSignatureError(f"signature algorithm {header.get('alg')!r} is not the configured {self.algorithm}")
            claims = jwt.decode(token, key, algorithms=[self.algorithm], options={"verify_aud": False})
        except jwt.PyJWTError as exc:
            raise BundleSignatureError(f"signature verification failed: {type(exc).__name__}") from None
        except (ValueError, TypeError) as exc:
            raise BundleSignatureError(f"the verification key is unusable for {self.algorithm}: {type(exc).__name__}") from None
        if not isinstance(claims, dict):
            raise BundleSignatureError("the signature payload is not an object")
        return claims


def _listed_files(claims: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    files = claims.get("files")
    if not isinstance(files, list):
        raise BundleSignatureError("the signature payload has no files list")
    listed: dict[str, dict[str, Any]] = {}
    for entry in files:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise BundleSignatureError("a files entry of the signature payload is malformed")
        listed[entry["name"].lstrip("/")] = entry
    return listed
