"""Unit tests of ``app.auth`` (DESIGN §2 step 2, §7).

Every ``"area": "jwt"`` case of ``tests/data/cases/jwt-retry-cases.jsonl`` is a test here,
run against ``TokenVerifier`` directly; the case id is in the test name. HTTP outcomes map to
exceptions: 401 -> ``Unauthenticated``, 503 -> ``DependencyUnavailable``, 200 -> a ``Subject``
is returned. Case expectations about OPA, Redis and response bodies belong to the API tests;
here the equivalent is "the verifier raised before returning a subject, with the generic
message and a log-only reason that never contains the token".

Test profile (cases README): algorithms RS256 (+ what a case adds), issuer
``https://idp.test.local``, audience ``policy-gateway``, leeway 30 s, JWKS on loopback with
lifespan 2 s and unknown-kid refetch cooldown 10 s, Authorization at most 8192 bytes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from app.auth import jws
from app.auth.dev_tokens import mint_dev_token
from app.auth.jwks import JwksCache
from app.auth.verifier import TokenVerifier
from app.errors import DependencyUnavailable, Unauthenticated
from app.models import Subject
from app.settings import Settings, SettingsError
from tests.support.jwks_server import JwksServer
from tests.support.keys import (
    AUDIENCE,
    CASE_HS_SECRET,
    EC1,
    ED1,
    ISSUER,
    K1,
    K2,
    KA,
    REMOVE,
    SUBJECT,
    TENANT,
    b64url,
    baseline_claims,
    hs_signer,
    json_bytes,
    jwks,
    raw_jwt,
)

HS_SECRET_32 = "0123456789abcdef0123456789abcdef"  # exactly 32 bytes
GENERIC_MESSAGE = Unauthenticated.default_message


# --- helpers --------------------------------------------------------------------------------


def profile(server: JwksServer | None = None, **overrides: Any) -> Settings:
    """The catalog's short-TTL test profile; every JWT field explicit so the env cannot leak in."""
    values: dict[str, Any] = {
        "env": "development",
        "jwt_algorithms": ["RS256"],
        "jwt_issuer": ISSUER,
        "jwt_audience": AUDIENCE,
        "jwt_jwks_url": server.jwks_url if server is not None else None,
        "jwt_public_key": None,
        "jwt_hs256_secret": None,
        "jwt_leeway_s": 30,
        "jwt_tenant_claim": "tenant",
        "jwt_roles_claim": "roles",
        "jwt_jwks_cache_s": 2,
        "jwt_jwks_refetch_cooldown_s": 10,
        "jwt_jwks_timeout_ms": 2000,
        "jwt_jwks_grace_s": 3600,
        "max_authorization_bytes": 8192,
    }
    values.update(overrides)
    return Settings(**values)


def bearer(token: str) -> list[str]:
    return [f"Bearer {token}"]


def expect_401(verifier: TokenVerifier, headers: list[str]) -> Unauthenticated:
    """Assert a 401 with the one generic message and a log-only reason without the token."""
    with pytest.raises(Unauthenticated) as info:
        verifier.verify(headers)
    exc = info.value
    assert exc.http_status == 401
    assert exc.message == GENERIC_MESSAGE
    assert exc.headers["WWW-Authenticate"].startswith("Bearer")
    # RFC 6750 §3.1: an error attribute only when credentials were presented
    assert ('error="invalid_token"' in exc.headers["WWW-Authenticate"]) is bool(headers)
    assert exc.log_detail
    for value in headers:
        token = value.partition(" ")[2].strip()
        if len(token) > 20:
            assert token not in exc.log_detail
    return exc


def expect_subject(verifier: TokenVerifier, headers: list[str], **fields: Any) -> Subject:
    subject = verifier.verify(headers)
    assert isinstance(subject, Subject)
    expected = {"id": SUBJECT, "tenant": TENANT, "roles": ()}
    expected.update(fields)
    assert subject.model_dump() == expected
    return subject


@pytest.fixture
def now() -> int:
    return int(time.time())


@pytest.fixture
def server() -> Iterator[JwksServer]:
    """JWKS stub publishing K1 only (the catalog default)."""
    with JwksServer(jwks(K1)) as srv:
        yield srv


@pytest.fixture
def verifier(server: JwksServer) -> TokenVerifier:
    return TokenVerifier(profile(server))


@pytest.fixture
def valid_token(now: int) -> str:
    """The jwt-001 token: B, header {alg RS256, typ JWT, kid k1}, signed with K1."""
    return K1.token(baseline_claims(now))


# --- jwt-001 --------------------------------------------------------------------------------


def test_jwt_001_valid_rs256_token_returns_subject(verifier: TokenVerifier, server: JwksServer, valid_token: str) -> None:
    expect_subject(verifier, bearer(valid_token))
    assert server.hits["/jwks.json"] == 1
    assert verifier.jwks is not None and verifier.jwks.fetch_count == 1


# --- jwt-003 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    ["a_basic", "b_token_scheme", "c_bearer_no_token", "d_bearer_spaces_only"],
)
def test_jwt_003_wrong_or_empty_scheme_is_401(verifier: TokenVerifier, valid_token: str, variant: str) -> None:
    header = {
        "a_basic": "Basic dXNlcjpwYXNz",
        "b_token_scheme": f"Token {valid_token}",
        "c_bearer_no_token": "Bearer",
        "d_bearer_spaces_only": "Bearer    ",
    }[variant]
    expect_401(verifier, [header])


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
def test_jwt_003e_scheme_is_case_insensitive(verifier: TokenVerifier, valid_token: str, scheme: str) -> None:
    """jwt-003 (e): auth-scheme names are case-insensitive (RFC 7235 §2.1), so 200."""
    expect_subject(verifier, [f"{scheme} {valid_token}"])


def test_jwt_003_token_with_inner_space_or_non_ascii_is_401(verifier: TokenVerifier, valid_token: str) -> None:
    """jwt-003 extra: the token must not contain spaces; the header must be ASCII."""
    head, rest = valid_token.split(".", 1)
    expect_401(verifier, [f"Bearer {head} .{rest}"])
    expect_401(verifier, [f"Bearer {valid_token}é"])


# --- jwt-005 --------------------------------------------------------------------------------


def _confusion_key(variant: str) -> bytes:
    pem = K1.public_pem()
    return {
        "pem_with_newline": pem,
        "pem_without_newline": pem.rstrip(b"\n"),
        "pkcs1_pem": K1.public_pem(pkcs1=True),
        "der_spki": K1.public_der(),
    }[variant]


