"""Refunds never exceed what was spent (docs/session.md "Counts and budgets"): a failure report
gives a call's budget share back at most once, and only when it comes while the call's
reservation lease is running; after the lease expired the share stays spent (the call may have
run). Through HTTP with the shipped policy (processPayment: at most 50,000 EUR a day per subject,
payments of at most 1,000 EUR need no approval), the real embedded engine and real Redis.

A lease expires here by its Redis key's own expiry, shortened to 1 ms (the key is what the
state machine reads as "the lease is running"), instead of waiting the contract's lease.
"""

from __future__ import annotations

import time
import uuid
from typing import Any
from urllib.parse import quote

from app.idempotency.keys import Scope
from tests.support.calls import auth, decide_body

PAYER = ("u-payer", "acme", ["admin"])


def pay(client, amount: float, key: str) -> dict[str, Any]:
    body = decide_body("processPayment", {"amount": amount, "currency": "EUR", "recipient": "acct_42"})
    resp = client.post("/v1/decide", json=body, headers={**auth(*PAYER), "Idempotency-Key": key})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def report(client, key: str, outcome: str, body: dict[str, Any]):
    return client.post(f"/v1/executions/{quote(key, safe='')}/{outcome}", json=body, headers=auth(*PAYER))


def expire_lease(redis_client, key: str) -> None:
    _, lease = Scope(PAYER[1], PAYER[0], key).redis_keys
    assert redis_client.pexpire(lease, 1)
    while redis_client.exists(lease):
        time.sleep(0.005)


def test_failures_reported_after_the_lease_cannot_carry_70000_through_a_50000_budget(client, redis_client):
    """70 payments of 1,000, each run and then reported failed (retryable: the key is released
    for a re-run) after its lease expired. On main every late report gave its share back and all
    70 were allowed: 70,000 EUR through the 50,000 budget."""
    decisions = []
    for _ in range(70):
        key = uuid.uuid4().hex
        decided = pay(client, 1000, key)
        decisions.append(decided["decision"])
        if decided["decision"] == "allow":
            expire_lease(redis_client, key)
            late = report(client, key, "fail", {"retryable": True, "reason": "the bank timed out"})
            assert late.status_code == 200 and late.get_json()["state"] == "released", late.get_json()
    assert decisions.count("allow") == 50
    assert set(decisions[50:]) == {"deny"}
    assert pay(client, 1, uuid.uuid4().hex)["reasons"] == [
        "limit payments.daily_budget reached (50000 of 50000 used in 24h)"
    ]


def test_a_failure_within_the_lease_gives_the_share_back_once_and_a_late_one_keeps_it_spent(client, redis_client):
    for _ in range(49):
        key = uuid.uuid4().hex
        assert pay(client, 1000, key)["decision"] == "allow"
        assert report(client, key, "complete", {"result": {"payment_id": key}}).status_code == 200
    # In the lease: the share comes back, once, however often the failure is reported.
    within = uuid.uuid4().hex
    assert pay(client, 1000, within)["decision"] == "allow"
    for _ in range(3):
        again = report(client, within, "fail", {"retryable": False, "reason": "card declined"})
        assert again.status_code == 200 and again.get_json()["state"] == "failed"
    # After the lease: the failure is recorded, the share stays spent.
    late = uuid.uuid4().hex
    assert pay(client, 1000, late)["decision"] == "allow"
    expire_lease(redis_client, late)
    reported = report(client, late, "fail", {"retryable": False, "reason": "card declined"})
    assert reported.status_code == 200 and reported.get_json()["state"] == "failed"
    assert pay(client, 1, uuid.uuid4().hex)["reasons"] == [
        "limit payments.daily_budget reached (50000 of 50000 used in 24h)"
    ]
