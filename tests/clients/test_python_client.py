"""``toolgate_client.ToolgateClient`` against a live gateway (gunicorn, real Redis, the real
embedded OPA engine, SQLite decision log, RS256 tokens through a JWKS): every endpoint, the
typed answers, and the error codes that are never retried (one attempt each)."""

from __future__ import annotations

import uuid

import pytest
from toolgate_client import (
    Conflict,
    Forbidden,
    NotFound,
    ToolgateClient,
    Unauthenticated,
    ValidationFailed,
)
from toolgate_client.client import DECISION_FILTERS

from tests.clients.gateway import IDENTITIES
from tests.support.idempotency import ticket, ticket_input

REPORT = {"path": "/srv/reports/q1.csv"}


def test_allow_deny_and_user_approval_are_typed_decisions(client_for, fresh):
    agent, admin = client_for("agent"), client_for("admin")
    allowed = agent.decide("readFile", REPORT, tool_call_id=fresh("call"), request_id="req-client-allow")
    assert allowed.decision == "allow" and allowed.ai_sdk_status == "not-applicable"
    assert allowed.reasons == ["allowed by policy"] and allowed.request_id == "req-client-allow"
    assert allowed.tool.name == "readFile" and allowed.input == REPORT and allowed.idempotency is None

    denied = agent.decide("processPayment", {"amount": 50, "currency": "EUR", "recipient": "acct_42"},
                          idempotency_key=fresh("pay"))
    assert denied.decision == "deny" and denied.ai_sdk_status == "denied"
    assert denied.reasons == ["role support_agent may not use tool processPayment"]

    pending = admin.decide("processPayment", {"amount": 1500, "currency": "EUR", "recipient": "acct_42"},
                           idempotency_key=fresh("pay"), tool_call_id=fresh("call"))
    assert pending.decision == "user-approval" and pending.approval is not None
    assert pending.approval.request_reason == "payment over 1000 needs approval"
    assert pending.approval.approval_id.startswith("ap_")


def test_validation_error_is_typed_and_sent_once(client_for):
    agent = client_for("agent")
    with pytest.raises(ValidationFailed) as caught:
        agent.decide("readFile", {"path": "/srv/a", "mode": "rw"})
    error = caught.value
    assert (error.status, error.code, error.retryable, error.attempts) == (422, "VALIDATION_ERROR", False, 1)
    assert error.details == {"problems": [{"path": "/mode", "message": "Extra inputs are not permitted"}]}
    assert error.request_id and error.request_id.startswith("tgc-")


def test_bad_token_is_unauthenticated_once(gateway):
    with ToolgateClient(gateway.url, "not-a-token") as client, pytest.raises(Unauthenticated) as caught:
        client.decide("readFile", REPORT)
    assert (caught.value.status, caught.value.attempts, caught.value.retryable) == (401, 1, False)


def test_token_source_is_asked_for_every_call(gateway):
    from tests.clients.gateway import token_for

    asked: list[int] = []

    def token() -> str:
        asked.append(1)
        return token_for("agent")

    with ToolgateClient(gateway.url, token) as client:
        client.decide("readFile", REPORT)
        client.decide("readFile", REPORT)
    assert len(asked) == 2


def test_listing_approvals_without_an_approver_role_is_forbidden_once(client_for):
    with pytest.raises(Forbidden) as caught:
        client_for("agent").list_approvals()
    assert (caught.value.status, caught.value.attempts) == (403, 1)


def test_key_reused_with_another_input_is_a_final_conflict(client_for, fresh):
    agent = client_for("agent")
    first = ticket_input("Printer jammed")
    reserved = agent.decide("createTicket", first, idempotency_key=first["clientMutationId"])
    assert reserved.idempotency is not None and reserved.idempotency.state == "reserved"
    other = {**first, "title": "Printer on fire"}
    with pytest.raises(Conflict) as caught:
        agent.decide("createTicket", other)
    assert (caught.value.status, caught.value.retryable, caught.value.attempts) == (422, False, 1)
    assert caught.value.details == {"reason": "fingerprint_mismatch"}
    # the record is untouched: the owner still completes it and a retry replays it
    agent.complete(first["clientMutationId"], ticket("T-7"), reservation_token=reserved.idempotency.reservation_token)
    replay = agent.decide("createTicket", first)
    assert replay.idempotency is not None and replay.idempotency.result == ticket("T-7")


