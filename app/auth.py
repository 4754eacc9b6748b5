"""Authentication of callers: bearer JWT -> ``Subject`` (DESIGN §2 step 2, §7).

Shapes
------
``TokenVerifier(settings).verify(authorization)`` takes **every** ``Authorization`` header
value of the request (``request.headers.getlist("Authorization")``) and returns a
``app.models.Subject(id, tenant, roles)`` built from verified claims only:

* ``id``     <- ``sub`` (non-empty string, required)
* ``tenant`` <- claim ``settings.jwt_tenant_claim`` (non-empty string, required)
* ``roles``  <- claim ``settings.jwt_roles_claim``: a list of strings or one space-separated
  string (OAuth ``scope`` style); missing or ``null`` -> ``()``.

Errors
------
* ``app.errors.Unauthenticated`` (401) for every rejected request. The message is one generic,
  safe text; the specific reason is in ``log_detail`` only (never the token itself).
* ``app.errors.DependencyUnavailable`` (503, retryable) when the JWKS endpoint cannot be
  reached and no cached key set (fresh, or last-known-good within ``jwt_jwks_grace_s``) can
  serve the request.
* ``app.settings.SettingsError`` from the constructor when the key configuration is unusable
  (an HS256 secret that is really a public key, a PEM key whose family has no allowed
  algorithm, no key at all for the allowed algorithms).
No other exception escapes ``verify``: anything raised by PyJWT or by parsing
(``PyJWTError``, ``TypeError``, ``ValueError``, ``OverflowError``, ``KeyError``,
``UnicodeDecodeError``, ``binascii.Error``, ``RecursionError`` ...) becomes ``Unauthenticated``.

Checks, in order (cheap and structural first, RFC 8725 §3)
----------------------------------------------------------
1. Exactly one ``Authorization`` header; its value at most ``settings.max_authorization_bytes``
   (checked before any decoding or signature work) and ASCII.
2. Scheme ``Bearer``, case-insensitive (RFC 7235 §2.1, RFC 6750 §2.1), then one or more spaces
   and a non-empty token without spaces.
3. JWS Compact Serialization with exactly three non-empty base64url segments, no padding
   (RFC 7515 §3.1, §7.1). So the detached / unencoded-payload form (RFC 7797) never passes.
4. JOSE header (RFC 7515 §4): a JSON object without duplicate names; ``alg`` a string in the
   explicit allow-list ``settings.jwt_algorithms`` (RFC 8725 §3.1, never ``none``); ``kid`` a
   non-empty string when present; any ``crit`` or ``b64`` -> rejected (RFC 7515 §4.1.11: we
   understand no extension); ``typ`` absent or a JWT / access-token JWT type (RFC 8725 §3.11,
   RFC 9068 §2.1); ``x5u``, ``jku``, ``x5c`` and ``jwk`` are ignored and never fetched or
   trusted (RFC 8725 §3.10).
5. Key selection by algorithm family, so no key is ever used with another algorithm
   (RFC 8725 §2.1, §3.1, algorithm confusion):
   ``HS256`` -> only ``settings.hs256_secret`` (>= 32 bytes, and never a PEM/DER/SSH/JWK
   public key); ``RS*``/``PS*`` -> RSA keys; ``ES256/384/512`` -> EC keys on P-256/384/521;
   ``EdDSA`` -> Ed25519/Ed448 keys. Keys come from the JWKS at ``settings.jwt_jwks_url``
   (selected by ``kid``, which is then required; a JWK ``alg`` member must equal the token's
   ``alg``; ``use`` must be ``sig`` when present) or from the PEM ``settings.jwt_public_key``.
6. Signature and registered claims with PyJWT (RFC 7519 §4.1): required ``exp``, ``iss``,
   ``aud``, ``sub``; ``iat``/``nbf`` honoured when present; leeway ``settings.jwt_leeway_s``;
   exact issuer match (RFC 8725 §3.8); audience must contain ``settings.jwt_audience``
   (RFC 8725 §3.9); RSA keys must be >= 2048 bits.
7. Our own type checks on top: ``exp``/``iat``/``nbf`` must be JSON numbers (not bools, not
   strings, finite: RFC 7519 §2 NumericDate; PyJWT alone accepts ``"1700000000"``), ``sub``
   and the tenant claim non-empty strings, roles as described above.

JWKS caching (``JwksCache``)
----------------------------
One fetch serves every thread until the set is ``settings.jwt_jwks_cache_s`` old; there is no
per-kid cache, so a key removed from the JWKS stops verifying when the cached set expires. An
unknown ``kid`` triggers at most one refetch per ``settings.jwt_jwks_refetch_cooldown_s``
(measured from the last fetch attempt of any kind, across threads). A failed refresh keeps the
last-known-good set for ``settings.jwt_jwks_grace_s`` past its expiry; after a failed fetch
the next attempt waits ``failure_backoff_s`` so an outage does not turn every request into an
HTTP call. Fetches use PyJWT's ``PyJWKClient`` (no redirects, http(s) only) with timeout
``settings.jwt_jwks_timeout_ms`` and parse keys with ``PyJWK``.

Verified tokens (``app.token_cache``)
------------------------------------
A token that passed checks 4-7 is remembered for ``settings.jwt_verified_cache_s`` (by its
SHA-256; never past its ``exp``, nor past the lifespan of the JWKS set whose key verified it),
so the same caller's next requests skip the signature work; checks 1-3 run on every request
and rejected tokens are never remembered.

``mint_dev_token`` issues HS256 development tokens (``toolgate token``), refused in production.

Sources: RFC 7519 (JWT), RFC 7515 (JWS), RFC 7517 (JWK), RFC 7518 (JWA), RFC 6750 (Bearer),
RFC 7235 §2.1, RFC 8725 (JWT BCP), RFC 9068 (JWT access tokens).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt import PyJWK, PyJWKClient
from jwt.algorithms import HMACAlgorithm

from app import metrics
from app.errors import DependencyUnavailable, ToolgateError, Unauthenticated
from app.models import Subject
from app.settings import Settings, SettingsError
from app.token_cache import VerifiedTokenCache

log = logging.getLogger(__name__)

__all__ = ["JwksCache", "JwksKey", "TokenVerifier", "mint_dev_token"]

#: JWS compact form: three non-empty base64url segments without padding (RFC 7515 §3.1, §2).
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")

#: Accepted ``typ`` header values, compared case-insensitively (RFC 8725 §3.11, RFC 9068 §2.1).
_ACCEPTED_TYP = {"jwt", "application/jwt", "at+jwt", "application/at+jwt"}

#: Which key family an asymmetric algorithm needs (RFC 7518 §3.1, RFC 8037 §3.1).
_ALG_FAMILY = {
    "RS256": "RSA", "RS384": "RSA", "RS512": "RSA",
    "PS256": "RSA", "PS384": "RSA", "PS512": "RSA",
    "ES256": "EC", "ES384": "EC", "ES512": "EC",
    "EdDSA": "OKP",
}  # fmt: skip
_EC_CURVE = {"ES256": ec.SECP256R1, "ES384": ec.SECP384R1, "ES512": ec.SECP521R1}

#: Claims PyJWT must find (RFC 7519 §4.1); iat/nbf are checked when present.
_REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]
_PYJWT_OPTIONS: dict[str, Any] = {
    "verify_signature": True,
    "verify_exp": True,
    "verify_nbf": True,
    "verify_iat": True,
    "verify_aud": True,
    "verify_iss": True,
    "verify_sub": True,
    "verify_jti": True,
    "require": _REQUIRED_CLAIMS,
    "strict_aud": False,
    "enforce_minimum_key_length": True,
}

_MIN_HS256_SECRET_BYTES = 32
_LOG_DETAIL_MAX = 300


def _reject(reason: str) -> Unauthenticated:
    """The one 401 error; ``reason`` goes to ``log_detail`` only (truncated, never the token)."""
    return Unauthenticated(log_detail=reason[:_LOG_DETAIL_MAX])


def _exc_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_LOG_DETAIL_MAX]


def _key_family(key: Any) -> str | None:
    """``RSA`` / ``EC`` / ``OKP`` for a *public* key object, else None (private keys, bytes)."""
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "EC"
    if isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        return "OKP"
    return None


def _key_fits(alg: str, key: Any) -> bool:
    """True when ``key`` is a public key of the family (and EC curve) that ``alg`` needs."""
    family = _ALG_FAMILY.get(alg)
    if family is None or _key_family(key) != family:
        return False
    if family == "EC":
        return isinstance(key.curve, _EC_CURVE[alg])
    return True


def _b64url_decode(segment: str) -> bytes:
    """Decode one unpadded base64url segment (RFC 7515 §2). Raises ``binascii.Error``."""
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for name, value in pairs:
        if name in obj:  # RFC 7515 §4: reject duplicate Header Parameter names
            raise ValueError(f"duplicate member {name!r}")
        obj[name] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _parse_json_object(data: bytes, what: str) -> dict[str, Any]:
    """Strict UTF-8 JSON object: no duplicate names, no NaN/Infinity. Raises ValueError."""
    value = json.loads(
        data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_reject_constant
    )
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def _numeric_date(payload: dict[str, Any], name: str) -> None:
    """RFC 7519 §2 NumericDate: a finite JSON number (bools and numeric strings refused)."""
    value = payload[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _reject(f"claim {name} is not a number ({type(value).__name__})")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        raise _reject(f"claim {name} is not finite")


@dataclass(frozen=True)
class JwksKey:
    """One usable verification key from the JWKS: its ``kid``, the JWK ``alg`` member (or
    None when the JWK does not restrict it) and the public key object."""

    kid: str
    alg: str | None
    key: Any


@dataclass(frozen=True)
class _Snapshot:
    keys: dict[str, tuple[JwksKey, ...]]
    fetched_at: float


_EMPTY = _Snapshot(keys={}, fetched_at=float("-inf"))


class JwksCache:
    """The JWKS of the issuer, cached as one whole set (no per-kid cache).

    ``get_keys(kid) -> tuple[JwksKey, ...]`` (empty when the kid is unknown). Raises
    ``DependencyUnavailable`` when no set is usable: never fetched successfully, or expired
    beyond ``grace_s`` while the endpoint fails.

    Timing (all in seconds, ``clock`` is monotonic):

    * a set is fresh for ``lifespan_s`` after its fetch; an expired set is refreshed by the
      first request that needs it (one thread fetches, the others wait on the lock and reuse
      its result);
    * an unknown ``kid`` refetches only when no fetch was attempted in the last
      ``refetch_cooldown_s`` (so a flood of random kids costs at most one fetch per period);
    * a failed fetch keeps the last-known-good set usable until ``lifespan_s + grace_s`` after
      its fetch, and blocks further expiry-driven attempts for ``failure_backoff_s``.

    ``fetch_count`` counts fetch attempts (successful or not); ``last_error`` keeps the text of
    the last failed fetch. Thread-safe. JWKS sources: RFC 7517 §5; pyjwt #1051 (unbounded
    per-kid cache), #1162 (cache wiped on failure).
    """

    def __init__(
        self,
        url: str,
        *,
        lifespan_s: float,
        refetch_cooldown_s: float,
        timeout_s: float,
        grace_s: float,
        failure_backoff_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        fetcher: Callable[[], Any] | None = None,
    ) -> None:
        if lifespan_s <= 0 or refetch_cooldown_s < 0 or grace_s < 0 or timeout_s <= 0:
            raise ValueError("JWKS cache timings must be positive")
        self.url = url
        self.lifespan_s = float(lifespan_s)
        self.refetch_cooldown_s = float(refetch_cooldown_s)
        self.grace_s = float(grace_s)
        self.failure_backoff_s = float(failure_backoff_s)
        self._clock = clock
        if fetcher is None:
            client = PyJWKClient(
                url,
                cache_keys=False,
                cache_jwk_set=False,
                timeout=timeout_s,
                headers={"Accept": "application/json", "User-Agent": "toolgate"},
            )
            fetcher = client.fetch_data
        self._fetcher = fetcher
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._last_attempt_at: float | None = None
        self._retry_not_before = float("-inf")
        self.fetch_count = 0
        self.last_error: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **kw: Any) -> JwksCache:
        """Build from ``jwt_jwks_url``, ``jwt_jwks_cache_s``, ``jwt_jwks_refetch_cooldown_s``,
        ``jwt_jwks_timeout_ms`` and ``jwt_jwks_grace_s``."""
        if not settings.jwt_jwks_url:
            raise SettingsError("jwt_jwks_url is not set")
        return cls(
            settings.jwt_jwks_url,
            lifespan_s=settings.jwt_jwks_cache_s,
            refetch_cooldown_s=settings.jwt_jwks_refetch_cooldown_s,
            timeout_s=settings.jwt_jwks_timeout_ms / 1000.0,
            grace_s=settings.jwt_jwks_grace_s,
            **kw,
        )

    def get_keys(self, kid: str) -> tuple[JwksKey, ...]:
        """Keys published under ``kid`` (usually one). See the class docstring for timing."""
        snapshot = self._usable_snapshot()
        found = snapshot.keys.get(kid)
        if found:
            return found
        return self._refetch_for_unknown(kid).keys.get(kid, ())

    def fresh_for_s(self) -> float:
        """Seconds until the current key set expires (<= 0: expired, or never fetched)."""
        snapshot = self._snapshot
        return float("-inf") if snapshot is None else snapshot.fetched_at + self.lifespan_s - self._clock()

    def _is_fresh(self, snapshot: _Snapshot | None, now: float) -> bool:
        return snapshot is not None and now - snapshot.fetched_at < self.lifespan_s

    def _usable_snapshot(self) -> _Snapshot:
        snapshot = self._snapshot  # one atomic read; snapshots are immutable
        if self._is_fresh(snapshot, self._clock()):
            return snapshot  # type: ignore[return-value]
        with self._lock:
            now = self._clock()
            snapshot = self._snapshot
            if self._is_fresh(snapshot, now):
                return snapshot  # type: ignore[return-value]  # another thread refreshed it
            if now >= self._retry_not_before:
                fresh = self._fetch(now)
                if fresh is not None:
                    return fresh
            if snapshot is not None and now - snapshot.fetched_at < self.lifespan_s + self.grace_s:
                log.warning(
                    "JWKS refresh failed; serving the last-known-good key set",
                    extra={"event": "jwks_stale", "age_s": round(now - snapshot.fetched_at, 3)},
                )
                return snapshot
            raise DependencyUnavailable(log_detail=f"JWKS unavailable: {self.last_error}")

    def _refetch_for_unknown(self, kid: str) -> _Snapshot:
        with self._lock:
            now = self._clock()
            snapshot = self._snapshot or _EMPTY
            if kid in snapshot.keys:
                return snapshot  # another thread's fetch brought it in
            last = self._last_attempt_at
            if last is not None and now - last < self.refetch_cooldown_s:
                return snapshot  # cooling down: at most one refetch per period
            return self._fetch(now) or snapshot

    def _fetch(self, now: float) -> _Snapshot | None:
        """One HTTP fetch (lock held). Returns the new snapshot, or None on any failure."""
        self.fetch_count += 1
        self._last_attempt_at = now
        try:
            keys = self._index(self._fetcher())
        except Exception as exc:  # noqa: BLE001 - any failure keeps the last-known-good set
            self._retry_not_before = now + self.failure_backoff_s
            self.last_error = _exc_text(exc)
            log.warning("JWKS fetch failed: %s", self.last_error, extra={"event": "jwks_fetch_failed"})
            metrics.JWKS_FETCHES.labels("error").inc()
            return None
        metrics.JWKS_FETCHES.labels("ok").inc()
        self.last_error = None
        self._retry_not_before = float("-inf")
        snapshot = _Snapshot(keys=keys, fetched_at=self._clock())
        self._snapshot = snapshot
        return snapshot

    @staticmethod
    def _index(data: Any) -> dict[str, tuple[JwksKey, ...]]:
        """Usable signature keys of a JWK Set document, by kid. Raises ValueError if none."""
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise ValueError("JWKS document is not an object with a 'keys' list")
        index: dict[str, list[JwksKey]] = {}
        for jwk_data in data["keys"]:
            if not isinstance(jwk_data, dict):
                continue
            kid, alg = jwk_data.get("kid"), jwk_data.get("alg")
            use, key_ops = jwk_data.get("use"), jwk_data.get("key_ops")
            if not isinstance(kid, str) or not kid or jwk_data.get("kty") == "oct":
                continue
            if use not in (None, "sig"):
                continue  # RFC 7517 §4.2: only signature keys
            if key_ops is not None and (not isinstance(key_ops, list) or "verify" not in key_ops):
                continue  # RFC 7517 §4.3
            if alg is not None and alg not in _ALG_FAMILY:
                continue
            try:
                key = PyJWK(jwk_data).key  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - skip unusable keys, like PyJWKSet does
                continue
            if _key_family(key) is None or (alg is not None and not _key_fits(alg, key)):
                continue  # private or symmetric material, or alg/kty mismatch
            index.setdefault(kid, []).append(JwksKey(kid=kid, alg=alg, key=key))
        if not index:
            raise ValueError("JWKS contains no usable signature keys")
        return {kid: tuple(keys) for kid, keys in index.items()}


def _load_pem_public_key(text: str) -> Any:
    """A PEM public key (SPKI or PKCS#1) or X.509 certificate -> public key object."""
    if "\\n" in text and "\n" not in text.strip():
        text = text.replace("\\n", "\n")  # environment variables often carry escaped newlines
    data = text.strip().encode("ascii") + b"\n"
    if b"-----BEGIN CERTIFICATE-----" in data:
        key = x509.load_pem_x509_certificate(data).public_key()
    else:
        key = serialization.load_pem_public_key(data)
    if _key_family(key) is None:
        raise ValueError(f"unsupported public key type {type(key).__name__}")
    return key


def _identity_text(value: Any) -> bool:
    """A subject, tenant or role: 1-256 printable characters that are valid Unicode (no lone
    surrogates), so it can be logged, hashed (RFC 8785) and stored."""
    if not isinstance(value, str) or not 0 < len(value) <= 256 or not value.isprintable():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class TokenVerifier:
    """Verifies bearer JWTs and builds the ``Subject``. Build once per worker; thread-safe.

    ``TokenVerifier(settings)`` raises ``SettingsError`` for an unusable key configuration.
    ``verify(authorization: list[str]) -> Subject`` raises ``Unauthenticated`` or
    ``DependencyUnavailable`` (see the module docstring for every rule).
    """

    def __init__(self, settings: Settings, *, jwks_cache: JwksCache | None = None) -> None:
        self._settings = settings
        self._algorithms = frozenset(settings.jwt_algorithms)
        self._issuer = settings.jwt_issuer
        self._audience = settings.jwt_audience
        self._leeway = settings.jwt_leeway_s
        self._max_authorization = settings.max_authorization_bytes
        self._tenant_claim = settings.jwt_tenant_claim
        self._roles_claim = settings.jwt_roles_claim
        self._jwt = jwt.PyJWT()
        asymmetric = self._algorithms & _ALG_FAMILY.keys()

        self._hmac_key: bytes | None = None
        secret = settings.hs256_secret
        if "HS256" in self._algorithms and secret is not None:
            self._hmac_key = self._check_hmac_secret(secret, settings)

        self._pem_key: Any = None
        self.jwks: JwksCache | None = None
        if settings.jwt_public_key is not None:
            try:
                self._pem_key = _load_pem_public_key(settings.jwt_public_key.get_secret_value())
            except Exception as exc:  # noqa: BLE001
                raise SettingsError(f"jwt_public_key is not a usable PEM public key: {type(exc).__name__}") from None
            if not any(_key_fits(alg, self._pem_key) for alg in asymmetric):
                raise SettingsError(
                    f"jwt_public_key is a {_key_family(self._pem_key)} key but jwt_algorithms "
                    f"{sorted(self._algorithms)} allows no algorithm for it"
                )
        elif settings.jwt_jwks_url:
            self.jwks = jwks_cache or JwksCache.from_settings(settings)

        self._verified = VerifiedTokenCache(settings.jwt_verified_cache_bytes, settings.jwt_verified_cache_s, self._leeway)

        has_asymmetric_source = self._pem_key is not None or (self.jwks is not None and asymmetric)
        if self._hmac_key is None and not has_asymmetric_source:
            raise SettingsError(
                f"no verification key for jwt_algorithms {sorted(self._algorithms)}: set "
                "TOOLGATE_JWT_JWKS_URL, TOOLGATE_JWT_PUBLIC_KEY or TOOLGATE_JWT_HS256_SECRET"
            )

    @staticmethod
    def _check_hmac_secret(secret: str, settings: Settings) -> bytes:
        """The HS256 key: >= 32 bytes and never asymmetric key material (RFC 8725 §2.1, §3.5)."""
        key = secret.encode("utf-8")
        if len(key) < _MIN_HS256_SECRET_BYTES:
            raise SettingsError("the HS256 secret must be at least 32 bytes")
        try:
            HMACAlgorithm(HMACAlgorithm.SHA256).prepare_key(key)  # refuses PEM, SSH, DER, JWK
        except jwt.InvalidKeyError as exc:
            raise SettingsError(f"the HS256 secret is refused: {exc}") from None
        if "-----BEGIN" in secret or (
            settings.jwt_public_key is not None
            and secret.strip() == settings.jwt_public_key.get_secret_value().strip()
        ):
            raise SettingsError("the HS256 secret must not be a public key")
        return key

    def verify(self, authorization: Sequence[str]) -> Subject:
        """Authenticate one request from all of its ``Authorization`` header values.

        Returns the ``Subject``; raises ``Unauthenticated`` (401, reason in ``log_detail``) or
        ``DependencyUnavailable`` (503, JWKS down and nothing cached). Nothing else escapes.
        """
        try:
            return self._verify(authorization)
        except ToolgateError:
            raise
        except jwt.PyJWTError as exc:
            raise _reject(f"token rejected: {_exc_text(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - TypeError, ValueError, binascii.Error, ...
            raise _reject(f"malformed token: {_exc_text(exc)}") from None

    def _verify(self, authorization: Sequence[str]) -> Subject:
        if isinstance(authorization, (str, bytes)) or not isinstance(authorization, Sequence):
            raise _reject("authorization must be the list of header values")
        if len(authorization) != 1:
            raise _reject(f"expected exactly one Authorization header, got {len(authorization)}")
        value = authorization[0]
        if not isinstance(value, str):
            raise _reject("Authorization header value is not a string")
        # Size before any decoding or signature work (CVE-2025-30204 class of amplification).
        if len(value) > self._max_authorization:
            raise _reject(f"Authorization header is {len(value)} characters, limit {self._max_authorization}")
        if not value.isascii():
            raise _reject("Authorization header is not ASCII")
        scheme, _, credentials = value.strip(" \t").partition(" ")
        if scheme.lower() != "bearer":
            raise _reject("authorization scheme is not Bearer")
        token = credentials.lstrip(" ")
        if not token:
            raise _reject("empty bearer token")
        if not _COMPACT_JWS.fullmatch(token):
            raise _reject("bearer token is not a JWS compact serialization with three base64url segments")
        subject = self._verified.get(token)
        if subject is not None:
            return subject

        header = _parse_json_object(_b64url_decode(token.split(".", 1)[0]), "JOSE header")
        alg = self._check_header(header)
        # A JWKS key is trusted while its set is fresh. Taken before the key is picked, so a
        # refresh by another thread meanwhile cannot extend the trust of a removed key.
        jwks = self.jwks if alg != "HS256" and self._pem_key is None else None
        trusted_until = time.monotonic() + jwks.fresh_for_s() if jwks is not None else None
        key = self._select_key(alg, header.get("kid"))

        decoded = self._jwt.decode_complete(
            token,
            key=key,
            algorithms=[alg],
            options=_PYJWT_OPTIONS,  # type: ignore[arg-type]
            audience=self._audience,
            issuer=self._issuer,
            leeway=self._leeway,
        )
        subject = self._subject(decoded["payload"])
        self._verified.put(token, subject, decoded["payload"]["exp"], trusted_until)
        return subject

    def _check_header(self, header: dict[str, Any]) -> str:
        """JOSE header rules (RFC 7515 §4, RFC 8725 §3.1, §3.10, §3.11). Returns ``alg``."""
        if "crit" in header:
            raise _reject("crit header present; no extension is understood")
        if "b64" in header:
            raise _reject("b64 header present (RFC 7797 unencoded payload is not accepted)")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            raise _reject(f"alg {alg!r} is not in the allow-list")
        if "kid" in header and (not isinstance(header["kid"], str) or not header["kid"]):
            raise _reject("kid header is not a non-empty string")
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in _ACCEPTED_TYP):
            raise _reject(f"typ {typ!r} is not a JWT type")
        # x5u / jku / x5c / jwk are deliberately ignored: keys come from configuration only.
        return alg

    def _select_key(self, alg: str, kid: str | None) -> Any:
        """The configured key for ``alg`` (and ``kid``); never a key of another family."""
        if alg == "HS256":
            if self._hmac_key is None:
                raise _reject("HS256 token but no HS256 secret is configured")
            return self._hmac_key
        if self._pem_key is not None:
            if not _key_fits(alg, self._pem_key):
                raise _reject(f"alg {alg} does not match the configured {_key_family(self._pem_key)} key")
            return self._pem_key
        if self.jwks is None:
            raise _reject(f"alg {alg} but no public key is configured")
        if kid is None:
            raise _reject("kid header is required with a JWKS")
        candidates = self.jwks.get_keys(kid)
        if not candidates:
            raise _reject(f"no JWKS key for kid {kid[:64]!r}")
        for candidate in candidates:
            if candidate.alg in (None, alg) and _key_fits(alg, candidate.key):
                return candidate.key
        raise _reject(f"JWKS key {kid[:64]!r} is not usable with alg {alg}")

    def _subject(self, payload: dict[str, Any]) -> Subject:
        """Claims -> Subject, with the type checks PyJWT does not do (RFC 7519 §2, §4.1)."""
        for name in ("exp", "iat", "nbf"):
            if name in payload:
                _numeric_date(payload, name)
        if "exp" not in payload:
            raise _reject("claim exp is missing")
        if payload.get("iss") != self._issuer or not isinstance(payload.get("iss"), str):
            raise _reject("issuer mismatch")
        aud = payload.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud
        if not isinstance(audiences, list) or self._audience not in audiences:
            raise _reject("audience mismatch")
        sub = payload.get("sub")
        if not _identity_text(sub):
            raise _reject("claim sub is not a non-empty printable string of at most 256 characters")
        tenant = payload.get(self._tenant_claim)
        if not _identity_text(tenant):
            raise _reject(f"claim {self._tenant_claim!r} is not a non-empty printable string of at most 256 characters")
        roles = self._roles(payload.get(self._roles_claim))
        if not all(_identity_text(role) for role in roles):
            raise _reject(f"claim {self._roles_claim!r} holds a role that is not printable text")
        return Subject(id=sub, tenant=tenant, roles=roles)

    def _roles(self, raw: Any) -> tuple[str, ...]:
        if raw is None:
            return ()
        if isinstance(raw, str):
            return tuple(raw.split())
        if isinstance(raw, list) and all(isinstance(role, str) for role in raw):
            return tuple(role for role in raw if role)
        raise _reject(f"claim {self._roles_claim!r} is not a list of strings or a string")


def mint_dev_token(
    settings: Settings, *, sub: str, tenant: str, roles: list[str], ttl_s: int = 3600
) -> str:
    """An HS256 development token that this gateway accepts (``toolgate token``).

    Claims: ``iss``/``aud`` from settings, ``sub``, the tenant and roles claims named by
    settings, ``iat``, ``nbf``, ``exp = iat + ttl_s`` and a random ``jti``. Raises
    ``RuntimeError`` when ``settings.env == "production"``, when no HS256 secret is in force
    or HS256 is not in ``jwt_algorithms``; ``ValueError`` for empty ``sub``/``tenant``, a
    non-string role or a non-positive ``ttl_s``.
    """
    if settings.env == "production":
        raise RuntimeError("refusing to mint a development token when TOOLGATE_ENV=production")
    secret = settings.hs256_secret
    if secret is None:
        raise RuntimeError(
            "no HS256 secret is in force: set TOOLGATE_JWT_HS256_SECRET (or configure no JWKS "
            "URL / public key to use the development secret)"
        )
    if "HS256" not in settings.jwt_algorithms:
        raise RuntimeError("HS256 is not in TOOLGATE_JWT_ALGORITHMS; the gateway would reject the token")
    if not isinstance(sub, str) or not sub or not isinstance(tenant, str) or not tenant:
        raise ValueError("sub and tenant must be non-empty strings")
    if not isinstance(roles, (list, tuple)) or not all(isinstance(r, str) and r for r in roles):
        raise ValueError("roles must be a list of non-empty strings")
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int) or ttl_s <= 0:
        raise ValueError("ttl_s must be a positive integer")
    now = int(time.time())
    claims = {
        "iss": settings.jwt_issuer,
        "aud": settings.jwt_audience,
        "sub": sub,
        settings.jwt_tenant_claim: tenant,
        settings.jwt_roles_claim: list(roles),
        "iat": now,
        "nbf": now,
        "exp": now + ttl_s,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, secret, algorithm="HS256", headers={"typ": "JWT"})