@pytest.mark.parametrize("variant", ["pem_with_newline", "pem_without_newline", "pkcs1_pem", "der_spki"])
@pytest.mark.parametrize("config", ["rs256_only", "hs256_allowed_no_secret", "hs256_allowed_with_secret"])
def test_jwt_005_hs256_signed_with_rsa_public_key_is_401(
    server: JwksServer, now: int, variant: str, config: str
) -> None:
    """jwt-005: HS256/RS256 key confusion. Also with HS256 in the allow-list: the HS256 key is
    only ever the configured secret, never the RSA public key."""
    overrides: dict[str, Any] = {
        "rs256_only": {},
        "hs256_allowed_no_secret": {"jwt_algorithms": ["RS256", "HS256"]},
        "hs256_allowed_with_secret": {"jwt_algorithms": ["RS256", "HS256"], "jwt_hs256_secret": HS_SECRET_32},
    }[config]
    verifier = TokenVerifier(profile(server, **overrides))
    token = raw_jwt({"alg": "HS256", "typ": "JWT", "kid": "k1"}, baseline_claims(now), hs_signer(_confusion_key(variant)))
    expect_401(verifier, bearer(token))
    assert server.hits["/jwks.json"] == 0  # rejected before any key lookup


@pytest.mark.parametrize("mode", ["jwks", "pem"])
def test_jwt_005_public_key_configured_as_hs256_secret_is_refused(server: JwksServer, mode: str) -> None:
    """jwt-005 extra: a public key as the HS256 secret is a configuration error at startup."""
    source = {"jwt_jwks_url": server.jwks_url} if mode == "jwks" else {"jwt_jwks_url": None, "jwt_public_key": K1.public_pem().decode()}
    settings = profile(server, jwt_algorithms=["RS256", "HS256"], jwt_hs256_secret=K1.public_pem().decode(), **source)
    with pytest.raises(SettingsError):
        TokenVerifier(settings)


# --- jwt-007 --------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["rs512", "ps256", "hs256_case_secret", "hs256_secret_configured_but_not_allowed"])
def test_jwt_007_algorithm_outside_allow_list_is_401(server: JwksServer, now: int, variant: str) -> None:
    claims = baseline_claims(now)
    overrides: dict[str, Any] = {}
    if variant == "rs512":
        token = K1.token(claims, alg="RS512")
    elif variant == "ps256":
        token = K1.token(claims, alg="PS256")
    else:
        token = raw_jwt({"alg": "HS256", "typ": "JWT", "kid": "k1"}, claims, hs_signer(CASE_HS_SECRET.encode()))
        if variant == "hs256_secret_configured_but_not_allowed":
            overrides["jwt_hs256_secret"] = CASE_HS_SECRET
    verifier = TokenVerifier(profile(server, **overrides))
    expect_401(verifier, bearer(token))
    assert server.hits["/jwks.json"] == 0


def test_jwt_007_control_other_rsa_algorithms_work_when_allowed(server: JwksServer, now: int) -> None:
    """jwt-007 control: RS512/PS256 verify once allowed, with a JWK that does not pin ``alg``."""
    verifier = TokenVerifier(profile(server, jwt_algorithms=["RS256", "RS512", "PS256"]))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now), alg="RS512")))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now), alg="PS256")))


def test_jwt_007_jwk_alg_member_pins_the_algorithm(server: JwksServer, now: int) -> None:
    """jwt-007 extra: a JWK with ``"alg":"RS256"`` is not used for PS256 even if PS256 is allowed."""
    server.set_jwks(jwks(K1.jwk(alg="RS256")))
    verifier = TokenVerifier(profile(server, jwt_algorithms=["RS256", "PS256"]))
    expect_401(verifier, bearer(K1.token(baseline_claims(now), alg="PS256")))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))


# --- jwt-009 .. jwt-015 ---------------------------------------------------------------------


def test_jwt_009_payload_modified_after_signing_is_401(verifier: TokenVerifier, valid_token: str, now: int) -> None:
    header, _, signature = valid_token.split(".")
    forged_payload = b64url(json_bytes(baseline_claims(now, sub="admin")))
    expect_401(verifier, bearer(f"{header}.{forged_payload}.{signature}"))


def test_jwt_011_missing_exp_is_401(verifier: TokenVerifier, now: int) -> None:
    expect_401(verifier, bearer(K1.token(baseline_claims(now, exp=REMOVE))))


def test_jwt_013_expired_beyond_leeway_is_401(verifier: TokenVerifier, now: int) -> None:
    token = K1.token(baseline_claims(now, iat=now - 420, nbf=now - 420, exp=now - 120))
    expect_401(verifier, bearer(token))


def test_jwt_013_control_expired_within_leeway_is_accepted(verifier: TokenVerifier, now: int) -> None:
    """jwt-013 control: exp 10 s ago is inside the 30 s leeway."""
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, iat=now - 300, nbf=now - 300, exp=now - 10))))


def test_jwt_015a_nbf_far_in_future_is_401(verifier: TokenVerifier, now: int) -> None:
    expect_401(verifier, bearer(K1.token(baseline_claims(now, nbf=now + 3600))))


def test_jwt_015b_nbf_within_leeway_is_accepted(verifier: TokenVerifier, now: int) -> None:
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, nbf=now + 10))))


def test_jwt_015_extra_iat_far_in_future_is_401(verifier: TokenVerifier, now: int) -> None:
    """jwt-015 extra: iat is honoured when present (a token issued in the future)."""
    expect_401(verifier, bearer(K1.token(baseline_claims(now, iat=now + 3600))))


# --- jwt-017 / jwt-019 / jwt-045: audience and issuer ----------------------------------------


@pytest.mark.parametrize(
    "aud",
    [
        pytest.param("other-service", id="a_other"),
        pytest.param(REMOVE, id="b_removed"),
        pytest.param([], id="c_empty_list"),
        pytest.param(123, id="d_number"),
        pytest.param(["other-service"], id="e_list_other"),
        pytest.param(None, id="extra_null"),
        pytest.param([123, AUDIENCE], id="extra_list_with_number"),
    ],
)
def test_jwt_017_wrong_missing_or_malformed_audience_is_401(verifier: TokenVerifier, now: int, aud: Any) -> None:
    expect_401(verifier, bearer(K1.token(baseline_claims(now, aud=aud))))