def test_complete_then_replay_and_retryable_fail_releases(client_for, fresh):
    admin = client_for("admin")
    key = fresh("del")
    reserved = admin.decide("deleteFile", {"path": "/srv/tmp/old.log"}, idempotency_key=key)
    assert reserved.idempotency is not None and reserved.idempotency.state == "reserved"
    released = admin.fail(key, retryable=True, reason="file server returned 503",
                          reservation_token=reserved.idempotency.reservation_token)
    assert released.state == "released" and released.key == key

    again = admin.decide("deleteFile", {"path": "/srv/tmp/old.log"}, idempotency_key=key)
    assert again.idempotency is not None and again.idempotency.state == "reserved"
    done = admin.complete(key, {"deleted": True}, reservation_token=again.idempotency.reservation_token)
    assert done.state == "completed" and done.retention_expires_at
    # a repeated identical report is answered the same
    assert admin.complete(key, {"deleted": True}, reservation_token=again.idempotency.reservation_token).state == "completed"

    replay = admin.decide("deleteFile", {"path": "/srv/tmp/old.log"}, idempotency_key=key)
    assert replay.idempotency is not None
    assert (replay.idempotency.state, replay.idempotency.outcome, replay.idempotency.result) == (
        "replayed", "completed", {"deleted": True})


def test_reporting_an_unknown_key_is_not_found(client_for, fresh):
    with pytest.raises(NotFound) as caught:
        client_for("admin").complete(fresh("nobody/with spaces"), {"x": 1})
    assert caught.value.attempts == 1


def test_approvals_list_show_answer_and_wait(client_for, fresh):
    admin, approver = client_for("admin"), client_for("approver")
    call_id = fresh("call")
    payment = {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}
    asked = admin.decide("processPayment", payment, idempotency_key=fresh("pay"), tool_call_id=call_id)
    assert asked.approval is not None
    approval_id = asked.approval.approval_id

    listed = {a.approval_id: a for a in approver.list_approvals(limit=500)}
    assert approval_id in listed
    assert listed[approval_id].tool_call_id == call_id and listed[approval_id].requester == IDENTITIES["admin"][0]
    assert listed[approval_id].input == payment and listed[approval_id].state == "pending"

    shown = admin.get_approval(approval_id)
    assert shown.approval.state == "pending" and shown.grant is None

    answered = approver.answer_approval(approval_id, approved=True, reason="known recipient")
    assert answered.approval.state == "approved" and answered.grant and answered.grant.startswith("tgg1.")
    assert answered.approval.answer is not None and answered.approval.answer.approver == IDENTITIES["approver"][0]

    waited = admin.wait_for_approval(approval_id, timeout_s=5, poll_interval_s=0.1)
    assert waited.approval.state == "approved" and waited.grant == answered.grant

    with pytest.raises(Conflict) as caught:
        approver.answer_approval(approval_id, approved=False, reason="changed my mind")
    assert (caught.value.status, caught.value.attempts) == (409, 1)


def test_decisions_query_iterate_pages_and_get(client_for, fresh):
    agent, auditor = client_for("agent"), client_for("auditor")
    conversation = fresh("conv")
    made = [agent.decide("readFile", {"path": f"/srv/reports/{n}.csv"}, context={"conversation_id": conversation},
                         request_id=f"{conversation}-{n}") for n in range(7)]

    pages: list[int] = []
    first = auditor.query_decisions(limit=3, subject=IDENTITIES["agent"][0], tool="readFile")
    assert len(first.records) == 3 and first.next_cursor is not None
    pages.append(len(first.records))

    seen = [r.request_id for r in auditor.iter_decisions(page_size=3, subject=IDENTITIES["agent"][0], tool="readFile")
            if r.request_id and r.request_id.startswith(conversation)]
    assert seen == [d.request_id for d in reversed(made)]  # newest first, each once

    one = auditor.get_decision(made[2].decision_id)
    assert one.decision_id == made[2].decision_id and one.decision == "allow" and one.tool == "readFile"
    assert one.request_id == f"{conversation}-2"
    assert set(DECISION_FILTERS) >= {"since", "until", "idempotency_key"}

    with pytest.raises(TypeError):
        auditor.query_decisions(colour="blue")
    with pytest.raises(Forbidden):
        agent.query_decisions()
    with pytest.raises(NotFound):
        auditor.get_decision(str(uuid.uuid4()))


def test_capabilities_list_what_the_callers_policy_lets_it_use(client_for):
    """policies/toolgate/capability over the shipped role grants."""
    agent_tools = client_for("agent").capabilities()
    assert [(t.name, t.version) for t in agent_tools] == [("createTicket", "1"), ("exportReport", "1"), ("readFile", "1")]
    [ticket_tool] = [t for t in agent_tools if t.name == "createTicket"]
    assert ticket_tool.mutating is True and ticket_tool.input_schema["type"] == "object"
    admin_names = {t.name for t in client_for("admin").capabilities()}
    assert {"processPayment", "deleteFile"} <= admin_names and "processPayment" not in {t.name for t in agent_tools}
