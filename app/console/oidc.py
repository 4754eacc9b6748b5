"""Console sign-in through the identity provider: OpenID Connect authorization code flow with
PKCE (S256), a ``state`` and a ``nonce``; Authlib's ``OAuth2Session`` does the OAuth 2.0 part,
PyJWT checks the ID token (signature by the provider's JWKS, ``iss``, ``aud`` = the client id,
``exp``, the ``nonce``). The subject, tenant and roles come from the ID token's claims, named
as for bearer tokens (``TOOLGATE_JWT_TENANT_CLAIM``, ``TOOLGATE_JWT_ROLES_CLAIM``).

Errors: ``SignInFailed`` (the sign-in is refused: a safe message for the page, the detail for
the log), ``DependencyUnavailable`` (503) when the provider cannot be reached.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import jwt
import requests
from authlib.integrations.requests_client import OAuth2Session

from app.auth.claims import ClaimRules
from app.errors import DependencyUnavailable, Unauthenticated
from app.models import Subject
from app.settings import Settings

_TIMEOUT_S = 5
_DISCOVERY_TTL_S = 300


class SignInFailed(Exception):
    """The sign-in is refused; ``str(exc)`` is for the log only."""


@dataclass(frozen=True)
class LoginState:
    """What the browser carries from the login redirect to the callback (in a short-lived
    HttpOnly cookie): state, nonce and the PKCE code verifier."""

    state: str
    nonce: str
    code_verifier: str

    def encode(self) -> str:
        return ".".join((self.state, self.nonce, self.code_verifier))

    @classmethod
    def decode(cls, text: str | None) -> LoginState | None:
        parts = (text or "").split(".")
        return cls(*parts) if len(parts) == 3 and all(0 < len(p) <= 128 for p in parts) else None


class OidcClient:
    """The console's OpenID Connect client (build once per worker; thread-safe)."""

    def __init__(self, settings: Settings) -> None:
        assert settings.console_oidc_issuer and settings.console_oidc_client_id and settings.console_public_url
        self._issuer = settings.console_oidc_issuer.rstrip("/")
        self._client_id = settings.console_oidc_client_id
        self._client_secret = settings.console_oidc_client_secret.get_secret_value() if settings.console_oidc_client_secret else None
        self._scopes = settings.console_oidc_scopes
        self.redirect_uri = settings.console_public_url.rstrip("/") + "/console/oidc/callback"
        self._claims = ClaimRules(
            issuer=self._issuer, audience=self._client_id, tenant_claim=settings.jwt_tenant_claim,
            roles_claim=settings.jwt_roles_claim, required=("exp", "iat", "iss", "aud", "sub", "nonce"),
            max_lifetime_s=settings.jwt_max_lifetime_s,
        )
        self._leeway = settings.jwt_leeway_s
        self._lock = threading.Lock()
        self._discovery: dict[str, Any] | None = None
        self._discovered_at = 0.0
        self._jwks: jwt.PyJWKClient | None = None

    def _metadata(self) -> dict[str, Any]:
        with self._lock:
            if self._discovery is None or time.monotonic() - self._discovered_at > _DISCOVERY_TTL_S:
                try:
                    resp = requests.get(self._issuer + "/.well-known/openid-configuration", timeout=_TIMEOUT_S)
                    resp.raise_for_status()
                    metadata = resp.json()
                except (requests.RequestException, ValueError) as exc:
                    raise DependencyUnavailable(log_detail=f"OIDC discovery failed: {type(exc).__name__}") from None
                if metadata.get("issuer", "").rstrip("/") != self._issuer:
                    raise DependencyUnavailable(log_detail="OIDC discovery names another issuer")
                self._discovery, self._discovered_at = metadata, time.monotonic()
                self._jwks = jwt.PyJWKClient(metadata["jwks_uri"], cache_keys=True, timeout=_TIMEOUT_S)
            return self._discovery

    def _session(self) -> OAuth2Session:
        return OAuth2Session(
            self._client_id, self._client_secret, scope=self._scopes, redirect_uri=self.redirect_uri,
            code_challenge_method="S256", token_endpoint_auth_method="client_secret_post" if self._client_secret else "none",
        )

    def login(self) -> tuple[str, LoginState]:
        """The provider's authorization URL to redirect to, and the state to keep in a cookie."""
        metadata = self._metadata()
        login = LoginState(secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48))
        with self._session() as oauth:
            url, _ = oauth.create_authorization_url(
                metadata["authorization_endpoint"], state=login.state, nonce=login.nonce, code_verifier=login.code_verifier
            )
        return url, login

    def callback(self, login: LoginState | None, args: dict[str, str]) -> Subject:
        """Finish the sign-in: check ``state``, redeem the code with the PKCE verifier, verify
        the ID token and build the ``Subject``. Raises ``SignInFailed`` or
        ``DependencyUnavailable``."""
        if login is None or not secrets.compare_digest(args.get("state", ""), login.state):
            raise SignInFailed("state does not match the login")
        if "error" in args or not args.get("code"):
            raise SignInFailed(f"the provider refused: {args.get('error', 'no code')[:64]}")
        metadata = self._metadata()
        try:
            with self._session() as oauth:
                token = oauth.fetch_token(
                    metadata["token_endpoint"], code=args["code"], code_verifier=login.code_verifier, timeout=_TIMEOUT_S
                )
        except requests.RequestException as exc:
            raise DependencyUnavailable(log_detail=f"OIDC token endpoint failed: {type(exc).__name__}") from None
        except Exception as exc:  # noqa: BLE001 - Authlib's OAuthError and friends: a refused sign-in
            raise SignInFailed(f"code exchange refused: {type(exc).__name__}") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInFailed("no id_token in the token response")
        assert self._jwks is not None
        try:
            key = self._jwks.get_signing_key_from_jwt(id_token)
            claims = jwt.decode(
                id_token, key=key.key, algorithms=["RS256", "ES256", "EdDSA"], audience=self._client_id, issuer=self._issuer,
                leeway=self._leeway, options={"require": ["exp", "iat", "iss", "aud", "sub", "nonce"]},
            )
        except jwt.PyJWTError as exc:
            raise SignInFailed(f"id_token refused: {type(exc).__name__}") from None
        if not secrets.compare_digest(str(claims.get("nonce")), login.nonce):
            raise SignInFailed("id_token nonce does not match")
        try:
            return self._claims.subject(claims, time.time())
        except Unauthenticated as exc:
            raise SignInFailed(f"id_token claims refused: {exc.log_detail}") from None