def test_jwt_017_control_audience_list_containing_ours_is_accepted(verifier: TokenVerifier, now: int) -> None:
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, aud=["other-service", AUDIENCE]))))


@pytest.mark.parametrize(
    "iss",
    [
        pytest.param("https://evil.test", id="a_other"),
        pytest.param("https://idp.test", id="b_prefix"),
        pytest.param("https://idp.test.local/", id="c_trailing_slash"),
        pytest.param(REMOVE, id="d_removed"),
        pytest.param([ISSUER], id="e_list"),
        pytest.param("idp.test.local", id="f_no_scheme"),
        pytest.param(None, id="extra_null"),
        pytest.param("HTTPS://IDP.TEST.LOCAL", id="extra_case"),
    ],
)
def test_jwt_019_wrong_partial_missing_or_non_string_issuer_is_401(verifier: TokenVerifier, now: int, iss: Any) -> None:
    """jwt-019: raw-built so that a list issuer reaches the verifier (PyJWT's encoder refuses it)."""
    expect_401(verifier, bearer(K1.token(baseline_claims(now, iss=iss))))


def test_jwt_045_token_for_another_service_of_same_issuer_is_401(verifier: TokenVerifier, now: int) -> None:
    expect_401(verifier, bearer(K1.token(baseline_claims(now, aud="billing-service"))))


# --- jwt-021 / jwt-023: NumericDate types ----------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(lambda n: {"exp": [n + 300]}, id="a_exp_list"),
        pytest.param(lambda n: {"exp": {"t": n + 300}}, id="b_exp_object"),
        pytest.param(lambda n: {"iat": {}}, id="c_iat_object"),
        pytest.param(lambda n: {"nbf": None}, id="d_nbf_null"),
        pytest.param(lambda n: {"nbf": [1]}, id="e_nbf_list"),
        pytest.param(lambda n: {"exp": True}, id="f_exp_true"),
        pytest.param(lambda n: {"iat": True}, id="extra_iat_true"),
        pytest.param(lambda n: {"exp": None}, id="extra_exp_null"),
        pytest.param(lambda n: {"exp": 10**400}, id="extra_exp_huge_int"),
    ],
)
def test_jwt_021_non_numeric_time_claims_are_401(verifier: TokenVerifier, now: int, changes: Any) -> None:
    token = raw_jwt({"alg": "RS256", "typ": "JWT", "kid": "k1"}, baseline_claims(now, **changes(now)), K1.signer())
    expect_401(verifier, bearer(token))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_jwt_021_non_finite_exp_is_401(verifier: TokenVerifier, now: int, literal: str) -> None:
    """jwt-021 extra: non-standard JSON constants and overflowing floats as exp."""
    claims = baseline_claims(now, exp=0)
    payload = json_bytes(claims).replace(b'"exp":0', b'"exp":' + literal.encode())
    token = raw_jwt({"alg": "RS256", "typ": "JWT", "kid": "k1"}, payload, K1.signer())
    expect_401(verifier, bearer(token))


@pytest.mark.parametrize("claim", ["exp", "iat", "nbf"])
def test_jwt_023_numeric_string_time_claim_is_401(verifier: TokenVerifier, now: int, claim: str) -> None:
    """jwt-023 (exp), plus iat/nbf: RFC 7519 NumericDate must be a JSON number."""
    value = {"exp": now + 300, "iat": now, "nbf": now}[claim]
    token = raw_jwt({"alg": "RS256", "typ": "JWT", "kid": "k1"}, baseline_claims(now, **{claim: str(value)}), K1.signer())
    expect_401(verifier, bearer(token))


def test_jwt_023_control_float_time_claims_are_accepted(verifier: TokenVerifier, now: int) -> None:
    """jwt-023 control: a fractional NumericDate is a valid JSON number."""
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, iat=now + 0.5, exp=now + 300.25))))


# --- jwt-025: unknown kids --------------------------------------------------------------------


@pytest.mark.serial  # each refusal within 0.5 s, all 50 within 5 s
def test_jwt_025_unknown_kids_do_not_refetch_per_request(verifier: TokenVerifier, server: JwksServer, valid_token: str, now: int) -> None:
    expect_subject(verifier, bearer(valid_token))  # warm up
    server.reset_hits()
    started = time.monotonic()
    for _ in range(50):
        token = KA.token(baseline_claims(now), kid=str(uuid.uuid4()))
        t0 = time.monotonic()
        expect_401(verifier, bearer(token))
        assert time.monotonic() - t0 < 0.5
    assert time.monotonic() - started < 5
    assert server.hits["/jwks.json"] <= 1


def test_jwt_025_unknown_kid_refetch_picks_up_rotated_key(server: JwksServer, now: int) -> None:
    """jwt-025 extra: with the cooldown elapsed (0 here), an unknown kid refetches once and a
    newly published key verifies; a second unknown kid within a 10 s cooldown does not."""
    verifier = TokenVerifier(profile(server, jwt_jwks_refetch_cooldown_s=0, jwt_jwks_cache_s=300))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))
    server.set_jwks(jwks(K1, K2))
    expect_subject(verifier, bearer(K2.token(baseline_claims(now))))
    assert server.hits["/jwks.json"] == 2


def test_jwt_025_concurrent_unknown_kids_fetch_at_most_once(server: JwksServer, valid_token: str, now: int) -> None:
    """jwt-025 extra: the cooldown holds across threads (gthread workers)."""
    verifier = TokenVerifier(profile(server, jwt_jwks_cache_s=300))
    expect_subject(verifier, bearer(valid_token))
    server.reset_hits()
    tokens = [KA.token(baseline_claims(now), kid=str(uuid.uuid4())) for _ in range(40)]
    errors: list[BaseException] = []

    def worker(token: str) -> None:
        try:
            verifier.verify(bearer(token))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 40 and all(type(e) is Unauthenticated for e in errors)
    assert server.hits["/jwks.json"] <= 1


# --- jwt-027: kid types -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kid",
    [
        pytest.param(123, id="number"),
        pytest.param(None, id="null"),
        pytest.param({"a": 1}, id="object"),
        pytest.param(["k1"], id="list"),
        pytest.param("", id="extra_empty_string"),
    ],
)
def test_jwt_027_non_string_kid_is_401(verifier: TokenVerifier, server: JwksServer, now: int, kid: Any) -> None:
    token = raw_jwt({"alg": "RS256", "kid": kid}, baseline_claims(now), K1.signer())
    expect_401(verifier, bearer(token))
    assert server.hits["/jwks.json"] == 0


