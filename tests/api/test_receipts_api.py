"""Signed decision receipts through the HTTP interface, with the real engine, Redis and decision
log: every decision carries one, it says what the decision record says, it verifies with only
the published public key (in-process, and with ``toolgate receipt verify`` in a process that has
no settings at all, against a file and against a real gunicorn gateway's key set URL), and an
execution report's record names the decision its receipt is for."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.audit.queries import DecisionQuery
from app.receipts.keys import PublicKeys, key_id, private_key_pem, public_key_pem
from app.receipts.verify import ReceiptInvalid, verify_receipt
from tests.support.approvals import ADMIN, approve, decide, payment, with_grant
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.gateway import GatewayProcess
from tests.support.idempotency import report

AGENT = {"roles": ["support_agent"]}


@pytest.fixture
def receipt_key(tmp_path: Path) -> tuple[Path, Ed25519PrivateKey]:
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "receipt.pem"
    path.write_bytes(private_key_pem(key))
    return path, key


@pytest.fixture
def client(make_app, receipt_key):
    return make_app(receipt_key_files=[str(receipt_key[0])]).test_client()


def published(client) -> PublicKeys:
    resp = client.get("/.well-known/toolgate-keys")
    assert resp.status_code == 200 and resp.headers["Cache-Control"] == "public, max-age=300"
    return PublicKeys.from_jwks(resp.get_json()["keys"])


def record_of(client, decision_id: str):
    return client.application.extensions["toolgate"].decision_reader.get(decision_id)


def test_the_key_set_publishes_the_receipt_key_and_the_checkpoint_key(client, receipt_key):
    body = client.get("/.well-known/toolgate-keys").get_json()
    assert [jwk["kid"] for jwk in body["keys"]] == [key_id(receipt_key[1].public_key())]
    assert body["keys"][0] == {**body["keys"][0], "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig"}
    assert set(body) == {"keys", "checkpoint_keys"} and len(body["checkpoint_keys"]) == 1
    assert all("d" not in jwk for jwk in body["keys"] + body["checkpoint_keys"])


@pytest.mark.parametrize(
    ("tool", "tool_input", "who", "decision"),
    [
        ("readFile", {"path": "/srv/reports/q1.csv"}, AGENT, "allow"),
        ("readFile", {"path": "/etc/shadow"}, AGENT, "deny"),
    ],
)
def test_a_receipt_says_what_the_record_says(client, tool, tool_input, who, decision):
    resp = client.post("/v1/decide", json=decide_body(tool, tool_input), headers=auth(**who))
    body = resp.get_json()
    assert resp.status_code == 200 and body["decision"] == decision
    claims = verify_receipt(body["receipt"], published(client)).claims
    record = record_of(client, body["decision_id"])
    assert (claims.decision_id, claims.decision, claims.policy_revision) == (
        record.decision_id, record.decision, record.policy_revision
    )
    assert (claims.tenant, claims.subject, claims.tool, claims.version, claims.input_fingerprint) == (
        record.tenant, record.subject_id, record.tool, record.version, record.input_fingerprint
    )
    assert claims.grant_id is None and claims.input_fingerprint
    assert claims.matched_rules == list(record.matched_rules) and claims.matched_rules  # the shipped library names its rules


def test_approval_flow_receipts_name_the_grant_and_reports_name_the_receipt(client):
    body = payment(1500)
    approval_id, grant = approve(client, body)
    key = "pay-receipt-1"
    allowed = decide(client, with_grant(body, approval_id, grant), ADMIN, key=key)
    assert allowed["decision"] == "allow" and allowed["idempotency"]["state"] == "reserved"
    claims = verify_receipt(allowed["receipt"], published(client)).claims
    assert claims.grant_id == approval_id and claims.subject == "u-admin"
    done = report(client, key, "complete", {"result": {"payment_id": "pm_1"},
                                            "reservation_token": allowed["idempotency"]["reservation_token"]},
                  sub="u-admin", roles=["admin"])
    assert done.status_code == 200, done.get_json()
    reader = client.application.extensions["toolgate"].decision_reader
    [reported] = list(reader.iter_records(DecisionQuery(tenant="acme", event="execution_complete")))
    assert reported.for_decision_id == claims.decision_id == allowed["decision_id"]


def test_a_failure_report_names_the_receipt_too(client):
    key = "pay-receipt-2"
    allowed = decide(client, payment(20), ADMIN, key=key)
    claims = verify_receipt(allowed["receipt"], published(client)).claims
    failed = report(client, key, "fail", {"retryable": True, "reason": "upstream timeout"}, sub="u-admin", roles=["admin"])
    assert failed.status_code == 200 and failed.get_json()["state"] == "released"
    reader = client.application.extensions["toolgate"].decision_reader
    [reported] = list(reader.iter_records(DecisionQuery(tenant="acme", event="execution_fail")))
    assert reported.for_decision_id == claims.decision_id


def test_user_approval_has_a_receipt_and_a_dry_run_has_none(client):
    pending = decide(client, payment(5000))
    assert pending["decision"] == "user-approval"
    assert verify_receipt(pending["receipt"], published(client)).claims.decision == "user-approval"
    dry = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}, dry_run=True), headers=auth(**AGENT))
    assert dry.status_code == 200 and dry.get_json()["dry_run"] is True and "receipt" not in dry.get_json()


def test_without_a_receipt_key_there_are_no_receipts(make_app):
    client = make_app().test_client()
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}), headers=auth(**AGENT))
    assert resp.status_code == 200 and "receipt" not in resp.get_json()
    assert client.get("/.well-known/toolgate-keys").get_json()["keys"] == []


def _tampered(receipt: str, **changes) -> str:
    header, payload, signature = receipt.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**claims, **changes}).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def test_a_changed_receipt_or_another_key_does_not_verify(client):
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/etc/shadow"}), headers=auth(**AGENT))
    receipt = resp.get_json()["receipt"]
    keys = published(client)
    with pytest.raises(ReceiptInvalid, match="signature is not valid"):
        verify_receipt(_tampered(receipt, decision="allow"), keys)
    stranger = PublicKeys.from_jwks([{"kty": "OKP", "crv": "Ed25519", "kid": next(iter(keys)).kid,
                                      "x": base64.urlsafe_b64encode(
                                          Ed25519PrivateKey.generate().public_key().public_bytes_raw()
                                      ).rstrip(b"=").decode()}])
    with pytest.raises(ReceiptInvalid, match="signature is not valid"):
        verify_receipt(receipt, stranger)


def test_a_receipt_is_never_a_bearer_token(client):
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}), headers=auth(**AGENT))
    receipt = resp.get_json()["receipt"]
    refused = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}),
                          headers={"Authorization": f"Bearer {receipt}"})
    assert_error(refused, 401, "UNAUTHENTICATED", retryable=False)


def _offline_verify(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """``toolgate receipt verify`` in a process with no TOOLGATE_* settings, outside the project."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("TOOLGATE_")}
    return subprocess.run([sys.executable, "-m", "app.cli", "receipt", "verify", *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_receipts_verify_offline_with_only_the_public_key(client, receipt_key, tmp_path):
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/reports/q1.csv"}), headers=auth(**AGENT))
    offline = tmp_path / "offline"
    offline.mkdir()
    (offline / "response.json").write_text(json.dumps(resp.get_json()))
    (offline / "receipt.jws").write_text(resp.get_json()["receipt"] + "\n")
    (offline / "keys.json").write_text(json.dumps(client.get("/.well-known/toolgate-keys").get_json()))
    receipt_key[0].unlink()  # the private key is gone: only the published public key remains
    ok = _offline_verify("response.json", "--keys", "keys.json", cwd=offline)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("ok: receipt signed by key ") and "decision           allow" in ok.stdout
    piped = _offline_verify("--keys", "keys.json", "--json", cwd=offline, stdin=(offline / "receipt.jws").read_text())
    assert piped.returncode == 0 and json.loads(piped.stdout)["claims"]["decision_id"] == resp.get_json()["decision_id"]
    lying = {**resp.get_json(), "decision": "deny"}
    (offline / "lying.json").write_text(json.dumps(lying))
    refused = _offline_verify("lying.json", "--keys", "keys.json", cwd=offline)
    assert refused.returncode == 1 and "does not match its receipt (decision)" in refused.stdout
    (offline / "forged.jws").write_text(_tampered(resp.get_json()["receipt"], tenant="globex"))
    forged = _offline_verify("forged.jws", "--keys", "keys.json", cwd=offline)
    assert forged.returncode == 1 and forged.stdout.startswith("invalid receipt: the signature is not valid")
    unusable = _offline_verify("forged.jws", "--keys", "missing.json", cwd=offline)
    assert unusable.returncode == 2 and "cannot be read" in unusable.stderr


def test_a_response_whose_input_or_reasons_were_swapped_does_not_verify(client, tmp_path):
    """The receipt binds what the response shows: a 5 EUR payment's response relabelled as
    150,000 EUR, or given another decision's reasons, is refused (the 150,000 EUR payment
    itself would have needed approval)."""
    small = decide(client, payment(5))
    assert small["decision"] == "allow"
    denied = client.post("/v1/decide", json=decide_body("readFile", {"path": "/etc/shadow"}), headers=auth(**AGENT)).get_json()
    (tmp_path / "keys.json").write_text(json.dumps(client.get("/.well-known/toolgate-keys").get_json()))
    swapped = {
        "honest.json": small,
        "input.json": {**small, "input": {**small["input"], "amount": 150000}},
        "reasons.json": {**denied, "reasons": ["a readable path under a read root"]},
        "no-input.json": {key: value for key, value in small.items() if key != "input"},
        "rules.json": {**small, "matched_rules": denied["matched_rules"]},
        "no-rules.json": {**small, "matched_rules": []},
        "namespace.json": {**small, "tool": {**small["tool"], "namespace": "evil"}},
    }
    for name, response in swapped.items():
        (tmp_path / name).write_text(json.dumps(response))
    results = {name: _offline_verify(name, "--keys", "keys.json", cwd=tmp_path) for name in swapped}
    assert results["honest.json"].returncode == 0, results["honest.json"].stdout
    assert results["input.json"].returncode == 1 and "does not match its receipt (input)" in results["input.json"].stdout
    assert results["reasons.json"].returncode == 1 and "does not match its receipt (reasons)" in results["reasons.json"].stdout
    assert results["no-input.json"].returncode == 1 and "(input)" in results["no-input.json"].stdout
    assert small["matched_rules"] and denied["matched_rules"]
    for name, member in (("rules.json", "matched_rules"), ("no-rules.json", "matched_rules"), ("namespace.json", "tool.name")):
        assert results[name].returncode == 1 and f"({member})" in results[name].stdout, (name, results[name].stdout)


def test_a_rotated_key_still_verifies_what_it_signed(make_app, tmp_path):
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    (tmp_path / "old.pem").write_bytes(private_key_pem(old))
    (tmp_path / "old.pub.pem").write_bytes(public_key_pem(old.public_key()))
    (tmp_path / "new.pem").write_bytes(private_key_pem(new))
    before = make_app(receipt_key_files=[str(tmp_path / "old.pem")]).test_client()
    signed_before = before.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}), headers=auth(**AGENT))
    after = make_app(receipt_key_files=[str(tmp_path / "new.pem"), str(tmp_path / "old.pub.pem")]).test_client()
    signed_after = after.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}), headers=auth(**AGENT))
    keys = published(after)
    assert [k.kid for k in keys] == [key_id(new.public_key()), key_id(old.public_key())]
    assert verify_receipt(signed_before.get_json()["receipt"], keys).kid == key_id(old.public_key())
    assert verify_receipt(signed_after.get_json()["receipt"], keys).kid == key_id(new.public_key())


