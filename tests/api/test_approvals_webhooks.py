"""Signed webhooks on approval events, delivered to a real HTTP receiver on loopback: signature
over timestamp and body with a key id, retries with backoff, dead letters, the Slack format;
and the grant checks against the stored record (a correctly signed grant whose claims differ
from the record, the development key on a production gateway)."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest

from app.approvals.grants import GrantClaims, GrantSigner
from app.approvals.webhooks import ID_HEADER, SIGNATURE_HEADER, slack_message, verify_signature
from app.settings import DEV_APPROVAL_KEY, Settings, SettingsError, load_settings
from tests.support.approval_policies import WebhookReceiver, write_policy
from tests.support.calls import auth, decide_body

ADMIN = ("u-admin", "acme", ["admin"])
APPROVER = ("u-approver", "acme", ["approver"])
SECRET = "w" * 40
KEYS = {"wh-1": SECRET.encode()}


def pay(amount=1500):
    return decide_body("processPayment", {"amount": amount, "currency": "EUR", "recipient": "acct_42"})


def decide(client, body, identity=ADMIN):
    return client.post("/v1/decide", json=body, headers={**auth(*identity), "Idempotency-Key": uuid.uuid4().hex}).get_json()


def webhook_app(make_app, tmp_path, url, approval=None, **settings):
    policy = write_policy(tmp_path / f"p-{uuid.uuid4().hex[:6]}", approval or {})
    return make_app(policy_dir=policy, webhook_url=url, webhook_keys=f"wh-1:{SECRET}", webhook_backoff_base_ms=50,
                    webhook_backoff_cap_ms=200, **settings)


def test_requested_and_answered_events_are_signed_with_timestamp_and_key_id(make_app, tmp_path):
    with WebhookReceiver() as receiver:
        app = webhook_app(make_app, tmp_path, receiver.url)
        client = app.test_client()
        approval_id = decide(client, pay())["approval"]["approval_id"]
        client.post(f"/v1/approvals/{approval_id}", json={"approved": True, "reason": "fine"}, headers=auth(*APPROVER))
        received = receiver.wait_for(2)
    assert len(received) == 2
    events = []
    for headers, body in received:
        assert verify_signature(headers, body, KEYS)
        assert not verify_signature(headers, body + b" ", KEYS)
        assert not verify_signature(headers, body, {"wh-1": b"x" * 40})
        assert not verify_signature(headers, body, KEYS, now=time.time() + 3600)  # a replay later is refused
        assert headers[SIGNATURE_HEADER].split(",")[1] == "kid=wh-1"
        events.append(json.loads(body))
    assert [e["type"] for e in events] == ["approval.requested", "approval.answered"]
    assert all(e["approval"]["approval_id"] == approval_id and e["tenant"] == "acme" for e in events)
    assert events[1]["approval"]["answer"]["approver"] == "u-approver"


def test_failed_deliveries_are_retried_with_backoff_then_dead_lettered(make_app, tmp_path):
    with WebhookReceiver(statuses=[500, 503]) as receiver:
        app = webhook_app(make_app, tmp_path, receiver.url)
        decide(app.test_client(), pay())
        received = receiver.wait_for(3)
        notifier = app.extensions["toolgate"].approvals.notifier
        assert notifier.drain(5)
    assert len(received) == 3 and len({h[ID_HEADER] for h, _ in received}) == 1  # one event, three attempts
    stamps = [int(h["Toolgate-Webhook-Timestamp"]) for h, _ in received]
    assert stamps == sorted(stamps)
    assert notifier.delivered == 1 and notifier.dead_letters == 0
    with WebhookReceiver(statuses=[400]) as refusing:
        app = webhook_app(make_app, tmp_path, refusing.url)
        decide(app.test_client(), pay())
        notifier = app.extensions["toolgate"].approvals.notifier
        refusing.wait_for(1)
        assert notifier.drain(5)
    assert notifier.dead_letters == 1 and len(refusing.received) == 1  # a 400 is not retried
    with WebhookReceiver(statuses=[500] * 10) as failing:
        app = webhook_app(make_app, tmp_path, failing.url, webhook_max_attempts=3)
        decide(app.test_client(), pay())
        notifier = app.extensions["toolgate"].approvals.notifier
        failing.wait_for(3)
        assert notifier.drain(5)
    assert notifier.dead_letters == 1 and len(failing.received) == 3


def test_expired_and_escalated_events_are_sent_by_the_sweep(make_app, tmp_path):
    with WebhookReceiver() as receiver:
        app = webhook_app(make_app, tmp_path, receiver.url, {"ttl_s": 2, "escalation": {"after_s": 1, "roles": ["lead"]}})
        decide(app.test_client(), pay())
        time.sleep(1.1)
        assert app.extensions["toolgate"].approvals.sweep() == (0, 1)
        time.sleep(1.0)
        assert app.extensions["toolgate"].approvals.sweep() == (1, 0)
        received = receiver.wait_for(3)
    assert [json.loads(b)["type"] for _, b in received] == ["approval.requested", "approval.escalated", "approval.expired"]


def test_the_slack_format_is_an_incoming_webhook_message(make_app, tmp_path):
    with WebhookReceiver() as receiver:
        app = webhook_app(make_app, tmp_path, receiver.url, webhook_format="slack")
        decide(app.test_client(), pay())
        (headers, raw), = receiver.wait_for(1)
    message = json.loads(raw)
    assert verify_signature(headers, raw, KEYS)
    assert set(message) == {"text", "blocks"} and message["blocks"][0]["type"] == "section"
    assert message["text"] == "processPayment v1 requested by u-admin needs approval"
    view = json.loads(raw.decode())  # requester text is escaped for mrkdwn
    crafted = slack_message("approval.answered", "acme", {
        "approval_id": "ap_x", "tool": {"name": "t", "version": "1"}, "requester": "<!channel>", "request_reason": "a & b",
        "expires_at": "", "answer": {"approved": False, "approver": "<@U1>", "reason": ""}})
    assert "<!channel>" not in json.dumps(crafted) and "&lt;!channel&gt;" in crafted["text"] and view


def test_webhook_settings_are_checked_together():
    with pytest.raises(SettingsError, match="TOOLGATE_WEBHOOK_KEYS"):
        load_settings(webhook_url="http://127.0.0.1:9/hooks")
    with pytest.raises(SettingsError, match="32 bytes"):
        load_settings(webhook_url="http://127.0.0.1:9/hooks", webhook_keys="k:short")


# --- the grant against its stored record, and the development key in production --------------


def _forged(grant: str, signer: GrantSigner, **changes) -> str:
    payload = grant.split(".")[2]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return signer.sign(GrantClaims.model_validate_json(json.dumps({**claims, **changes})))


@pytest.mark.parametrize(
    "changes",
    [{"approvers": ["u-approver", "u-ghost"]}, {"quorum": 2}, {"reasons": ["anything"]}, {"approver": "u-ceo"},
     {"approver_roles": ["approver", "admin"]}, {"policy_revision": "sha256:other"}],
)
def test_a_correctly_signed_grant_whose_claims_differ_from_the_record_is_refused(make_app, tmp_path, changes):
    """Someone holding the signing key (or a bug) cannot mint a grant the record does not back."""
    app = make_app(policy_dir=write_policy(tmp_path / "p", {}))
    client = app.test_client()
    body = pay()
    approval_id = decide(client, body)["approval"]["approval_id"]
    grant = client.post(f"/v1/approvals/{approval_id}", json={"approved": True}, headers=auth(*APPROVER)).get_json()["grant"]
    signer = GrantSigner([("k-test", b"a" * 32)])
    forged = _forged(grant, signer, **changes)
    denied = decide(client, {**body, "approval": {"approval_id": approval_id, "grant": forged}})
    assert denied["decision"] == "deny" and denied["reasons"] == ["approval grant invalid"]
    allowed = decide(client, {**body, "approval": {"approval_id": approval_id, "grant": grant}})
    assert allowed["decision"] == "allow"


def test_a_grant_signed_with_the_development_key_is_refused_by_a_production_gateway(make_app, tmp_path):
    dev = make_app(policy_dir=write_policy(tmp_path / "p", {}), approval_keys=None)
    client = dev.test_client()
    body = pay()
    approval_id = decide(client, body)["approval"]["approval_id"]
    grant = client.post(f"/v1/approvals/{approval_id}", json={"approved": True}, headers=auth(*APPROVER)).get_json()["grant"]
    assert grant.startswith("tgg1.dev.")
    production = dev.extensions["toolgate"].settings.model_copy(update={"env": "production"})
    assert production.approval_signing_keys == []  # no development key in production
    with pytest.raises(ValueError, match="development approval key"):
        GrantSigner([("prod", DEV_APPROVAL_KEY[1])], production=True)
    with pytest.raises(ValueError, match="development approval key"):
        Settings(env="production", approval_keys="prod:" + DEV_APPROVAL_KEY[1].decode(), jwt_hs256_secret="s" * 40,
                 jwt_issuer="https://idp", jwt_audience="gw", audit_key_hash_secret="h" * 40)
    prod_app = make_app(policy_dir=write_policy(tmp_path / "p2", {}), approval_keys="dev:" + "p" * 40)
    denied = decide(prod_app.test_client(), {**body, "approval": {"approval_id": approval_id, "grant": grant}})
    assert denied["decision"] == "deny" and denied["reasons"] == ["approval grant invalid"]


def test_a_served_gateway_expires_approvals_on_its_own(redis_server, tmp_path):
    """gunicorn workers run the sweeper (app/wsgi.py): an unanswered approval expires and its
    webhook is sent without anyone asking."""
    from app.auth.dev_tokens import mint_dev_token
    from tests.support.gateway import GatewayProcess

    with WebhookReceiver() as receiver:
        gateway = GatewayProcess({
            "TOOLGATE_POLICY_DIR": str(write_policy(tmp_path / "p", {"ttl_s": 1})),
            "TOOLGATE_REDIS_URL": redis_server.url,
            "TOOLGATE_AUDIT_DSN": str(tmp_path / "d.sqlite"),
            "TOOLGATE_APPROVAL_KEYS": "k:" + "k" * 40,
            "TOOLGATE_WEBHOOK_URL": receiver.url,
            "TOOLGATE_WEBHOOK_KEYS": f"wh-1:{SECRET}",
            "TOOLGATE_APPROVAL_SWEEP_INTERVAL_S": "0.3",
        }, workers=2, threads=2).start()
        try:
            token = mint_dev_token(Settings(), sub="u-admin", tenant="acme", roles=["admin"])
            import requests

            resp = requests.post(gateway.url + "/v1/decide", json=pay(), timeout=10,
                                 headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex})
            approval_id = resp.json()["approval"]["approval_id"]
            received = receiver.wait_for(2, timeout_s=10)
            time.sleep(1.0)  # both workers sweep: still one expiry event
        finally:
            gateway.stop()
    types = [json.loads(b)["type"] for _, b in receiver.received]
    assert types == ["approval.requested", "approval.expired"], types
    assert json.loads(received[1][1])["approval"]["approval_id"] == approval_id
