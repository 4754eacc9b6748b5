"""Receipt keys and receipts without the gateway: RFC 8037 test vectors for the key id and the
EdDSA signature, key rings from PEM files, the published key set, and every way a receipt is
refused."""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.receipts.claims import RECEIPT_TYPE, ReceiptClaims
from app.receipts.keys import (
    KeyFileError,
    KeyRing,
    KeySetError,
    PublicKeys,
    b64url_decode,
    key_document,
    key_id,
    private_key_pem,
    public_key_pem,
    read_key_document,
)
from app.receipts.signer import ReceiptSigner
from app.receipts.verify import ReceiptInvalid, verify_receipt

#: RFC 8037 appendix A.1: the Ed25519 key of the examples.
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"


def rfc8037_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(b64url_decode(RFC8037_D))


def claims(**changes) -> ReceiptClaims:
    values = {
        "decision_id": "01M8RQ887590JZBDQCKCWANFH0", "time": "2026-12-01T11:53:43.975091Z", "iat": 1796125000,
        "tenant": "acme", "subject": "u-1", "tool": "readFile", "version": "1", "input_fingerprint": "ab" * 32,
        "decision": "allow", "policy_revision": "sha256:1b0ee34a0b82fad6", "grant_id": None,
    }
    return ReceiptClaims(**{**values, **changes})


def test_the_key_id_is_the_rfc7638_thumbprint_of_rfc8037():
    key = rfc8037_key()
    assert KeyRing.from_private_key(key).public.jwks()[0]["x"] == RFC8037_X
    assert key_id(key.public_key()) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"  # RFC 8037 A.3


def test_the_signature_is_rfc8037_eddsa():
    expected = ("eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbh"
                "ijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg")  # RFC 8037 A.4
    signing_input = b"eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc"
    _, signature = KeyRing.from_private_key(rfc8037_key()).sign(signing_input)
    assert signing_input.decode() + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode() == expected


def test_a_key_ring_loads_pem_files_first_signs_all_verify(tmp_path):
    signing, retired = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    (tmp_path / "now.pem").write_bytes(private_key_pem(signing))
    (tmp_path / "retired.pub.pem").write_bytes(public_key_pem(retired.public_key()))
    ring = KeyRing.load([tmp_path / "now.pem", tmp_path / "retired.pub.pem"])
    assert ring.kid == key_id(signing.public_key())
    assert [k.kid for k in ring.public] == [key_id(signing.public_key()), key_id(retired.public_key())]
    with pytest.raises(KeyFileError, match="first key file must hold the private key"):
        KeyRing.load([tmp_path / "retired.pub.pem"])
    with pytest.raises(KeyFileError, match="cannot be read"):
        KeyRing.load([tmp_path / "absent.pem"])
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    (tmp_path / "ec.pem").write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        KeyRing.load([tmp_path / "ec.pem"])
    (tmp_path / "locked.pem").write_bytes(signing.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")))
    with pytest.raises(KeyFileError, match="encrypted"):
        KeyRing.load([tmp_path / "locked.pem"])
    with pytest.raises(KeyFileError) as refused:
        KeyRing.load([tmp_path / "ec.pem"])
    assert "PRIVATE" not in str(refused.value)  # the message names the file, never key material


def test_the_key_document_reads_back_and_refuses_private_keys(tmp_path):
    ring = KeyRing.from_private_key(Ed25519PrivateKey.generate())
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(key_document(ring.public, None)))
    document = read_key_document(str(path))
    assert document["checkpoint_keys"] == [] and PublicKeys.from_jwks(document["keys"]).get(ring.kid) is not None
    with pytest.raises(KeySetError, match="holds a private key"):
        PublicKeys.from_jwks([{**document["keys"][0], "d": RFC8037_D}])
    with pytest.raises(KeySetError, match="no Ed25519 key"):
        PublicKeys.from_jwks([{"kty": "RSA", "n": "x", "e": "AQAB", "kid": "r"}])
    with pytest.raises(KeySetError, match="no 'keys' list"):
        PublicKeys.from_jwks(None)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(KeySetError, match="not a JSON object"):
        read_key_document(str(tmp_path / "bad.json"))
    with pytest.raises(KeySetError, match="cannot be fetched"):
        read_key_document("http://127.0.0.1:9/.well-known/toolgate-keys", timeout_s=2)


def test_a_receipt_round_trips_with_its_claims():
    signer = ReceiptSigner(KeyRing.from_private_key(Ed25519PrivateKey.generate()))
    rules = [{"id": "tools.files.read_allowed", "effect": "allow", "message": "allowed by policy"}]
    token = signer.sign(claims(matched_rules=rules, grant_id="ap_" + "x" * 32))
    assert jwt.get_unverified_header(token) == {"alg": "EdDSA", "kid": next(iter(signer.public_keys)).kid, "typ": RECEIPT_TYPE}
    verified = verify_receipt(token, signer.public_keys)
    assert verified.claims == claims(matched_rules=rules, grant_id="ap_" + "x" * 32)
    assert "matched_rules" not in jwt.decode(signer.sign(claims()), options={"verify_signature": False})


def _forge(header: dict, payload: dict, key: Ed25519PrivateKey) -> str:
    return jwt.encode(payload, key, algorithm="EdDSA", headers=header)


def test_a_receipt_is_refused_for_each_reason():
    key = Ed25519PrivateKey.generate()
    keys = KeyRing.from_private_key(key).public
    kid = next(iter(keys)).kid
    good = claims().payload()
    cases = {
        "not a compact JWS": "definitely-not-a-jws",
        "is not EdDSA": jwt.encode(good, "s" * 32, algorithm="HS256", headers={"kid": kid, "typ": RECEIPT_TYPE}),
        "type 'JWT' is not": _forge({"kid": kid}, good, key),
        "which is not in the key set": _forge({"kid": "someone-else", "typ": RECEIPT_TYPE}, good, key),
        "signature is not valid": _forge({"kid": kid, "typ": RECEIPT_TYPE}, good, Ed25519PrivateKey.generate()),
        "claims are not a toolgate receipt (admin)": _forge({"kid": kid, "typ": RECEIPT_TYPE}, {**good, "admin": True}, key),
        "claims are not a toolgate receipt (decision)": _forge({"kid": kid, "typ": RECEIPT_TYPE}, {**good, "decision": "yes"}, key),
    }
    for reason, token in cases.items():
        with pytest.raises(ReceiptInvalid, match=reason.replace("(", r"\(").replace(")", r"\)")):
            verify_receipt(token, keys)
