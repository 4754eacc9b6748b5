"""Authentication of callers: bearer JWT -> ``Subject`` (DESIGN §2 step 2, §7).

``TokenVerifier(settings).verify(authorization)`` takes **every** ``Authorization`` header
value of the request (``request.headers.getlist("Authorization")``) and returns a
``Subject(id, tenant, roles)`` built from verified claims only (``app.auth.claims``).

Errors: ``Unauthenticated`` (401) for every rejected request, one generic safe message, the
specific reason in ``log_detail`` only (never the token); ``DependencyUnavailable`` (503,
retryable) when the JWKS endpoint cannot be reached and no cached key set (fresh, or
last-known-good within ``jwt_jwks_grace_s``) can serve the request; ``SettingsError`` from the
constructor when the key configuration is unusable (an HS256 secret that is really a public
key, a PEM key whose family has no allowed algorithm, no key at all for the allowed
algorithms). No other exception escapes ``verify``: anything raised by PyJWT or by parsing
(``PyJWTError``, ``TypeError``, ``ValueError``, ``OverflowError``, ``KeyError``,
``UnicodeDecodeError``, ``binascii.Error``, ``RecursionError`` ...) becomes ``Unauthenticated``.

Checks, in order (cheap and structural first, RFC 8725 §3):

1. Exactly one ``Authorization`` header; its value at most ``max_authorization_bytes``
   (checked before any decoding or signature work) and ASCII.
2. Scheme ``Bearer``, case-insensitive (RFC 7235 §2.1, RFC 6750 §2.1), then one or more spaces
   and a non-empty token without spaces.
3. JWS compact serialization (``app.auth.jws``).
4. JOSE header (RFC 7515 §4): a JSON object without duplicate names; ``alg`` a string in the
   explicit allow-list ``jwt_algorithms`` (RFC 8725 §3.1, never ``none``); ``kid`` a non-empty
   string when present; any ``crit`` or ``b64`` -> rejected (RFC 7515 §4.1.11: we understand no
   extension); ``typ`` absent or a JWT / access-token JWT type (RFC 8725 §3.11, RFC 9068 §2.1);
   ``x5u``, ``jku``, ``x5c`` and ``jwk`` are ignored and never fetched or trusted (RFC 8725 §3.10).
5. Key selection by algorithm family (``app.auth.keys``). Keys come from the JWKS at
   ``jwt_jwks_url`` (``app.auth.jwks``; selected by ``kid``, which is then required; a JWK
   ``alg`` member must equal the token's ``alg``; ``use`` must be ``sig`` when present) or from
   the PEM ``jwt_public_key``.
6. Signature and registered claims with PyJWT (RFC 7519 §4.1): required ``jwt_required_claims``
   (at least ``exp``, ``iss``, ``aud``, ``sub``); ``iat``/``nbf`` honoured when present; leeway
   ``jwt_leeway_s``; exact issuer match (RFC 8725 §3.8); audience must contain ``jwt_audience``
   (RFC 8725 §3.9); RSA keys must be >= 2048 bits.
7. The payload parses strictly too (no duplicate member names: PyJWT keeps the last one, which
   could smuggle a second tenant or roles claim), and our own claim checks on top
   (``app.auth.claims``: types, plausible dates, required claims, identity text).

A token that passed checks 4-7 is remembered for ``jwt_verified_cache_s`` (``app.auth.token_cache``;
by its SHA-256; never past its ``exp``, nor past the lifespan of the JWKS set whose key
verified it), so the same caller's next requests skip the signature work; checks 1-3 run on
every request and rejected tokens are never remembered.

Sources: RFC 7519 (JWT), RFC 7515 (JWS), RFC 7517 (JWK), RFC 7518 (JWA), RFC 6750 (Bearer),
RFC 7235 §2.1, RFC 8725 (JWT BCP), RFC 9068 (JWT access tokens).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import jwt

from app.auth import jws
from app.auth.claims import ClaimRules
from app.auth.jwks import JwksCache
from app.auth.keys import hmac_secret_problem, key_family, key_fits, load_pem_public_key
from app.auth.rejection import exception_text, reject
from app.auth.token_cache import VerifiedTokenCache
from app.errors import ToolgateError
from app.jwa import ALG_FAMILY
from app.models import Subject
from app.settings import JwtSettings, SettingsError

#: Accepted ``typ`` header values, compared case-insensitively (RFC 8725 §3.11, RFC 9068 §2.1).
_ACCEPTED_TYP = {"jwt", "application/jwt", "at+jwt", "application/at+jwt"}

#: PyJWT's checks (RFC 7519 §4.1): iat/nbf are checked when present; ``require`` is set per
#: verifier from ``jwt_required_claims``.
_PYJWT_OPTIONS: dict[str, Any] = {
    "verify_signature": True,
    "verify_exp": True,
    "verify_nbf": True,
    "verify_iat": True,
    "verify_aud": True,
    "verify_iss": True,
    "verify_sub": True,
    "verify_jti": True,
    "strict_aud": False,
    "enforce_minimum_key_length": True,
}


class TokenVerifier:
    """Verifies bearer JWTs and builds the ``Subject``. Build once per worker; thread-safe.

    ``TokenVerifier(settings)`` raises ``SettingsError`` for an unusable key configuration.
    ``verify(authorization: list[str]) -> Subject`` raises ``Unauthenticated`` or
    ``DependencyUnavailable`` (see the module docstring for every rule).
    """

    def __init__(self, settings: JwtSettings, *, jwks_cache: JwksCache | None = None) -> None:
        self._algorithms = frozenset(settings.jwt_algorithms)
        self._issuer = settings.jwt_issuer
        self._audience = settings.jwt_audience
        self._leeway = settings.jwt_leeway_s
        self._max_authorization = settings.max_authorization_bytes
        self._claims = ClaimRules(
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            tenant_claim=settings.jwt_tenant_claim,
            roles_claim=settings.jwt_roles_claim,
            required=tuple(settings.jwt_required_claims),
            max_lifetime_s=settings.jwt_max_lifetime_s,
        )
        self._options = {**_PYJWT_OPTIONS, "require": list(settings.jwt_required_claims)}
        self._jwt = jwt.PyJWT()
        asymmetric = self._algorithms & ALG_FAMILY.keys()
        public_key_text = settings.jwt_public_key.get_secret_value() if settings.jwt_public_key else None

        self._hmac_key: bytes | None = None
        secret = settings.hs256_secret
        if "HS256" in self._algorithms and secret is not None:
            problem = hmac_secret_problem(secret, public_key_text)
            if problem:
                raise SettingsError(problem)
            self._hmac_key = secret.encode("utf-8")

        self._pem_key: Any = None
        self.jwks: JwksCache | None = None
        if public_key_text is not None:
            try:
                self._pem_key = load_pem_public_key(public_key_text)
            except Exception as exc:  # noqa: BLE001
                raise SettingsError(f"jwt_public_key is not a usable PEM public key: {type(exc).__name__}") from None
            if not any(key_fits(alg, self._pem_key) for alg in asymmetric):
                raise SettingsError(
                    f"jwt_public_key is a {key_family(self._pem_key)} key but jwt_algorithms "
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
            raise reject(f"token rejected: {exception_text(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - TypeError, ValueError, binascii.Error, ...
            raise reject(f"malformed token: {exception_text(exc)}") from None

    def _verify(self, authorization: Sequence[str]) -> Subject:
        token = self._bearer_token(authorization)
        subject = self._verified.get(token)
        if subject is not None:
            return subject

        header = jws.parse_json_object(jws.b64url_decode(token.split(".", 1)[0]), "JOSE header")
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
            options=self._options,  # type: ignore[arg-type]
            audience=self._audience,
            issuer=self._issuer,
            leeway=self._leeway,
        )
        # PyJWT's json.loads keeps the last of duplicate member names, so a payload could
        # smuggle a second "tenant" or "roles"; the signed segment must parse strictly too.
        jws.parse_json_object(jws.b64url_decode(token.split(".")[1]), "JWT payload")
        subject = self._claims.subject(decoded["payload"], time.time())
        self._verified.put(token, subject, decoded["payload"]["exp"], trusted_until)
        return subject

    def _bearer_token(self, authorization: Sequence[str]) -> str:
        """Checks 1-3: the one bearer token of the request, in JWS compact form."""
        if isinstance(authorization, (str, bytes)) or not isinstance(authorization, Sequence):
            raise reject("authorization must be the list of header values")
        if not authorization:
            raise reject("no Authorization header", presented=False)
        if len(authorization) != 1:
            raise reject(f"expected exactly one Authorization header, got {len(authorization)}")
        value = authorization[0]
        if not isinstance(value, str):
            raise reject("Authorization header value is not a string")
        # Size before any decoding or signature work (CVE-2025-30204 class of amplification).
        if len(value) > self._max_authorization:
            raise reject(f"Authorization header is {len(value)} characters, limit {self._max_authorization}")
        if not value.isascii():
            raise reject("Authorization header is not ASCII")
        scheme, _, credentials = value.strip(" \t").partition(" ")
        if scheme.lower() != "bearer":
            raise reject("authorization scheme is not Bearer")
        token = credentials.lstrip(" ")
        if not token:
            raise reject("empty bearer token")
        if not jws.COMPACT_JWS.fullmatch(token):
            raise reject("bearer token is not a JWS compact serialization with three base64url segments")
        return token

    def _check_header(self, header: dict[str, Any]) -> str:
        """JOSE header rules (RFC 7515 §4, RFC 8725 §3.1, §3.10, §3.11). Returns ``alg``."""
        if "crit" in header:
            raise reject("crit header present; no extension is understood")
        if "b64" in header:
            raise reject("b64 header present (RFC 7797 unencoded payload is not accepted)")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            raise reject(f"alg {alg!r} is not in the allow-list")
        if "kid" in header and (not isinstance(header["kid"], str) or not header["kid"]):
            raise reject("kid header is not a non-empty string")
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in _ACCEPTED_TYP):
            raise reject(f"typ {typ!r} is not a JWT type")
        # x5u / jku / x5c / jwk are deliberately ignored: keys come from configuration only.
        return alg

    def _select_key(self, alg: str, kid: str | None) -> Any:
        """The configured key for ``alg`` (and ``kid``); never a key of another family."""
        if alg == "HS256":
            if self._hmac_key is None:
                raise reject("HS256 token but no HS256 secret is configured")
            return self._hmac_key
        if self._pem_key is not None:
            if not key_fits(alg, self._pem_key):
                raise reject(f"alg {alg} does not match the configured {key_family(self._pem_key)} key")
            return self._pem_key
        if self.jwks is None:
            raise reject(f"alg {alg} but no public key is configured")
        if kid is None:
            raise reject("kid header is required with a JWKS")
        candidates = self.jwks.get_keys(kid)
        if not candidates:
            raise reject(f"no JWKS key for kid {kid[:64]!r}")
        for candidate in candidates:
            if candidate.alg in (None, alg) and key_fits(alg, candidate.key):
                return candidate.key
        raise reject(f"JWKS key {kid[:64]!r} is not usable with alg {alg}")