def test_jwt_027_extra_missing_kid_with_jwks_is_401(verifier: TokenVerifier, now: int) -> None:
    """With a JWKS the kid selects the key; a token without kid is refused (interpretation)."""
    expect_401(verifier, bearer(K1.token(baseline_claims(now), kid=None)))


# --- jwt-029: x5u and other key-carrying headers ------------------------------------------------


def test_jwt_029_x5u_header_is_never_fetched(verifier: TokenVerifier, server: JwksServer, now: int) -> None:
    server.add_file("/cert.pem", KA.self_signed_cert_pem(), "application/x-pem-file")
    x5u = server.url_for("/cert.pem")
    claims = baseline_claims(now)
    expect_401(verifier, bearer(raw_jwt({"alg": "RS256", "typ": "JWT", "x5u": x5u}, claims, KA.signer())))
    expect_401(verifier, bearer(raw_jwt({"alg": "RS256", "typ": "JWT", "kid": "k1", "x5u": x5u}, claims, KA.signer())))
    assert server.hits["/cert.pem"] == 0


def test_jwt_029_extra_jku_jwk_x5c_headers_are_ignored(verifier: TokenVerifier, server: JwksServer, now: int) -> None:
    """jwt-029 extra (RFC 8725 §3.10): jku is never fetched; embedded jwk / x5c never trusted."""
    server.add_file("/attacker-jwks.json", json_bytes(jwks(KA)), "application/json")
    claims = baseline_claims(now)
    for extra in (
        {"jku": server.url_for("/attacker-jwks.json")},
        {"jwk": KA.jwk()},
        {"x5c": [KA.cert_der_b64()]},
    ):
        for kid in (None, "k1", "attacker"):
            header = {"alg": "RS256", "typ": "JWT", **extra}
            if kid:
                header["kid"] = kid
            expect_401(verifier, bearer(raw_jwt(header, claims, KA.signer())))
    assert server.hits["/attacker-jwks.json"] == 0


def test_jwt_029_control_x5u_on_a_validly_signed_token_is_harmless(verifier: TokenVerifier, server: JwksServer, now: int) -> None:
    """Ignored means ignored: a K1 token with an x5u header verifies with K1, and x5u is not fetched."""
    server.add_file("/cert.pem", KA.self_signed_cert_pem())
    expect_subject(verifier, bearer(K1.token(baseline_claims(now), x5u=server.url_for("/cert.pem"))))
    assert server.hits["/cert.pem"] == 0


# --- jwt-031: crit and b64 ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        pytest.param({"alg": "RS256", "kid": "k1", "crit": ["exp2"], "exp2": 1}, id="a_unknown_crit"),
        pytest.param({"alg": "RS256", "kid": "k1", "crit": []}, id="b_empty_crit"),
        pytest.param({"alg": "RS256", "kid": "k1", "crit": ["b64"]}, id="c_crit_b64_absent"),
        pytest.param({"alg": "RS256", "kid": "k1", "crit": "b64", "b64": False}, id="extra_crit_not_list"),
        pytest.param({"alg": "RS256", "kid": "k1", "b64": True}, id="extra_b64_true"),
    ],
)
def test_jwt_031_crit_headers_are_401(verifier: TokenVerifier, now: int, header: dict[str, Any]) -> None:
    expect_401(verifier, bearer(raw_jwt(header, baseline_claims(now), K1.signer())))


@pytest.mark.parametrize("form", ["detached", "payload_filled_in"])
def test_jwt_031d_b64_false_unencoded_payload_is_401(verifier: TokenVerifier, now: int, form: str) -> None:
    header = b64url(json_bytes({"alg": "RS256", "kid": "k1", "b64": False, "crit": ["b64"]}))
    payload = json_bytes(baseline_claims(now))
    signature = b64url(K1.signer()(header.encode() + b"." + payload))
    middle = "" if form == "detached" else b64url(payload)
    expect_401(verifier, bearer(f"{header}.{middle}.{signature}"))


# --- jwt-033: size ----------------------------------------------------------------------------