def test_an_unusable_receipt_key_file_stops_the_start(make_app, tmp_path):
    from app.settings import SettingsError

    (tmp_path / "public-only.pem").write_bytes(public_key_pem(Ed25519PrivateKey.generate().public_key()))
    with pytest.raises(SettingsError, match="must hold the private key"):
        make_app(receipt_key_files=[str(tmp_path / "public-only.pem")])
    (tmp_path / "garbage.pem").write_text("not a key")
    with pytest.raises(SettingsError, match="not a PEM key"):
        make_app(receipt_key_files=[str(tmp_path / "garbage.pem")])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, redis_server):
    """The gateway under gunicorn, two workers, with a receipt key."""
    workdir = tmp_path_factory.mktemp("receipts-gateway")
    (workdir / "receipt.pem").write_bytes(private_key_pem(Ed25519PrivateKey.generate()))
    process = GatewayProcess({
        "TOOLGATE_REDIS_URL": redis_server.url,
        "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
        "TOOLGATE_RECEIPT_KEY_FILES": str(workdir / "receipt.pem"),
    }).start()
    yield process
    process.stop()


def test_receipt_verify_against_the_key_set_url_of_a_running_gateway(gateway, tmp_path):
    from app.auth.dev_tokens import mint_dev_token
    from app.settings import Settings

    token = mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["support_agent"])
    answers = [
        requests.post(f"{gateway.url}/v1/decide", json=decide_body("readFile", {"path": f"/srv/{i}"}),
                      headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
        for i in range(4)  # spread over both workers: each signs with the one configured key
    ]
    for i, answer in enumerate(answers):
        (tmp_path / f"r{i}.json").write_text(json.dumps(answer))
        result = _offline_verify(f"r{i}.json", "--keys", f"{gateway.url}/.well-known/toolgate-keys", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
