"""The verified-token cache (``app.token_cache``) on its own and inside ``TokenVerifier``:
real RS256/HS256 tokens, a real JWKS on loopback. Signature work is observed by counting the
verifier's PyJWT ``decode_complete`` calls (a counting wrapper around the real method)."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from app.auth import TokenVerifier
from app.errors import Unauthenticated
from app.models import Subject
from app.token_cache import VerifiedTokenCache
from tests.support.jwks_server import JwksServer
from tests.support.keys import K1, K2, baseline_claims, jwks
from tests.unit.test_auth import HS_SECRET_32, bearer, profile

ALICE = Subject(id="alice", tenant="acme", roles=("support_agent",))

def counting(verifier: TokenVerifier) -> list[int]:
    """Count the real signature verifications ``verifier`` performs from now on."""
    calls = [0]
    real = verifier._jwt.decode_complete

    def decode_complete(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    verifier._jwt.decode_complete = decode_complete  # type: ignore[method-assign]
    return calls

def test_a_remembered_token_returns_its_subject_until_ttl():
    cache = VerifiedTokenCache(16, ttl_s=0.2, leeway_s=0)
    cache.put("t1", ALICE, exp=time.time() + 3600)
    assert cache.get("t1") == ALICE
    assert cache.get("t2") is None
    time.sleep(0.25)
    assert cache.get("t1") is None

def test_an_entry_is_never_served_past_the_tokens_exp_plus_leeway():
    cache = VerifiedTokenCache(16, ttl_s=60, leeway_s=1)
    cache.put("t", ALICE, exp=time.time() - 0.5)  # inside the leeway
    assert cache.get("t") == ALICE
    cache.put("t", ALICE, exp=time.time() - 1.5)  # beyond it
    assert cache.get("t") is None

def test_trusted_for_caps_the_entry_and_a_spent_key_is_not_remembered():
    cache = VerifiedTokenCache(16, ttl_s=60, leeway_s=0)
    cache.put("short", ALICE, exp=time.time() + 3600, trusted_for_s=0.1)
    cache.put("spent", ALICE, exp=time.time() + 3600, trusted_for_s=-1)
    assert cache.get("short") == ALICE and cache.get("spent") is None
    time.sleep(0.15)
    assert cache.get("short") is None

def test_size_bound_and_off_switches():
    cache = VerifiedTokenCache(2, ttl_s=60, leeway_s=0)
    for token in ("a", "b", "c"):
        cache.put(token, ALICE, exp=time.time() + 3600)
    assert [cache.get(t) is not None for t in ("a", "b", "c")].count(True) == 2
    for off in (VerifiedTokenCache(0, ttl_s=60, leeway_s=0), VerifiedTokenCache(16, ttl_s=0, leeway_s=0)):
        off.put("a", ALICE, exp=time.time() + 3600)
        assert off.get("a") is None

def test_verifier_checks_a_signature_once_per_token_with_a_configured_key():
    verifier = TokenVerifier(profile(None, jwt_algorithms=["HS256"], jwt_hs256_secret=HS_SECRET_32))
    calls = counting(verifier)

    token = jwt.encode(baseline_claims(int(time.time())), HS_SECRET_32, algorithm="HS256")
    first, second = verifier.verify(bearer(token)), verifier.verify(bearer(token))
    assert first == second and first.tenant
    assert calls[0] == 1

def test_rejected_tokens_are_verified_every_time():
    verifier = TokenVerifier(profile(None, jwt_algorithms=["HS256"], jwt_hs256_secret=HS_SECRET_32))
    calls = counting(verifier)

    forged = jwt.encode(baseline_claims(int(time.time())), "x" * 32 + "-another-secret", algorithm="HS256")
    for _ in range(2):
        with pytest.raises(Unauthenticated):
            verifier.verify(bearer(forged))
    assert calls[0] == 2

def test_structural_checks_still_run_on_a_remembered_token():
    verifier = TokenVerifier(profile(None, jwt_algorithms=["HS256"], jwt_hs256_secret=HS_SECRET_32))

    token = jwt.encode(baseline_claims(int(time.time())), HS_SECRET_32, algorithm="HS256")
    verifier.verify(bearer(token))
    with pytest.raises(Unauthenticated):
        verifier.verify([f"Bearer {token}", f"Bearer {token}"])  # two Authorization headers
    with pytest.raises(Unauthenticated):
        verifier.verify([f"Basic {token}"])

def test_same_token_stops_verifying_when_its_key_leaves_the_jwks():
    """jwt-037 with one and the same token: remembered only while the JWKS set that verified
    it is fresh (lifespan 2 s), so removing K1 takes effect as without the cache."""
    with JwksServer(jwks(K1, K2)) as server:
        verifier = TokenVerifier(profile(server))
        calls = counting(verifier)
        token = K1.token(baseline_claims(int(time.time())))
        verifier.verify(bearer(token))
        verifier.verify(bearer(token))
        assert calls[0] == 1
        server.set_jwks(jwks(K2))
        time.sleep(2.5)
        with pytest.raises(Unauthenticated):
            verifier.verify(bearer(token))