@pytest.mark.serial  # refused within 0.2 s
@pytest.mark.parametrize("pad", [20000, 6500], ids=["a_27kb", "b_just_over_8192"])
def test_jwt_033_oversized_token_rejected_before_any_decoding(
    verifier: TokenVerifier, server: JwksServer, now: int, pad: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = K1.token(baseline_claims(now, pad="A" * pad))
    headers = bearer(token)
    assert len(headers[0]) > 8192
    decoded: list[str] = []
    real_decode = jws.b64url_decode
    monkeypatch.setattr(jws, "b64url_decode", lambda seg: decoded.append(seg) or real_decode(seg))
    t0 = time.monotonic()
    exc = expect_401(verifier, headers)
    assert time.monotonic() - t0 < 0.2
    assert "limit" in (exc.log_detail or "")
    assert decoded == []  # no base64 / JSON work
    assert server.total_hits() == 0  # no key lookup


def test_jwt_033_extra_size_limit_boundary(verifier: TokenVerifier, now: int) -> None:
    """jwt-033 extra: a valid header value of at most 8192 bytes passes; just over fails."""
    base = len(bearer(K1.token(baseline_claims(now, pad="")))[0])
    at_or_under: list[str] | None = None
    over: list[str] | None = None
    pad = max(0, (8192 - base) * 3 // 4 - 8)
    while at_or_under is None or over is None:
        headers = bearer(K1.token(baseline_claims(now, pad="A" * pad)))
        size = len(headers[0])
        if size in (8191, 8192):
            at_or_under = headers
        elif size in (8193, 8194):
            over = headers
        assert size < 8200, "search overshot"
        pad += 1
    expect_subject(verifier, at_or_under)
    expect_401(verifier, over)


# --- jwt-035: structure ------------------------------------------------------------------------


def _jwt_035_token(variant: str, now: int, valid_token: str) -> str:
    b = baseline_claims(now)
    header = {"alg": "RS256", "typ": "JWT", "kid": "k1"}
    sign = K1.signer()
    if variant == "a":
        return "abc"
    if variant == "b":
        return "a.b"
    if variant == "c":
        return valid_token + ".extra"
    if variant == "d":
        return "!!!.???.***"
    if variant == "e":
        return raw_jwt(b"[1]", b, sign)
    if variant == "f":
        return raw_jwt(header, b"[1,2]", sign)
    if variant == "g":
        return raw_jwt(header, b"hello", sign)
    if variant == "h":
        return raw_jwt(b'{"alg":"RS256"', b, sign)
    if variant == "extra_duplicate_alg":
        return raw_jwt(b'{"alg":"HS256","alg":"RS256","kid":"k1"}', b, sign)
    if variant == "extra_invalid_utf8":
        return raw_jwt(b'{"alg":"RS256","kid":"k1","x":"\xff"}', b, sign)
    if variant == "extra_bad_base64_length":
        return "a" * 5 + "." + valid_token.split(".", 1)[1]
    if variant == "extra_padding":
        return valid_token.replace(".", "=.", 1)
    if variant == "extra_deep_nesting":
        return raw_jwt(b"[" * 5000 + b"]" * 5000, b, sign)
    if variant == "extra_empty_signature":
        return valid_token.rsplit(".", 1)[0] + "."
    raise AssertionError(variant)


@pytest.mark.parametrize(
    "variant",
    ["a", "b", "c", "d", "e", "f", "g", "h", "extra_duplicate_alg", "extra_invalid_utf8",
     "extra_bad_base64_length", "extra_padding", "extra_deep_nesting", "extra_empty_signature"],
)  # fmt: skip
def test_jwt_035_malformed_tokens_are_401(verifier: TokenVerifier, now: int, valid_token: str, variant: str) -> None:
    expect_401(verifier, bearer(_jwt_035_token(variant, now, valid_token)))


# --- jwt-037 / jwt-039: JWKS lifecycle ----------------------------------------------------------


def test_jwt_037_key_removed_from_jwks_stops_verifying_after_lifespan(server: JwksServer, now: int) -> None:
    server.set_jwks(jwks(K1, K2))
    verifier = TokenVerifier(profile(server))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))
    server.set_jwks(jwks(K2))
    time.sleep(3)  # lifespan 2 s + 1 s
    expect_401(verifier, bearer(K1.token(baseline_claims(now))))
    expect_subject(verifier, bearer(K2.token(baseline_claims(now))))


def test_jwt_039_jwks_failure_keeps_last_known_good_keys(server: JwksServer, now: int) -> None:
    """jwt-039: 503 after caching; past the lifespan the valid token still gets 200 (grace),
    the unknown kid gets 401 (the case allows 401 or 503; our design answers 401)."""
    verifier = TokenVerifier(profile(server))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))
    server.fail_with(503)
    time.sleep(3)
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))
    expect_401(verifier, bearer(KA.token(baseline_claims(now), kid="unknown-kid")))
    assert server.hits["/jwks.json"] >= 2  # the refresh was attempted, then backed off


# --- jwt-041 / jwt-043 --------------------------------------------------------------------------


@pytest.mark.parametrize("config", ["rs256_only", "hs256_allowed_with_secret"])
def test_jwt_041_hs256_with_empty_secret_is_401(server: JwksServer, now: int, config: str) -> None:
    overrides = {} if config == "rs256_only" else {"jwt_algorithms": ["RS256", "HS256"], "jwt_hs256_secret": HS_SECRET_32}
    verifier = TokenVerifier(profile(server, **overrides))
    token = raw_jwt({"alg": "HS256", "typ": "JWT"}, baseline_claims(now), hs_signer(b""))
    expect_401(verifier, bearer(token))


@pytest.mark.parametrize("order", ["valid_first", "garbage_first"])
def test_jwt_043_two_authorization_headers_are_401(verifier: TokenVerifier, valid_token: str, order: str) -> None:
    headers = [f"Bearer {valid_token}", "Bearer garbage"]
    if order == "garbage_first":
        headers.reverse()
    expect_401(verifier, headers)


def test_jwt_043_extra_no_or_duplicated_valid_headers_are_401(verifier: TokenVerifier, valid_token: str) -> None:
    expect_401(verifier, [])
    expect_401(verifier, [f"Bearer {valid_token}", f"Bearer {valid_token}"])


def test_non_list_authorization_argument_is_401(verifier: TokenVerifier, valid_token: str) -> None:
    with pytest.raises(Unauthenticated):
        verifier.verify(f"Bearer {valid_token}")  # type: ignore[arg-type]
    with pytest.raises(Unauthenticated):
        verifier.verify([b"Bearer x.y.z"])  # type: ignore[list-item]


# --- other algorithms and key sources -----------------------------------------------------------


def test_es256_and_eddsa_tokens_via_jwks(server: JwksServer, now: int) -> None:
    server.set_jwks(jwks(K1, EC1, ED1))
    verifier = TokenVerifier(profile(server, jwt_algorithms=["RS256", "ES256", "EdDSA"]))
    expect_subject(verifier, bearer(EC1.token(baseline_claims(now))))
    expect_subject(verifier, bearer(ED1.token(baseline_claims(now))))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))
    assert server.hits["/jwks.json"] == 1


def test_algorithm_must_match_the_key_family(server: JwksServer, now: int) -> None:
    """An allowed alg with a key of another family (by kid) is refused, in every direction."""
    server.set_jwks(jwks(K1, EC1, ED1))
    verifier = TokenVerifier(profile(server, jwt_algorithms=["RS256", "ES256", "EdDSA", "ES384"]))
    claims = baseline_claims(now)
    expect_401(verifier, bearer(EC1.token(claims, kid="k1")))  # ES256 with the RSA key's kid
    expect_401(verifier, bearer(K1.token(claims, kid="ec1")))  # RS256 with the EC key's kid
    expect_401(verifier, bearer(ED1.token(claims, kid="ec1")))  # EdDSA with the EC key's kid
    expect_401(verifier, bearer(EC1.token(claims, alg="ES384")))  # P-256 key used as ES384


def test_es256_not_in_allow_list_is_401(server: JwksServer, now: int) -> None:
    server.set_jwks(jwks(K1, EC1))
    verifier = TokenVerifier(profile(server))
    expect_401(verifier, bearer(EC1.token(baseline_claims(now))))


