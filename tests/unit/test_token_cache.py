"""The verified-token cache (``app.token_cache``) on its own and inside ``TokenVerifier``:
real RS256/HS256 tokens, a real JWKS on loopback. Signature work is observed by counting the
verifier's PyJWT ``decode_complete`` calls (a counting wrapper around the real method)."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from app.auth.token_cache import VerifiedTokenCache, entry_bytes
from app.auth.verifier import TokenVerifier
from app.errors import Unauthenticated
from app.models import Subject
from tests.support.jwks_server import JwksServer
from tests.support.keys import K1, K2, baseline_claims, jwks
from tests.unit.test_auth import HS_SECRET_32, bearer, profile

ALICE = Subject(id="alice", tenant="acme", roles=("support_agent",))


def hs256_verifier() -> TokenVerifier:
    return TokenVerifier(profile(None, jwt_algorithms=["HS256"], jwt_hs256_secret=HS_SECRET_32))


def hs256_token(secret: str) -> str:
    return jwt.encode(baseline_claims(int(time.time())), secret, algorithm="HS256")


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
    cache = VerifiedTokenCache(1 << 20, ttl_s=1.0, leeway_s=0)
    cache.put("t1", ALICE, exp=time.time() + 3600)
    assert cache.get("t1") == ALICE
    assert cache.get("t2") is None
    time.sleep(1.1)
    assert cache.get("t1") is None


def test_an_entry_expires_by_pyjwts_rule_int_exp_at_or_before_now_minus_leeway():
    """PyJWT rejects when int(exp) <= now - leeway: a fractional exp must not buy a second."""
    now = time.time()
    cache = VerifiedTokenCache(1 << 20, ttl_s=60, leeway_s=1)
    cache.put("t", ALICE, exp=int(now))  # int(now) > now - 1: inside the leeway
    assert cache.get("t") == ALICE
    cache.put("t", ALICE, exp=int(now) - 1)  # int(now) - 1 <= now - 1: expired
    assert cache.get("t") is None
    strict = VerifiedTokenCache(1 << 20, ttl_s=60, leeway_s=0)
    strict.put("f", ALICE, exp=int(now) + 0.95)  # int(exp) == int(now): PyJWT says expired
    assert strict.get("f") is None


def test_trusted_until_caps_the_entry_and_a_spent_key_is_not_remembered():
    cache = VerifiedTokenCache(1 << 20, ttl_s=60, leeway_s=0)
    cache.put("short", ALICE, exp=time.time() + 3600, trusted_until=time.monotonic() + 1.0)
    cache.put("spent", ALICE, exp=time.time() + 3600, trusted_until=time.monotonic() - 1)
    assert cache.get("short") == ALICE and cache.get("spent") is None
    time.sleep(1.1)
    assert cache.get("short") is None


def test_size_bound_in_bytes_and_off_switches():
    one = entry_bytes(ALICE)
    cache = VerifiedTokenCache(2 * one, ttl_s=60, leeway_s=0)
    for token in ("a", "b", "c"):
        cache.put(token, ALICE, exp=time.time() + 3600)
    assert [cache.get(t) is not None for t in ("a", "b", "c")] == [False, True, True]  # LRU dropped "a"
    huge = Subject(id="bob", tenant="acme", roles=tuple(f"role-{i:04d}" for i in range(400)))
    cache.put("huge", huge, exp=time.time() + 3600)  # larger than the whole cache: not stored
    assert cache.get("huge") is None and cache.get("c") == ALICE
    for off in (VerifiedTokenCache(0, ttl_s=60, leeway_s=0), VerifiedTokenCache(1 << 20, ttl_s=0, leeway_s=0)):
        off.put("a", ALICE, exp=time.time() + 3600)
        assert off.get("a") is None


def test_verifier_checks_a_signature_once_per_token_with_a_configured_key():
    verifier = hs256_verifier()
    calls = counting(verifier)
    token = hs256_token(HS_SECRET_32)
    first, second = verifier.verify(bearer(token)), verifier.verify(bearer(token))
    assert first == second and first.tenant
    assert calls[0] == 1


def test_rejected_tokens_are_verified_every_time():
    verifier = hs256_verifier()
    calls = counting(verifier)
    forged = hs256_token("x" * 32 + "-another-secret")
    for _ in range(2):
        with pytest.raises(Unauthenticated):
            verifier.verify(bearer(forged))
    assert calls[0] == 2


def test_structural_checks_still_run_on_a_remembered_token():
    verifier = hs256_verifier()
    token = hs256_token(HS_SECRET_32)
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
        for _ in range(3):
            verifier.verify(bearer(token))
        # The first call fetched the set: its trust was taken before, so it is not remembered.
        assert calls[0] == 2
        server.set_jwks(jwks(K2))
        time.sleep(2.5)
        with pytest.raises(Unauthenticated):
            verifier.verify(bearer(token))


def test_a_refresh_between_key_selection_and_caching_does_not_extend_a_removed_keys_trust():
    """The trust window is taken from the key set the key came from: if another thread swaps
    in a fresh set without the key while this token is being verified, the entry still ends
    with the old set (here: already spent, so nothing is remembered)."""
    with JwksServer(jwks(K1, K2)) as server:
        verifier = TokenVerifier(profile(server))
        token = K1.token(baseline_claims(int(time.time())))
        assert verifier.jwks is not None
        verifier.jwks.get_keys("k1")  # the first set, fresh for 2 s
        real_decode = verifier._jwt.decode_complete

        def decode_then_refresh(*args: Any, **kwargs: Any) -> Any:
            decoded = real_decode(*args, **kwargs)
            server.set_jwks(jwks(K2))
            time.sleep(2.1)  # the first set has expired
            verifier.jwks.get_keys("k2")  # another request refreshes: the new set lacks k1
            return decoded

        verifier._jwt.decode_complete = decode_then_refresh  # type: ignore[method-assign]
        verifier.verify(bearer(token))  # verified with the first set, as it was then
        verifier._jwt.decode_complete = real_decode  # type: ignore[method-assign]
        with pytest.raises(Unauthenticated):
            verifier.verify(bearer(token))
