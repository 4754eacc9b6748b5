"""Development tokens (``toolgate token``): HS256, signed with the secret in force, refused in
production."""

from __future__ import annotations

import time
import uuid

import jwt

from app.settings import JwtSettings


def mint_dev_token(
    settings: JwtSettings, *, sub: str, tenant: str, roles: list[str], ttl_s: int = 3600
) -> str:
    """An HS256 development token that this gateway accepts (``toolgate token``).

    Claims: ``iss``/``aud`` from settings, ``sub``, the tenant and roles claims named by
    settings, ``iat``, ``nbf``, ``exp = iat + ttl_s`` and a random ``jti``. Raises
    ``RuntimeError`` when ``settings.env == "production"``, when no HS256 secret is in force
    or HS256 is not in ``jwt_algorithms``; ``ValueError`` for empty ``sub``/``tenant``, a
    non-string role, a non-positive ``ttl_s`` or one above ``jwt_max_lifetime_s``.
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
    if ttl_s > settings.jwt_max_lifetime_s:
        raise ValueError(f"ttl_s is above TOOLGATE_JWT_MAX_LIFETIME_S ({settings.jwt_max_lifetime_s}); the gateway would reject the token")
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