def test_pem_public_key_mode(now: int) -> None:
    verifier = TokenVerifier(profile(jwt_public_key=K1.public_pem().decode(), jwt_algorithms=["RS256", "ES256", "HS256"]))
    claims = baseline_claims(now)
    expect_subject(verifier, bearer(K1.token(claims)))
    expect_subject(verifier, bearer(K1.token(claims, kid=None)))  # kid not needed with one key
    expect_401(verifier, bearer(K2.token(claims, kid="k1")))  # another RSA key
    expect_401(verifier, bearer(EC1.token(claims)))  # ES256 allowed, but the key is RSA
    # HS256 is allowed, but no secret is in force with a public key: the PEM is never an HMAC key.
    expect_401(verifier, bearer(raw_jwt({"alg": "HS256", "typ": "JWT"}, claims, hs_signer(K1.public_pem()))))


def test_pem_public_key_mode_ec_and_escaped_newlines(now: int) -> None:
    escaped = EC1.public_pem().decode().replace("\n", "\\n")
    verifier = TokenVerifier(profile(jwt_public_key=escaped, jwt_algorithms=["ES256"]))
    expect_subject(verifier, bearer(EC1.token(baseline_claims(now))))


def test_pem_public_key_mode_certificate(now: int) -> None:
    verifier = TokenVerifier(profile(jwt_public_key=K1.self_signed_cert_pem().decode()))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"jwt_public_key": "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n"}, id="garbage_pem"),
        pytest.param({"jwt_public_key": K1.private_pem().decode()}, id="private_key_pem"),
        pytest.param({"jwt_public_key": K1.public_pem().decode(), "jwt_algorithms": ["ES256"]}, id="family_not_allowed"),
        pytest.param({"jwt_algorithms": ["RS256"]}, id="no_key_at_all"),
    ],
)
def test_unusable_key_configuration_is_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(SettingsError):
        TokenVerifier(profile(**overrides))


def test_hs256_with_32_byte_secret(now: int) -> None:
    verifier = TokenVerifier(profile(jwt_algorithms=["HS256"], jwt_hs256_secret=HS_SECRET_32))
    claims = baseline_claims(now)
    expect_subject(verifier, bearer(raw_jwt({"alg": "HS256", "typ": "JWT"}, claims, hs_signer(HS_SECRET_32.encode()))))
    expect_401(verifier, bearer(raw_jwt({"alg": "HS256", "typ": "JWT"}, claims, hs_signer(b"x" * 32))))
    expect_401(verifier, bearer(K1.token(claims)))  # RS256 not allowed, no public key


def test_hs256_secret_that_is_a_public_key_pem_is_rejected() -> None:
    """The HS256 key must never be a public key (algorithm confusion, RFC 8725 §2.1)."""
    for pem in (K1.public_pem(), K1.public_pem(pkcs1=True), EC1.public_pem()):
        with pytest.raises(SettingsError):
            TokenVerifier(profile(jwt_algorithms=["HS256"], jwt_hs256_secret=pem.decode()))


def test_typ_header_must_be_a_jwt_type(verifier: TokenVerifier, now: int) -> None:
    """RFC 8725 §3.11 explicit typing: other token types (e.g. a SET) are refused."""
    claims = baseline_claims(now)
    expect_401(verifier, bearer(K1.token(claims, typ="secevent+jwt")))
    expect_401(verifier, bearer(raw_jwt({"alg": "RS256", "kid": "k1", "typ": 1}, claims, K1.signer())))
    expect_subject(verifier, bearer(K1.token(claims, typ="at+jwt")))
    expect_subject(verifier, bearer(K1.token(claims, typ=None)))


def test_none_algorithm_is_401(verifier: TokenVerifier, now: int) -> None:
    token = raw_jwt({"alg": "none", "kid": "k1"}, baseline_claims(now), lambda _data: b"")
    expect_401(verifier, bearer(token.rstrip(".") + ".AA"))
    expect_401(verifier, bearer(raw_jwt({"kid": "k1"}, baseline_claims(now), K1.signer())))


# --- subject claims -----------------------------------------------------------------------------


def test_roles_as_list_and_as_space_separated_string(verifier: TokenVerifier, now: int) -> None:
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, roles=["support_agent", "approver"]))), roles=("support_agent", "approver"))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, roles="support_agent  approver"))), roles=("support_agent", "approver"))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, roles=[]))), roles=())
    expect_subject(verifier, bearer(K1.token(baseline_claims(now, roles=None))), roles=())


@pytest.mark.parametrize("roles", [123, {"a": 1}, ["ok", 1], [["nested"]], True])
def test_roles_of_another_type_are_401(verifier: TokenVerifier, now: int, roles: Any) -> None:
    expect_401(verifier, bearer(K1.token(baseline_claims(now, roles=roles))))


def test_custom_tenant_and_roles_claim_names(server: JwksServer, now: int) -> None:
    verifier = TokenVerifier(profile(server, jwt_tenant_claim="org_id", jwt_roles_claim="scope"))
    token = K1.token(baseline_claims(now, tenant=REMOVE, org_id="t-beta", scope="read write", roles=["ignored"]))
    expect_subject(verifier, bearer(token), tenant="t-beta", roles=("read", "write"))
    # The default claim names mean nothing under the custom configuration.
    expect_401(verifier, bearer(K1.token(baseline_claims(now))))


@pytest.mark.parametrize("tenant", [REMOVE, "", None, 7, ["t-alpha"]], ids=["missing", "empty", "null", "number", "list"])
def test_missing_or_invalid_tenant_is_401(verifier: TokenVerifier, now: int, tenant: Any) -> None:
    expect_401(verifier, bearer(K1.token(baseline_claims(now, tenant=tenant))))


@pytest.mark.parametrize("sub", [REMOVE, "", None, 42, ["svc"]], ids=["missing", "empty", "null", "number", "list"])
def test_missing_or_invalid_sub_is_401(verifier: TokenVerifier, now: int, sub: Any) -> None:
    expect_401(verifier, bearer(K1.token(baseline_claims(now, sub=sub))))


# --- JWKS availability --------------------------------------------------------------------------


def test_jwks_down_with_no_cache_is_dependency_unavailable(server: JwksServer, valid_token: str) -> None:
    server.fail_with(503)
    verifier = TokenVerifier(profile(server))
    with pytest.raises(DependencyUnavailable) as info:
        verifier.verify(bearer(valid_token))
    assert info.value.http_status == 503 and info.value.retryable
    assert info.value.headers.get("Retry-After") == "1"
    # Within the failure backoff no second fetch is made.
    with pytest.raises(DependencyUnavailable):
        verifier.verify(bearer(valid_token))
    assert server.hits["/jwks.json"] == 1
    # Structural failures are still 401, not 503.
    expect_401(verifier, ["Bearer abc"])


