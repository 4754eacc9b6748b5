"""Approval grants (app.grants): format, signature, binding encoding, expiry, key rotation, and
the approval-key settings they are built from."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from app.approvals.grants import GrantClaims, GrantExpired, GrantInvalid, GrantSigner
from app.errors import DependencyUnavailable
from app.fingerprint import canonical_json
from app.settings import DEV_APPROVAL_KEY, Settings, parse_approval_keys
from tests.support.keys import K1, b64url, hs_signer, raw_jwt

NEW = ("k-new", b"n" * 32)
OLD = ("k-old", b"o" * 40)
NOW_MS = 1_750_000_000_000


def claims(**changes) -> GrantClaims:
    base = {
        "approval_id": "ap_" + "A" * 32,
        "tenant": "acme",
        "subject": "u-admin",
        "tool": "processPayment",
        "version": "1",
        "tool_call_id": "call_7",
        "input_fingerprint": "0" * 64,
        "approver": "u-approver",
        "approver_roles": ("approver",),
        "decision_id": "01JAAAAAAAAAAAAAAAAAAAAAAA",
        "issued_at_ms": NOW_MS - 1000,
        "expires_at_ms": NOW_MS + 60_000,
    }
    return GrantClaims(**{**base, **changes})


def mac_for(secret: bytes, kid: str, payload_b64: str) -> str:
    """The documented MAC: HMAC-SHA256 under K = HMAC-SHA256(secret, label)."""
    key = hmac.new(secret, b"toolgate approval grant v1", hashlib.sha256).digest()
    return b64url(hmac.new(key, f"tgg1.{kid}.{payload_b64}".encode(), hashlib.sha256).digest())


def forge(payload: bytes | dict, key: tuple[str, bytes] = NEW) -> str:
    """A grant with any payload, correctly MACed with ``key`` (tests claims checks after the MAC)."""
    raw = payload if isinstance(payload, bytes) else canonical_json(payload)
    body = b64url(raw)
    return f"tgg1.{key[0]}.{body}.{mac_for(key[1], key[0], body)}"


@pytest.fixture
def signer() -> GrantSigner:
    return GrantSigner([NEW, OLD])


def test_round_trip_returns_the_signed_claims(signer):
    grant = signer.sign(claims())
    assert signer.verify(grant, now_ms=NOW_MS) == claims()


def test_wire_form_is_prefix_kid_payload_mac_with_canonical_json(signer):
    grant = signer.sign(claims())
    prefix, kid, payload, mac = grant.split(".")
    assert (prefix, kid) == ("tgg1", "k-new")
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    assert decoded == canonical_json(claims().model_dump(mode="json"))
    assert json.loads(decoded)["typ"] == "toolgate.approval-grant" and json.loads(decoded)["v"] == 1
    assert mac == mac_for(NEW[1], "k-new", payload)
    assert "=" not in grant


def test_signing_is_deterministic(signer):
    assert signer.sign(claims()) == signer.sign(claims())


def test_every_single_bit_flip_is_refused(signer):
    grant = signer.sign(claims())
    for index in range(len(grant)):
        for bit in range(8):
            flipped = grant[:index] + chr(ord(grant[index]) ^ (1 << bit)) + grant[index + 1:]
            with pytest.raises(GrantInvalid):
                signer.verify(flipped, now_ms=NOW_MS)


def test_another_spelling_of_the_same_mac_bytes_is_refused(signer):
    grant = signer.sign(claims())
    head, mac = grant.rsplit(".", 1)
    # 32 bytes use 43 base64url characters: the last one carries 2 unused low bits.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(mac[-1]) ^ 1]
    assert base64.urlsafe_b64decode(mac + "=") == base64.urlsafe_b64decode(mac[:-1] + twin + "=")
    with pytest.raises(GrantInvalid):
        signer.verify(f"{head}.{mac[:-1]}{twin}", now_ms=NOW_MS)


def test_unknown_kid_is_refused(signer):
    foreign = GrantSigner([("k-unknown", b"u" * 32)]).sign(claims())
    with pytest.raises(GrantInvalid, match="key id"):
        signer.verify(foreign, now_ms=NOW_MS)


def test_kid_swapped_to_another_configured_key_is_refused(signer):
    grant = signer.sign(claims())
    with pytest.raises(GrantInvalid, match="signature"):
        signer.verify(grant.replace("tgg1.k-new.", "tgg1.k-old.", 1), now_ms=NOW_MS)


def test_rotation_old_kid_verifies_while_configured_and_fails_once_removed():
    old_grant = GrantSigner([OLD]).sign(claims())
    assert old_grant.split(".")[1] == "k-old"
    assert GrantSigner([NEW, OLD]).verify(old_grant, now_ms=NOW_MS) == claims()
    assert GrantSigner([NEW, OLD]).sign(claims()).split(".")[1] == "k-new"  # the first key signs
    with pytest.raises(GrantInvalid):
        GrantSigner([NEW]).verify(old_grant, now_ms=NOW_MS)


def test_expiry_is_exclusive(signer):
    grant = signer.sign(claims(expires_at_ms=NOW_MS))
    assert signer.verify(grant, now_ms=NOW_MS - 1).expires_at_ms == NOW_MS
    with pytest.raises(GrantExpired):
        signer.verify(grant, now_ms=NOW_MS)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "tgg1",
        "tgg1.k-new.e30",
        "tgg1.k-new.e30.AAAA.extra",
        "tgg2.k-new.e30.AAAA",
        "TGG1.k-new.e30.AAAA",
        "tgg1..e30.AAAA",
        "tgg1.k-new..AAAA",
        "tgg1.k-new.e30.",
        "tgg1.k-né.e30.AAAA",
        "x" * 5000,
    ],
)
def test_malformed_text_is_refused(signer, text):
    with pytest.raises(GrantInvalid):
        signer.verify(text, now_ms=NOW_MS)


def test_non_string_is_refused(signer):
    with pytest.raises(GrantInvalid):
        signer.verify(None, now_ms=NOW_MS)  # type: ignore[arg-type]


def test_jwts_are_never_grants(signer):
    """A bearer token (RS256, or HS256 under the very approval secret) is not a grant."""
    rs = K1.token({"sub": "u-admin", "tenant": "acme"})
    hs = raw_jwt({"alg": "HS256", "typ": "JWT"}, canonical_json(claims().model_dump(mode="json")), hs_signer(NEW[1]))
    for token in (rs, hs, "tgg1." + hs):
        with pytest.raises(GrantInvalid):
            signer.verify(token, now_ms=NOW_MS)


@pytest.mark.parametrize(
    "change",
    [
        {"typ": "toolgate.other"},
        {"v": 2},
        {"approved": False},
        {"extra": "field"},
        {"expires_at_ms": "9999999999999"},
        {"tool_call_id": 7},
        {"approver_roles": "approver"},
        {"input_fingerprint": "not-hex"},
    ],
)
def test_correctly_signed_claims_of_the_wrong_shape_are_refused(signer, change):
    document = {**claims().model_dump(mode="json"), **change}
    with pytest.raises(GrantInvalid, match="claims"):
        signer.verify(forge(document), now_ms=NOW_MS)


@pytest.mark.parametrize("payload", [b"not json", b"[]", b"\xff\xfe", b"{}", b'{"typ": "toolgate.approval-grant"'])
def test_correctly_signed_garbage_payloads_are_refused(signer, payload):
    with pytest.raises(GrantInvalid):
        signer.verify(forge(payload), now_ms=NOW_MS)


def test_missing_claim_is_refused(signer):
    document = claims().model_dump(mode="json")
    del document["tool_call_id"]
    with pytest.raises(GrantInvalid):
        signer.verify(forge(document), now_ms=NOW_MS)


def test_binding_encoding_is_injective():
    """Field contents that would shift a delimiter-joined encoding give different payloads."""
    a = claims(tool="pay", tool_call_id='x","tool":"payAll')
    b = claims(tool='pay","tool_call_id":"x', tool_call_id="payAll")
    c = claims(tool="pay|x", tool_call_id="y")
    d = claims(tool="pay", tool_call_id="x|y")
    encodings = {canonical_json(x.model_dump(mode="json")) for x in (a, b, c, d)}
    assert len(encodings) == 4
    assert a.binding() != b.binding()


def test_without_keys_nothing_is_signed_and_nothing_verifies():
    empty = GrantSigner([])
    with pytest.raises(DependencyUnavailable):
        empty.sign(claims())
    with pytest.raises(GrantInvalid):
        empty.verify(GrantSigner([NEW]).sign(claims()), now_ms=NOW_MS)


def test_short_secrets_and_bad_kids_are_refused():
    with pytest.raises(ValueError):
        GrantSigner([("k", b"s" * 31)])
    with pytest.raises(ValueError):
        GrantSigner([("k.1", b"s" * 32)])


# --- settings: TOOLGATE_APPROVAL_KEYS ------------------------------------------------------------


def test_parse_approval_keys_keeps_order_and_bytes():
    assert parse_approval_keys(" k1:" + "a" * 32 + " , k2:" + "b:c" * 11) == [("k1", b"a" * 32), ("k2", b"b:c" * 11)]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("k1:" + "a" * 31, "at least 32 bytes"),
        ("k.1:" + "a" * 32, "kid"),
        ("no-separator", "kid"),
        ("k1:" + "a" * 32 + ",k1:" + "b" * 32, "twice"),
        (" , ", "no kid:secret"),
    ],
)
def test_parse_approval_keys_names_the_problem_not_the_secret(text, problem):
    with pytest.raises(ValueError, match=problem) as info:
        parse_approval_keys(text)
    assert "a" * 31 not in str(info.value)


def test_settings_reject_bad_approval_keys_and_the_dev_key_in_production():
    with pytest.raises(ValueError, match="TOOLGATE_APPROVAL_KEYS: approval key k1"):
        Settings(approval_keys="k1:short")
    with pytest.raises(ValueError, match="TOOLGATE_APPROVAL_KEYS holds the development approval key"):
        Settings(
            env="production",
            jwt_issuer="https://idp.example",
            jwt_audience="aud",
            jwt_hs256_secret="p" * 32,
            audit_key_hash_secret="q" * 40,
            approval_keys="dev:" + DEV_APPROVAL_KEY[1].decode(),
        )


def test_signing_keys_fall_back_to_the_dev_key_in_development_only():
    assert Settings(approval_keys=None).approval_signing_keys == [DEV_APPROVAL_KEY]
    production = Settings(
        env="production",
        jwt_issuer="https://idp.example",
        jwt_audience="aud",
        jwt_hs256_secret="p" * 32,
        audit_key_hash_secret="q" * 40,
        authzen_pdp_url="https://toolgate.example",
    )
    assert production.approval_signing_keys == []
    assert Settings(approval_keys="k1:" + "a" * 32).approval_signing_keys == [("k1", b"a" * 32)]


