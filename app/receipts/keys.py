"""Ed25519 key rings and published key sets (RFC 8032 signatures, RFC 8037 OKP JWKs in an RFC
7517 JWK Set).

A **key ring** is read from PEM files, in order: the first file holds a private key (PKCS#8,
unencrypted) and signs; every file's key verifies, so a retired key can stay listed, as a
public key only (SubjectPublicKeyInfo), for as long as what it signed must verify. A key's id
(``kid``) is its RFC 7638 JWK thumbprint: SHA-256 of ``{"crv":"Ed25519","kty":"OKP","x":...}``,
base64url without padding; the same key always has the same id, wherever it is loaded.

The **published key set** of the gateway (``GET /.well-known/toolgate-keys``)::

    {"keys":            [JWK, ...],   receipt keys: a plain JWK Set any JOSE library reads
     "checkpoint_keys": [JWK, ...]}   decision-log checkpoint keys (app.audit.checkpoints)

    JWK = {"kty": "OKP", "crv": "Ed25519", "x": <base64url public key>, "kid": <thumbprint>,
           "alg": "EdDSA", "use": "sig"}

``read_key_document(source)`` reads such a document back from a file or an http(s) URL, and
``PublicKeys.from_jwks`` keeps its Ed25519 public keys by id.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import rfc8785
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

#: The largest key document read from a file or URL (a key set is a few hundred bytes a key).
MAX_KEY_DOCUMENT_BYTES = 1024 * 1024


class KeyFileError(ValueError):
    """A key file cannot be used: unreadable, not PEM, not Ed25519, encrypted, or a public key
    where a private one must sign. The message names the file, never key material."""


class KeySetError(ValueError):
    """A key document cannot be read, or holds no usable key. Safe to show."""


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Inverse of ``b64url``. Raises ``ValueError`` for text that is not base64url."""
    if not isinstance(text, str) or not text.isascii() or "=" in text:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The RFC 7638 thumbprint of ``public_key`` (43 base64url characters)."""
    members = {"crv": "Ed25519", "kty": "OKP", "x": b64url(_raw(public_key))}
    return b64url(hashlib.sha256(rfc8785.dumps(members)).digest())


@dataclass(frozen=True)
class VerifyKey:
    """One Ed25519 public key and its id."""

    kid: str
    key: Ed25519PublicKey

    def verifies(self, signature: bytes, message: bytes) -> bool:
        """True when ``signature`` is this key's signature of ``message``."""
        try:
            self.key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def jwk(self) -> dict[str, str]:
        """The public JWK of this key (see the module docstring)."""
        return {"kty": "OKP", "crv": "Ed25519", "x": b64url(_raw(self.key)), "kid": self.kid, "alg": "EdDSA", "use": "sig"}


class PublicKeys:
    """Ed25519 public keys by id: what verifies signatures. Iterable over ``VerifyKey``."""

    def __init__(self, keys: Iterable[VerifyKey]) -> None:
        self._keys = {key.kid: key for key in keys}

    def __iter__(self) -> Iterator[VerifyKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, kid: str) -> VerifyKey | None:
        """The key with id ``kid``, or None."""
        return self._keys.get(kid)

    def jwks(self) -> list[dict[str, str]]:
        """The public JWKs, in ring order."""
        return [key.jwk() for key in self._keys.values()]

    @classmethod
    def from_jwks(cls, jwks: Any, *, what: str = "keys") -> PublicKeys:
        """The Ed25519 keys of a list of JWKs (``what`` names the list in messages). JWKs of
        other types or curves are skipped; a JWK that carries private material (``d``), or a
        malformed Ed25519 JWK, is refused. Raises ``KeySetError``, also when no key is left."""
        if not isinstance(jwks, list):
            raise KeySetError(f"the key document has no {what!r} list")
        keys = []
        for position, jwk in enumerate(jwks, start=1):
            if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
                continue
            if "d" in jwk:
                raise KeySetError(f"{what} #{position} holds a private key: publish public keys only")
            kid = jwk.get("kid")
            try:
                raw = b64url_decode(jwk.get("x", ""))
                key = Ed25519PublicKey.from_public_bytes(raw)
            except ValueError:
                raise KeySetError(f"{what} #{position} is not a valid Ed25519 public key") from None
            if not isinstance(kid, str) or not kid:
                raise KeySetError(f"{what} #{position} has no kid")
            keys.append(VerifyKey(kid, key))
        if not keys:
            raise KeySetError(f"the key document holds no Ed25519 key in {what!r}")
        return cls(keys)