def test_jwks_unreachable_is_dependency_unavailable(valid_token: str) -> None:
    with JwksServer(jwks(K1)) as srv:
        settings = profile(srv, jwt_jwks_timeout_ms=500)
    verifier = TokenVerifier(settings)  # server stopped: connection refused
    with pytest.raises(DependencyUnavailable):
        verifier.verify(bearer(valid_token))


@pytest.mark.serial  # the timeout within 0.9 s
def test_jwks_timeout_is_dependency_unavailable(server: JwksServer, valid_token: str) -> None:
    server.delay_s = 1.0
    verifier = TokenVerifier(profile(server, jwt_jwks_timeout_ms=200))
    t0 = time.monotonic()
    with pytest.raises(DependencyUnavailable):
        verifier.verify(bearer(valid_token))
    assert time.monotonic() - t0 < 0.9


def test_cold_cache_concurrent_requests_fetch_once(server: JwksServer, now: int) -> None:
    verifier = TokenVerifier(profile(server))
    results: list[Any] = []

    def worker() -> None:
        try:
            results.append(verifier.verify(bearer(K1.token(baseline_claims(now)))))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, Subject) for r in results) and len(results) == 16
    assert server.hits["/jwks.json"] == 1


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FakeFetcher:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document: dict[str, Any] | None = document

    def __call__(self) -> Any:
        if self.document is None:
            raise ConnectionError("down")
        return self.document


def _cache(fetcher: FakeFetcher, clock: FakeClock, **kw: Any) -> JwksCache:
    params: dict[str, Any] = {"lifespan_s": 10, "refetch_cooldown_s": 5, "timeout_s": 1, "grace_s": 30}
    params.update(kw)
    return JwksCache("http://127.0.0.1:9/jwks.json", clock=clock, fetcher=fetcher, **params)


def test_jwks_cache_grace_period_then_dependency_unavailable() -> None:
    clock, fetcher = FakeClock(), FakeFetcher(jwks(K1))
    cache = _cache(fetcher, clock)
    assert [k.kid for k in cache.get_keys("k1")] == ["k1"]
    fetcher.document = None
    clock.t += 11  # expired: refresh fails, last-known-good served
    assert cache.get_keys("k1")
    clock.t += 25  # 36 s old: still within lifespan + grace (40 s)
    assert cache.get_keys("k1")
    clock.t += 5  # 41 s old: beyond grace
    with pytest.raises(DependencyUnavailable):
        cache.get_keys("k1")
    fetcher.document = jwks(K2)
    clock.t += 1  # after the failure backoff the endpoint is tried again
    assert cache.get_keys("k1") == () and cache.get_keys("k2")


def test_jwks_cache_unknown_kid_cooldown() -> None:
    """At most one unknown-kid refetch per cooldown; a fetch for any other reason (the first
    one, an expiry) does not hold back the next unknown kid."""
    clock, fetcher = FakeClock(), FakeFetcher(jwks(K1))
    cache = _cache(fetcher, clock, lifespan_s=300)
    cache.get_keys("k1")
    assert cache.fetch_count == 1
    fetcher.document = jwks(K1, K2)
    assert cache.get_keys("k2")  # published after the first fetch: one refetch finds it
    assert cache.fetch_count == 2
    assert cache.get_keys("nope") == ()  # within 5 s of that refetch: no other
    assert cache.fetch_count == 2
    fetcher.document = jwks(K1, K2, KA)
    clock.t += 1
    assert cache.get_keys("attacker") == ()  # cooldown: the new key waits
    clock.t += 5
    assert cache.get_keys("attacker")
    assert cache.fetch_count == 3


def test_jwks_cache_skips_unusable_keys() -> None:
    """Encryption keys, symmetric keys, keys without kid and alg/kty mismatches are never used;
    a set with no usable key counts as a failed fetch."""
    clock = FakeClock()
    document = {
        "keys": [
            K1.jwk(use="enc"),
            {"kty": "oct", "kid": "k2", "k": b64url(b"s" * 32)},
            K2.jwk(kid=None),
            EC1.jwk(alg="RS256"),
            "not-an-object",
            {"kty": "RSA", "kid": "broken", "n": "AA", "e": "AQAB"},
        ]
    }
    with pytest.raises(DependencyUnavailable):
        _cache(FakeFetcher(document), clock).get_keys("k1")
    document["keys"].append(K1.jwk(kid="good", alg="RS256"))
    cache = _cache(FakeFetcher(document), clock)
    assert [k.kid for k in cache.get_keys("good")] == ["good"]
    assert cache.get_keys("k1") == () and cache.get_keys("k2") == () and cache.get_keys("ec1") == ()


# --- mint_dev_token -------------------------------------------------------------------------------


def _dev_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "env": "development",
        "jwt_algorithms": ["RS256", "ES256", "EdDSA", "HS256"],
        "jwt_jwks_url": None,
        "jwt_public_key": None,
        "jwt_hs256_secret": None,
    }
    values.update(overrides)
    return Settings(**values)


def test_mint_dev_token_round_trip() -> None:
    settings = _dev_settings()
    assert settings.uses_dev_secret
    token = mint_dev_token(settings, sub="u-1", tenant="t-1", roles=["support_agent", "approver"], ttl_s=60)
    subject = TokenVerifier(settings).verify(bearer(token))
    assert subject == Subject(id="u-1", tenant="t-1", roles=("support_agent", "approver"))


def test_mint_dev_token_with_configured_secret_and_claim_names() -> None:
    settings = _dev_settings(jwt_hs256_secret=HS_SECRET_32, jwt_tenant_claim="org", jwt_roles_claim="scp",
                             jwt_issuer=ISSUER, jwt_audience=AUDIENCE)  # fmt: skip
    token = mint_dev_token(settings, sub="u-2", tenant="t-2", roles=[])
    assert TokenVerifier(settings).verify(bearer(token)) == Subject(id="u-2", tenant="t-2", roles=())


