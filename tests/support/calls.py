"""Helpers for API tests: real signed tokens and decide bodies."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.support.keys import K1, KeyPair

ISSUER = "https://idp.test.local"
AUDIENCE = "policy-gateway"


def make_token(
    sub: str = "u-1",
    tenant: str = "acme",
    roles: list[str] | str | None = None,
    *,
    key: KeyPair = K1,
    ttl_s: int = 300,
    **claims: Any,
) -> str:
    """A real signed token (RS256 with k1 by default; pass ``key=EC1`` for ES256)."""
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": sub,
        "tenant": tenant,
        "roles": roles if roles is not None else [],
        "iat": now,
        "nbf": now,
        "exp": now + ttl_s,
        "jti": str(uuid.uuid4()),
        **claims,
    }
    return key.token(body)


def auth(sub: str = "u-1", tenant: str = "acme", roles: list[str] | str | None = None, **kw: Any) -> dict[str, str]:
    """``Authorization`` header dict for ``make_token(...)``."""
    return {"Authorization": f"Bearer {make_token(sub, tenant, roles, **kw)}"}


def decide_body(tool: str, tool_input: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A decide request body with a fresh tool_call_id."""
    return {"tool": tool, "version": "1", "tool_call_id": f"call-{uuid.uuid4().hex[:12]}", "input": tool_input, **extra}
