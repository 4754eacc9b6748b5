"""The JWT cases (tests/data/cases/jwt-retry-cases.jsonl, area jwt) through POST /v1/decide:
every rejected token is 401 UNAUTHENTICATED with ``WWW-Authenticate: Bearer error="invalid_token"``,
the policy engine (the OPA sidecar test server, which counts calls) is never called, no
idempotency record is created, and nothing leaks. tests/unit/test_auth.py covers each case's
variants in depth against the verifier; this file proves the gateway wiring."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.support.calls import decide_body
from tests.support.errors import assert_error
from tests.support.keys import (
    CASE_HS_SECRET,
    K1,
    KA,
    REMOVE,
    b64url,
    baseline_claims,
    hs_signer,
    raw_jwt,
)


def _bad_tokens() -> dict[str, list[str]]:
    now = int(time.time())
    b = baseline_claims(now)
    valid = K1.token(b)
    header, _, signature = valid.split(".")
    tampered = ".".join([header, b64url(json.dumps(baseline_claims(now, sub="admin")).encode()), signature])
    return {
        "jwt-003a-basic": ["Basic dXNlcjpwYXNz"],
        "jwt-003b-token-scheme": [f"Token {valid}"],
        "jwt-003c-bearer-empty": ["Bearer"],
        "jwt-003d-bearer-spaces": ["Bearer    "],
        "jwt-005-hs256-with-public-key": [
            "Bearer " + raw_jwt({"alg": "HS256", "typ": "JWT", "kid": "k1"}, b, hs_signer(K1.public_pem()))
        ],
        "jwt-007-rs512": ["Bearer " + K1.token(b, alg="RS512")],
        "jwt-007-hs256-case-secret": ["Bearer " + raw_jwt({"alg": "HS256", "kid": "k1"}, b, hs_signer(CASE_HS_SECRET.encode()))],
        "jwt-009-payload-modified": [f"Bearer {tampered}"],
        "jwt-011-no-exp": ["Bearer " + K1.token(baseline_claims(now, exp=REMOVE))],
        "jwt-013-expired": ["Bearer " + K1.token(baseline_claims(now, iat=now - 420, nbf=now - 420, exp=now - 120))],
        "jwt-015a-nbf-future": ["Bearer " + K1.token(baseline_claims(now, nbf=now + 3600))],
        "jwt-017-wrong-aud": ["Bearer " + K1.token(baseline_claims(now, aud="other-service"))],
        "jwt-017-aud-number": ["Bearer " + K1.token(baseline_claims(now, aud=123))],
        "jwt-019-iss-trailing-slash": ["Bearer " + K1.token(baseline_claims(now, iss="https://idp.test.local/"))],
        "jwt-019-iss-list": ["Bearer " + K1.token(baseline_claims(now, iss=["https://idp.test.local"]))],
        "jwt-021-exp-list": ["Bearer " + K1.token(baseline_claims(now, exp=[now + 300]))],
        "jwt-021-nbf-null": ["Bearer " + K1.token(baseline_claims(now, nbf=None))],
        "jwt-021-exp-true": ["Bearer " + K1.token(baseline_claims(now, exp=True))],
        "jwt-023-exp-string": ["Bearer " + K1.token(baseline_claims(now, exp=str(now + 300)))],
        "jwt-025-unknown-kid": ["Bearer " + KA.token(b, kid=str(uuid.uuid4()))],
        "jwt-027-kid-number": ["Bearer " + raw_jwt({"alg": "RS256", "kid": 123}, b, K1.signer())],
        "jwt-029-x5u": ["Bearer " + KA.token(b, kid=None, x5u="http://127.0.0.1:9/cert.pem")],
        "jwt-031-crit": ["Bearer " + raw_jwt({"alg": "RS256", "kid": "k1", "crit": ["exp2"], "exp2": 1}, b, K1.signer())],
        "jwt-033-oversized": ["Bearer " + K1.token(baseline_claims(now, pad="A" * 6500))],
        "jwt-035-one-segment": ["Bearer abc"],
        "jwt-035-four-segments": [f"Bearer {valid}.extra"],
        "jwt-035-garbage": ["Bearer !!!.???.***"],
        "jwt-035-payload-list": ["Bearer " + raw_jwt({"alg": "RS256", "kid": "k1"}, b"[1,2]", K1.signer())],
        "jwt-041-hs256-empty-secret": ["Bearer " + raw_jwt({"alg": "HS256", "typ": "JWT"}, b, hs_signer(b""))],
        "jwt-043-two-headers": [f"Bearer {valid}", "Bearer garbage"],
        "jwt-043-two-headers-swapped": ["Bearer garbage", f"Bearer {valid}"],
        "jwt-045-other-audience": ["Bearer " + K1.token(baseline_claims(now, aud="billing-service"))],
        "missing-header": [],
    }


#: The case names of ``_bad_tokens`` (its tokens are minted in each test, never at collection:
#: a token minted then could expire before a long run reaches it).
CASES = (
    "jwt-003a-basic",
    "jwt-003b-token-scheme",
    "jwt-003c-bearer-empty",
    "jwt-003d-bearer-spaces",
    "jwt-005-hs256-with-public-key",
    "jwt-007-hs256-case-secret",
    "jwt-007-rs512",
    "jwt-009-payload-modified",
    "jwt-011-no-exp",
    "jwt-013-expired",
    "jwt-015a-nbf-future",
    "jwt-017-aud-number",
    "jwt-017-wrong-aud",
    "jwt-019-iss-list",
    "jwt-019-iss-trailing-slash",
    "jwt-021-exp-list",
    "jwt-021-exp-true",
    "jwt-021-nbf-null",
    "jwt-023-exp-string",
    "jwt-025-unknown-kid",
    "jwt-027-kid-number",
    "jwt-029-x5u",
    "jwt-031-crit",
    "jwt-033-oversized",
    "jwt-035-four-segments",
    "jwt-035-garbage",
    "jwt-035-one-segment",
    "jwt-035-payload-list",
    "jwt-041-hs256-empty-secret",
    "jwt-043-two-headers",
    "jwt-043-two-headers-swapped",
    "jwt-045-other-audience",
    "missing-header",
)


def _post(client, authorization: list[str], key: str):
    headers = [("Authorization", value) for value in authorization] + [("Idempotency-Key", key)]
    body = decide_body("createTicket", {"title": "t", "description": "d", "clientMutationId": str(uuid.uuid4())})
    return client.post("/v1/decide", json=body, headers=headers)


def test_the_cases_are_the_bad_tokens() -> None:
    assert tuple(sorted(_bad_tokens())) == CASES


@pytest.mark.parametrize("case", CASES)
def test_rejected_token_never_reaches_the_engine(sidecar_client, opa_server, redis_client, case):
    resp = _post(sidecar_client, _bad_tokens()[case], f"idem-{uuid.uuid4().hex}")
    error = assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)
    assert error == {"code": "UNAUTHENTICATED", "message": "authentication required", "retryable": False}
    # RFC 6750 §3.1: no error attribute when the request carried no credentials
    assert ('error="invalid_token"' in resp.headers["WWW-Authenticate"]) is (case != "missing-header")
    assert opa_server.calls == []
    assert redis_client.dbsize() == 0
    assert "jwt" not in error["message"].lower()


def test_jwt_001_control_valid_token_reaches_the_engine_once(sidecar_client, opa_server):
    token = K1.token(baseline_claims(roles=["support_agent"]))
    resp = _post(sidecar_client, [f"Bearer {token}"], f"idem-{uuid.uuid4().hex}")
    assert resp.status_code == 200, resp.get_json()
    assert len(opa_server.calls) == 1


def test_jwt_015b_nbf_within_leeway_is_accepted(client):
    token = K1.token(baseline_claims(nbf=int(time.time()) + 10, roles=["support_agent"]))
    resp = _post(client, [f"Bearer {token}"], f"idem-{uuid.uuid4().hex}")
    assert resp.status_code == 200


def test_token_is_never_echoed_or_logged(client, caplog):
    secretish = K1.token(baseline_claims(aud="other-service"))
    with caplog.at_level("DEBUG"):
        resp = _post(client, [f"Bearer {secretish}"], "idem-x")
    assert secretish not in resp.get_data(as_text=True)
    for segment in secretish.split("."):
        assert segment not in caplog.text