def test_mint_dev_token_refused_in_production() -> None:
    settings = Settings(
        env="production",
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwt_algorithms=["HS256"],
        jwt_jwks_url=None,
        jwt_public_key=None,
        jwt_hs256_secret="p" * 32,
        audit_key_hash_secret="production-audit-key-hash-secret-0123456789",
        authzen_pdp_url="https://toolgate.example",
    )
    with pytest.raises(RuntimeError, match="production"):
        mint_dev_token(settings, sub="u-1", tenant="t-1", roles=[])


def test_mint_dev_token_refused_without_hs256_secret(server: JwksServer) -> None:
    with pytest.raises(RuntimeError, match="HS256"):
        mint_dev_token(profile(server), sub="u-1", tenant="t-1", roles=[])
    with pytest.raises(RuntimeError, match="HS256"):  # secret set, but HS256 not allowed
        mint_dev_token(profile(server, jwt_hs256_secret=HS_SECRET_32), sub="u-1", tenant="t-1", roles=[])


def test_mint_dev_token_validates_arguments() -> None:
    settings = _dev_settings()
    for kwargs in ({"sub": "", "tenant": "t", "roles": []}, {"sub": "s", "tenant": "t", "roles": [1]},
                   {"sub": "s", "tenant": "t", "roles": [], "ttl_s": 0}):  # fmt: skip
        with pytest.raises(ValueError):
            mint_dev_token(settings, **kwargs)



def test_rsa_key_below_2048_bits_is_401(server: JwksServer, now: int) -> None:
    """RFC 7518 §3.3: RSA keys of at least 2048 bits; a weak published key never verifies."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from tests.support.keys import KeyPair

    weak = KeyPair("weak", rsa.generate_private_key(public_exponent=65537, key_size=1024), "RS256")
    server.set_jwks(jwks(K1, weak))
    verifier = TokenVerifier(profile(server))
    expect_401(verifier, bearer(weak.token(baseline_claims(now))))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))


# --- token edge cases (RFC 7519 / 6750 / 8725) -------------------------------------------------


def test_no_credentials_get_a_challenge_without_an_error_code(verifier: TokenVerifier) -> None:
    """RFC 6750 §3.1: a request without authentication information gets no error attribute."""
    exc = expect_401(verifier, [])
    assert exc.headers["WWW-Authenticate"] == 'Bearer realm="toolgate"'
    assert expect_401(verifier, ["Bearer x.y.z"]).headers["WWW-Authenticate"] == 'Bearer realm="toolgate", error="invalid_token"'


def test_operators_can_require_more_claims(server: JwksServer, now: int) -> None:
    verifier = TokenVerifier(profile(server, jwt_required_claims="exp,iss,aud,sub,jti,iat"))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))
    exc = expect_401(verifier, bearer(K1.token(baseline_claims(now, jti=REMOVE))))
    assert "jti" in (exc.log_detail or "")
    expect_401(verifier, bearer(K1.token(baseline_claims(now, iat=REMOVE))))


@pytest.mark.parametrize("claims", ["exp,iss,aud", "exp,iss,aud,sub,no spaces"])
def test_required_claims_keep_the_base_four_and_sane_names(claims: str) -> None:
    with pytest.raises(ValueError):
        Settings(jwt_required_claims=claims)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        (lambda now: {"exp": 10**300}, "ahead"),
        (lambda now: {"exp": now + 10 * 366 * 86_400}, "ahead"),
        (lambda now: {"iat": now - 400 * 86_400, "nbf": REMOVE}, "lives longer"),
        (lambda now: {"iat": -1, "nbf": REMOVE}, "negative"),
        (lambda now: {"nbf": now + 20, "exp": now + 10}, "nbf is after exp"),  # nbf within the leeway
    ],
    ids=["huge", "ten-years", "lifetime", "negative", "nbf-after-exp"],
)
def test_implausible_numeric_dates_are_refused(verifier: TokenVerifier, now: int, changes: Any, reason: str) -> None:
    exc = expect_401(verifier, bearer(K1.token(baseline_claims(now, **changes(now)))))
    assert reason in (exc.log_detail or "")


def test_a_duplicate_payload_member_cannot_smuggle_a_tenant(verifier: TokenVerifier, now: int) -> None:
    """The last of two ``tenant`` members would win in PyJWT; the signed payload is refused."""
    body = json_bytes(baseline_claims(now))[:-1] + b',"tenant":"t-beta"}'
    token = raw_jwt({"alg": "RS256", "typ": "JWT", "kid": "k1"}, body, K1.signer())
    exc = expect_401(verifier, bearer(token))
    assert "duplicate member 'tenant'" in (exc.log_detail or "")


def test_a_newly_published_key_verifies_at_once_after_a_recent_fetch(server: JwksServer, now: int) -> None:
    """An unknown kid refetches although the set was fetched a moment ago (cooldown 10 s counts
    unknown-kid refetches only); a second unknown kid within the cooldown does not refetch."""
    verifier = TokenVerifier(profile(server, jwt_jwks_cache_s=300))
    expect_subject(verifier, bearer(K1.token(baseline_claims(now))))
    server.set_jwks(jwks(K1, K2))
    expect_subject(verifier, bearer(K2.token(baseline_claims(now))))
    assert server.hits["/jwks.json"] == 2
    expect_401(verifier, bearer(KA.token(baseline_claims(now), kid="unknown")))
    assert server.hits["/jwks.json"] == 2


def test_a_development_token_longer_than_the_gateway_accepts_is_not_minted() -> None:
    with pytest.raises(ValueError, match="MAX_LIFETIME"):
        mint_dev_token(Settings(), sub="u-1", tenant="t-1", roles=[], ttl_s=2 * 86_400)


def test_production_names_the_development_issuer_or_audience_it_refuses() -> None:
    """Only the setting left at its development value is named, with that value."""
    with pytest.raises(ValueError) as info:
        Settings(env="production", jwt_issuer=ISSUER, jwt_audience="toolgate", jwt_hs256_secret="p" * 32,
                 audit_key_hash_secret="q" * 40)
    assert "TOOLGATE_JWT_AUDIENCE is the development audience 'toolgate'" in str(info.value)
    assert "TOOLGATE_JWT_ISSUER" not in str(info.value)
    with pytest.raises(ValueError) as info:
        Settings(env="production", jwt_audience=AUDIENCE, jwt_hs256_secret="p" * 32, audit_key_hash_secret="q" * 40)
    assert "TOOLGATE_JWT_ISSUER is the development issuer 'https://toolgate.dev.local'" in str(info.value)
    assert "TOOLGATE_JWT_AUDIENCE" not in str(info.value)