@dataclass(frozen=True)
class KeyRing:
    """A signing key and the public keys that verify (the signing key's first)."""

    signing_key: Ed25519PrivateKey
    public: PublicKeys

    @property
    def kid(self) -> str:
        """The id of the signing key."""
        return key_id(self.signing_key.public_key())

    def sign(self, message: bytes) -> tuple[str, bytes]:
        """``(kid, Ed25519 signature of message)`` with the signing key."""
        return self.kid, self.signing_key.sign(message)

    @classmethod
    def from_private_key(cls, signing_key: Ed25519PrivateKey, others: Iterable[Ed25519PublicKey] = ()) -> KeyRing:
        """The ring of ``signing_key`` plus the public keys ``others``."""
        publics = [signing_key.public_key(), *others]
        return cls(signing_key, PublicKeys(VerifyKey(key_id(k), k) for k in publics))

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> KeyRing:
        """The ring of PEM files ``paths`` (see the module docstring). Raises ``KeyFileError``
        naming the file (and ``ValueError`` for an empty list)."""
        files = [Path(p) for p in paths]
        if not files:
            raise ValueError("a key ring needs at least one key file")
        signing = _read_key(files[0])
        if not isinstance(signing, Ed25519PrivateKey):
            raise KeyFileError(f"{files[0]}: the first key file must hold the private key that signs")
        others = []
        for path in files[1:]:
            key = _read_key(path)
            others.append(key.public_key() if isinstance(key, Ed25519PrivateKey) else key)
        return cls.from_private_key(signing, others)


def development_key(label: bytes) -> Ed25519PrivateKey:
    """A fixed, publicly known key derived from ``label`` (the private key is the SHA-256 of
    it): for development only, never to be trusted."""
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(label).digest())


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """``key`` as an unencrypted PKCS#8 PEM (what ``KeyRing.load`` reads)."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def public_key_pem(key: Ed25519PublicKey) -> bytes:
    """``key`` as a SubjectPublicKeyInfo PEM."""
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _read_key(path: Path) -> Ed25519PrivateKey | Ed25519PublicKey:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        key: object
        if b"PRIVATE KEY-----" in data:
            key = serialization.load_pem_private_key(data, password=None)
        else:
            key = serialization.load_pem_public_key(data)
    except TypeError:
        raise KeyFileError(f"{path}: the key is encrypted; give an unencrypted PKCS#8 key") from None
    except (ValueError, UnsupportedAlgorithm):
        raise KeyFileError(f"{path}: not a PEM key") from None
    if not isinstance(key, Ed25519PrivateKey | Ed25519PublicKey):
        raise KeyFileError(f"{path}: not an Ed25519 key")
    return key


def read_key_document(source: str, *, timeout_s: float = 10.0) -> dict[str, Any]:
    """The key document at ``source``: an ``http://`` or ``https://`` URL (fetched, redirects
    not followed) or a file path. Raises ``KeySetError`` when it cannot be read or is not a
    JSON object."""
    if source.startswith(("http://", "https://")):
        try:
            response = requests.get(source, timeout=timeout_s, allow_redirects=False, stream=True)
            body = response.raw.read(MAX_KEY_DOCUMENT_BYTES + 1, decode_content=True)
        except requests.RequestException as exc:
            raise KeySetError(f"the key set at {source} cannot be fetched ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise KeySetError(f"the key set at {source} answered HTTP {response.status_code}")
    else:
        try:
            with open(source, "rb") as handle:
                body = handle.read(MAX_KEY_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise KeySetError(f"{source}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(body) > MAX_KEY_DOCUMENT_BYTES:
        raise KeySetError(f"{source}: larger than {MAX_KEY_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(body)
    except ValueError:
        raise KeySetError(f"{source}: not JSON") from None
    if not isinstance(document, dict):
        raise KeySetError(f"{source}: not a JSON object")
    return document


def key_document(receipts: PublicKeys | None, checkpoints: PublicKeys | None) -> dict[str, list[dict[str, str]]]:
    """The published key set (see the module docstring): the receipt keys in ``keys`` and the
    checkpoint keys in ``checkpoint_keys`` (each list empty when that kind is off)."""
    return {
        "keys": receipts.jwks() if receipts is not None else [],
        "checkpoint_keys": checkpoints.jwks() if checkpoints is not None else [],
    }
