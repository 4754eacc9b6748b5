"""The approval rules through HTTP, with real parts (embedded OPA over test-only policies in a
temporary directory, real Redis, real SQLite, real RS256 tokens through a loopback JWKS):
self-approval as the policy's decision with a step-up token, never the requester's own
credential, edit-on-approve, quorum (also concurrent), expiry and escalation, grants bound to
reasons and revision, scoped revocable grants, per-requester caps, oldest-first pages."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.audit.queries import DecisionQuery
from tests.support.approval_policies import write_policy
from tests.support.calls import auth, decide_body, make_token
from tests.support.errors import assert_error

HOLDER = ("u-holder", "acme", ["account_holder"])
APPROVER = ("u-approver", "acme", ["approver"])
APPROVER_2 = ("u-approver-2", "acme", ["approver"])
ADMIN = ("u-admin", "acme", ["admin"])
STEP_UP = "toolgate-step-up"


def pay(amount: float = 1500, recipient: str = "acct_42", **extra):
    return decide_body("processPayment", {"amount": amount, "currency": "EUR", "recipient": recipient}, **extra)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Gateway:
    """A test client of an app over a test policy, with helpers for the approval flow."""

    def __init__(self, make_app, tmp_path, approval: dict, **settings) -> None:
        self.policy_dir = write_policy(tmp_path / f"policy-{uuid.uuid4().hex[:6]}", approval)
        self.app = make_app(policy_dir=self.policy_dir, **settings)
        self.client = self.app.test_client()
        self.deps = self.app.extensions["toolgate"]

    def decide(self, body, identity=ADMIN, key=None, token=None):
        headers = bearer(token) if token else auth(*identity)
        resp = self.client.post("/v1/decide", json=body, headers={**headers, "Idempotency-Key": key or uuid.uuid4().hex})
        return resp

    def ask(self, body, identity=ADMIN, token=None) -> str:
        resp = self.decide(body, identity, token=token)
        data = resp.get_json()
        assert resp.status_code == 200 and data["decision"] == "user-approval", data
        return data["approval"]["approval_id"]

    def answer(self, approval_id, identity=APPROVER, token=None, **body):
        headers = bearer(token) if token else auth(*identity)
        return self.client.post(f"/v1/approvals/{approval_id}", json={"approved": True, "reason": "ok", **body}, headers=headers)

    def records(self, **filters):
        return self.deps.decision_reader.query(DecisionQuery(tenant="acme", **filters), limit=100).records


@pytest.fixture
def gateway(make_app, tmp_path):
    return lambda approval=None, **settings: Gateway(make_app, tmp_path, approval or {}, **settings)


# --- self-approval and credentials ---------------------------------------------------------


def test_a_requester_with_an_approver_role_cannot_approve_her_own_call_by_default(gateway):
    """The first weak rule fails closed: holding the approver role does not let the requester
    approve her own call, with any credential, unless the policy's approval allows it."""
    gw = gateway({"approver_roles": ["account_holder"]})
    approval_id = gw.ask(pay(), HOLDER)
    for token in (make_token(*HOLDER), make_token(*HOLDER, aud=STEP_UP)):
        error = assert_error(gw.answer(approval_id, token=token), 403, "FORBIDDEN", retryable=False)
        assert error["message"] == "an approval cannot be answered by its requester"


def test_an_approval_is_never_accepted_with_the_token_that_made_the_request(gateway):
    """The second weak rule fails closed: the very bearer token of the request is refused as an
    answer, whoever it names and whatever the policy allows."""
    gw = gateway({"approver_roles": ["account_holder", "approver"], "allow_self_approval": True})
    token = make_token("u-agent", "acme", ["admin", "approver", "account_holder"])
    approval_id = gw.ask(pay(), token=token)
    error = assert_error(gw.answer(approval_id, token=token), 403, "FORBIDDEN", retryable=False)
    assert error["message"] == "an approval cannot be given with the credential that made the request"
    # The same token, spelled with another scheme case and spacing, is still the same credential.
    resp = gw.client.post(f"/v1/approvals/{approval_id}", json={"approved": True}, headers={"Authorization": f"bearer   {token}"})
    assert_error(resp, 403, "FORBIDDEN", retryable=False)


def test_self_approval_allowed_by_the_policy_needs_a_fresh_step_up_token(gateway):
    gw = gateway({"approver_roles": ["account_holder"], "allow_self_approval": True})
    body = pay()
    approval_id = gw.ask(body, HOLDER)
    # Her ordinary token (another one than the request's): not enough.
    error = assert_error(gw.answer(approval_id, token=make_token(*HOLDER)), 403, "FORBIDDEN", retryable=False)
    assert "step-up" in error["message"]
    # A token valid for the gateway *and* the step-up audience is not a separate credential.
    both = make_token(*HOLDER, aud=["policy-gateway", STEP_UP])
    assert_error(gw.answer(approval_id, token=both), 403, "FORBIDDEN", retryable=False)
    # A stale step-up token is refused (401).
    stale = make_token(*HOLDER, aud=STEP_UP, iat=int(time.time()) - 3600, nbf=int(time.time()) - 3600)
    assert_error(gw.answer(approval_id, token=stale), 401, "UNAUTHENTICATED", retryable=False)
    # A step-up token is never accepted by the decide call.
    assert_error(gw.decide(pay(), token=make_token(*HOLDER, aud=STEP_UP)), 401, "UNAUTHENTICATED", retryable=False)
    resp = gw.answer(approval_id, token=make_token(*HOLDER, aud=STEP_UP))
    assert resp.status_code == 200, resp.get_json()
    data = resp.get_json()
    assert data["approval"]["votes"][0]["credential"] == "step-up"
    allowed = gw.decide({**body, "approval": {"approval_id": approval_id, "grant": data["grant"]}}, HOLDER).get_json()
    assert allowed["decision"] == "allow" and allowed["ai_sdk_status"] == "approved"


def test_malformed_approval_members_fail_closed(gateway):
    for approval in ({"quorum": 0}, {"quorum": "2"}, {"allow_self_approval": "yes"}, {"escalation": {"after_s": 5}},
                     {"grant_scopes": ["forever"]}, {"unknown_member": 1}, {"max_grant_ttl_s": True}):
        gw = gateway(approval)
        data = gw.decide(pay()).get_json()
        assert data["decision"] == "deny" and data["reasons"] == ["no policy decision"], (approval, data)


# --- edit-on-approve ---------------------------------------------------------------------------


def test_the_approver_narrows_the_input_and_the_retried_call_runs_the_approved_input(gateway):
    gw = gateway()
    body = pay(1500)
    approval_id = gw.ask(body)
    resp = gw.answer(approval_id, input={"amount": 1200, "currency": "EUR", "recipient": "acct_42"}, reason="cap at 1200")
    assert resp.status_code == 200, resp.get_json()
    answer = resp.get_json()
    assert answer["approval"]["answer"]["changes"] == [{"path": "/amount", "requested": 1500, "approved": 1200, "op": "replace"}]
    # The tool service repeats the model's call as it was, with the grant.
    key = uuid.uuid4().hex
    allowed = gw.decide({**body, "approval": {"approval_id": approval_id, "grant": answer["grant"]}}, key=key).get_json()
    assert allowed["decision"] == "allow", allowed
    assert allowed["input"] == {"amount": 1200, "currency": "EUR", "recipient": "acct_42"}
    assert allowed["approval_edit"] == {
        "approval_id": approval_id, "approved_by": ["u-approver"],
        "changes": [{"path": "/amount", "requested": 1500, "approved": 1200, "op": "replace"}],
    }
    assert allowed["idempotency"]["state"] == "reserved"
    # The records keep both: the request's input, the approved one in the answer and the allow.
    asked, answered, used = (gw.records(approval_id=approval_id)[i] for i in (2, 1, 0))
    assert asked.input == {"amount": 1500, "currency": "EUR", "recipient": "acct_42"} and asked.decision == "user-approval"
    assert answered.event == "approval_answer" and answered.input["amount"] == 1200
    assert used.decision == "allow" and used.input["amount"] == 1200
    assert used.input_fingerprint == answered.input_fingerprint != asked.input_fingerprint


def test_an_edit_is_validated_against_the_contract_and_may_not_add_members_or_raise_numbers(gateway):
    gw = gateway()
    approval_id = gw.ask(pay(1500))
    for edited, path in (({"amount": -5, "currency": "EUR", "recipient": "acct_42"}, "/amount"),
                         ({"amount": 1200, "currency": "EUR", "recipient": "acct_42", "memo": "x"}, "/memo"),
                         ({"amount": 1200, "currency": "ZZZ", "recipient": "acct_42"}, "/currency")):
        assert_error(gw.answer(approval_id, input=edited), 422, "VALIDATION_ERROR", retryable=False, path=path)
    raised = gw.answer(approval_id, input={"amount": 99999, "currency": "EUR", "recipient": "acct_42"})
    error = assert_error(raised, 422, "VALIDATION_ERROR", retryable=False, path=["/amount"])
    assert error["details"]["problems"] == [{"path": "/amount", "message": "larger than the requested value"}]
    # Nothing was stored by the refused edits: the approval is still pending.
    shown = gw.client.get(f"/v1/approvals/{approval_id}", headers=auth(*APPROVER)).get_json()
    assert shown["approval"]["state"] == "pending" and shown["approval"]["votes"] == []
    # Each refusal is recorded with the tool and why, where the refused value was.
    refused = [r for r in gw.records(approval_id=approval_id) if r.event == "approval_answer"]
    assert len(refused) == 4
    assert {(r.tool, r.version, r.error_code, r.decision) for r in refused} == {("processPayment", "1", "VALIDATION_ERROR", None)}
    assert refused[0].reasons[-1] == "refused: an approver may lower a number, not raise it (at /amount)"
    assert [r.reasons[-1].split(" (at ")[1] for r in refused] == ["/amount)", "/currency)", "/memo)", "/amount)"]


def test_a_grant_for_an_edited_input_can_also_be_presented_with_the_approved_input(gateway):
    gw = gateway()
    body = pay(1500)
    approval_id = gw.ask(body)
    grant = gw.answer(approval_id, input={"amount": 1100, "currency": "EUR", "recipient": "acct_42"}).get_json()["grant"]
    approved_body = {**body, "input": {"amount": 1100, "currency": "EUR", "recipient": "acct_42"}}
    allowed = gw.decide({**approved_body, "approval": {"approval_id": approval_id, "grant": grant}}).get_json()
    assert allowed["decision"] == "allow" and allowed["input"]["amount"] == 1100
    # Any third input is refused.
    other = {**body, "input": {"amount": 1000.5, "currency": "EUR", "recipient": "acct_42"}}
    denied = gw.decide({**other, "approval": {"approval_id": approval_id, "grant": grant}}).get_json()
    assert denied["decision"] == "deny" and denied["reasons"] == ["approval grant invalid"]


# --- quorum ------------------------------------------------------------------------------------


def test_a_quorum_needs_distinct_approvers(gateway):
    gw = gateway({"quorum": 2})
    body = pay()
    approval_id = gw.ask(body)
    first = gw.answer(approval_id, APPROVER)
    assert first.status_code == 200 and first.get_json()["grant"] is None
    assert first.get_json()["approval"]["state"] == "pending" and len(first.get_json()["approval"]["votes"]) == 1
    again = gw.answer(approval_id, APPROVER)
    assert "already answered" in assert_error(again, 409, "CONFLICT", retryable=False)["message"]
    # Without the grant the call is still not allowed.
    assert gw.decide({**body, "approval": {"approval_id": approval_id}}).get_json()["reasons"] == ["approval grant missing"]
    second = gw.answer(approval_id, APPROVER_2).get_json()
    assert second["approval"]["state"] == "approved" and second["grant"]
    assert second["approval"]["answer"]["approvers"] == ["u-approver", "u-approver-2"]
    allowed = gw.decide({**body, "approval": {"approval_id": approval_id, "grant": second["grant"]}}).get_json()
    assert allowed["decision"] == "allow"


def test_a_quorum_approves_one_input_and_one_denial_decides(gateway):
    gw = gateway({"quorum": 2})
    approval_id = gw.ask(pay(1500))
    edited = {"amount": 1200, "currency": "EUR", "recipient": "acct_42"}
    assert gw.answer(approval_id, APPROVER, input=edited).status_code == 200
    conflict = gw.answer(approval_id, APPROVER_2, input={**edited, "amount": 1300})
    assert "another input" in assert_error(conflict, 409, "CONFLICT", retryable=False)["message"]
    adopted = gw.answer(approval_id, APPROVER_2).get_json()  # approving "as proposed"
    assert adopted["approval"]["state"] == "approved" and adopted["approval"]["answer"]["changes"][0]["approved"] == 1200
    denied_id = gw.ask(pay(1600))
    gw.answer(denied_id, APPROVER)
    denial = gw.answer(denied_id, APPROVER_2, approved=False, reason="no").get_json()
    assert denial["approval"]["state"] == "denied"


def test_concurrent_approvals_toward_a_quorum_count_each_approver_once(gateway):
    gw = gateway({"quorum": 3})
    approval_id = gw.ask(pay())
    approvers = [(f"u-approver-{i}", "acme", ["approver"]) for i in range(10)]
    tokens = {a[0]: make_token(*a) for a in approvers}
    barrier = threading.Barrier(len(approvers))

    def vote(approver):
        barrier.wait()
        resp = gw.answer(approval_id, token=tokens[approver[0]])
        data = resp.get_json()
        if resp.status_code == 409:
            return "conflict"
        assert resp.status_code == 200, data
        return "granted" if data["grant"] else "counted"

    with ThreadPoolExecutor(len(approvers)) as pool:
        outcomes = sorted(pool.map(vote, approvers))
    assert outcomes == ["conflict"] * 7 + ["counted"] * 2 + ["granted"]
    shown = gw.client.get(f"/v1/approvals/{approval_id}", headers=auth(*APPROVER)).get_json()["approval"]
    assert shown["state"] == "approved" and len(shown["answer"]["approvers"]) == 3 == len({v["approver"] for v in shown["votes"]})


# --- expiry and escalation ---------------------------------------------------------------------


def test_an_unanswered_approval_expires_to_deny_and_an_answer_after_expiry_is_refused(gateway):
    gw = gateway({"ttl_s": 1})
    body = pay()
    approval_id = gw.ask(body)
    time.sleep(1.1)
    assert_error(gw.answer(approval_id), 409, "CONFLICT", retryable=False)
    assert gw.deps.approvals.sweep() == (1, 0)
    assert gw.deps.approvals.sweep() == (0, 0)  # once
    shown = gw.client.get(f"/v1/approvals/{approval_id}", headers=auth(*ADMIN)).get_json()["approval"]
    assert shown["state"] == "expired"
    denied = gw.decide({**body, "approval": {"approval_id": approval_id}}).get_json()
    assert denied["decision"] == "deny" and denied["reasons"] == ["approval expired unanswered"]
    assert_error(gw.answer(approval_id), 409, "CONFLICT", retryable=False)


def test_escalation_lets_the_escalation_role_answer_after_its_time(gateway):
    gw = gateway({"escalation": {"after_s": 1, "roles": ["finance_lead"]}})
    approval_id = gw.ask(pay())
    lead = ("u-lead", "acme", ["finance_lead"])
    assert_error(gw.answer(approval_id, lead), 403, "FORBIDDEN", retryable=False)
    assert gw.deps.approvals.sweep() == (0, 0)
    time.sleep(1.1)
    assert gw.deps.approvals.sweep() == (0, 1)
    listed = gw.client.get("/v1/approvals", headers=auth(*lead)).get_json()["approvals"]
    assert [a["approval_id"] for a in listed] == [approval_id] and listed[0]["escalated"] is True
    resp = gw.answer(approval_id, lead)
    assert resp.status_code == 200 and resp.get_json()["grant"]


# --- grants bound to reasons and revision --------------------------------------------------------


def test_a_changed_policy_asks_again_when_its_reasons_change(gateway, make_app):
    gw = gateway()
    body = pay()
    approval_id = gw.ask(body)
    grant = gw.answer(approval_id).get_json()["grant"]
    presented = {**body, "approval": {"approval_id": approval_id, "grant": grant}}
    # Same reasons, another revision: the grant still holds.
    same = make_app(policy_dir=write_policy(gw.policy_dir.parent / "same", {}, comment="reworded")).test_client()
    # New reasons: asked again (a new pending approval), the grant not used.
    changed_dir = write_policy(gw.policy_dir.parent / "changed", {}, extra_reasons=["recipient is on a watch list"])
    changed = make_app(policy_dir=changed_dir).test_client()
    headers = {**auth(*ADMIN), "Idempotency-Key": uuid.uuid4().hex}
    again = changed.post("/v1/decide", json=presented, headers=headers).get_json()
    assert again["decision"] == "user-approval" and again["approval"]["approval_id"] != approval_id
    assert again["reasons"] == ["payment over 1000 needs approval", "recipient is on a watch list"]
    allowed = same.post("/v1/decide", json=presented, headers={**auth(*ADMIN), "Idempotency-Key": uuid.uuid4().hex}).get_json()
    assert allowed["decision"] == "allow" and allowed["policy_revision"] != again["policy_revision"]


# --- scoped grants ---------------------------------------------------------------------------


def test_a_scoped_grant_covers_later_calls_within_its_constraints_until_revoked(gateway):
    gw = gateway({"grant_scopes": ["once", "duration"], "max_grant_ttl_s": 3600})
    approval_id = gw.ask(pay(1500))
    scope = {"kind": "duration", "ttl_s": 600, "constraints": {"/recipient": {"eq": "acct_42"}, "/amount": {"max": 2000}}}
    answer = gw.answer(approval_id, scope=scope).get_json()
    assert "approval" in answer, answer
    grant_id = answer["approval"]["answer"]["scoped_grant_id"]
    assert answer["approval"]["answer"]["scope"] == "duration" and grant_id.startswith("sg_")
    later = gw.decide(pay(1800)).get_json()
    assert later["decision"] == "allow" and later["ai_sdk_status"] == "approved", later
    assert gw.records(decision="allow")[0].approval_id == approval_id
    assert gw.decide(pay(2500)).get_json()["decision"] == "user-approval"
    assert gw.decide(pay(1800, recipient="acct_99")).get_json()["decision"] == "user-approval"
    assert gw.decide(pay(1800), ("u-other", "acme", ["admin"])).get_json()["decision"] == "user-approval"
    listed = gw.client.get("/v1/grants", headers=auth(*APPROVER)).get_json()["grants"]
    assert [(g["grant_id"], g["uses"], g["revoked"]) for g in listed] == [(grant_id, 1, False)]
    revoked = gw.client.delete(f"/v1/grants/{grant_id}", headers=auth(*APPROVER))
    assert revoked.status_code == 200 and revoked.get_json()["grant"]["revoked"] is True
    assert_error(gw.client.delete(f"/v1/grants/{grant_id}", headers=auth(*APPROVER)), 409, "CONFLICT", retryable=False)
    assert_error(gw.client.delete(f"/v1/grants/{grant_id}", headers=auth("u-x", "acme", ["support_agent"])), 403,
                 "FORBIDDEN", retryable=False)
    assert_error(gw.client.delete(f"/v1/grants/{grant_id}", headers=auth("u-approver", "globex", ["approver"])), 404,
                 "NOT_FOUND", retryable=False)
    assert gw.decide(pay(1800)).get_json()["decision"] == "user-approval"
    assert [r.event for r in gw.records(event="grant_revoke")] == ["grant_revoke"] * 3


def test_scopes_the_policy_does_not_offer_or_that_do_not_fit_are_refused(gateway):
    gw = gateway({"grant_scopes": ["once", "conversation"], "max_grant_ttl_s": 900})
    approval_id = gw.ask(pay(1500))
    no_conversation = "the call names no conversation"
    for scope, why in (({"kind": "duration", "ttl_s": 600}, "not offered by the policy"),
                       ({"kind": "conversation", "ttl_s": 600}, no_conversation),
                       ({"kind": "conversation", "ttl_s": 600, "constraints": {"/amount": {"max": 1000}}}, no_conversation)):
        error = assert_error(gw.answer(approval_id, scope=scope), 422, "VALIDATION_ERROR", retryable=False,
                             path="/scope/kind")
        assert error["details"]["problems"][0]["message"] == why, (scope, error)
    conversation = gw.ask(pay(1500, context={"conversation_id": "c-1"}))
    too_long = gw.answer(conversation, scope={"kind": "conversation", "ttl_s": 3600})
    assert_error(too_long, 422, "VALIDATION_ERROR", retryable=False, path="/scope/ttl_s")
    ok = gw.answer(conversation, scope={"kind": "conversation", "ttl_s": 600})
    assert ok.status_code == 200
    assert gw.decide(pay(1700, context={"conversation_id": "c-1"})).get_json()["decision"] == "allow"
    assert gw.decide(pay(1700, context={"conversation_id": "c-2"})).get_json()["decision"] == "user-approval"


# --- caps and pages ------------------------------------------------------------------------------


def test_a_requester_holds_at_most_the_cap_of_pending_approvals(gateway):
    gw = gateway(approval_max_pending_per_subject=2)
    first = pay(1500)
    gw.ask(first)
    gw.ask(pay(1600))
    capped = gw.decide(pay(1700))
    assert_error(capped, 429, "RATE_LIMITED", retryable=True)
    assert 1 <= int(capped.headers["Retry-After"]) <= 600
    assert gw.decide(first).get_json()["decision"] == "user-approval"  # the same call finds its approval
    assert gw.ask(pay(1700), ("u-other", "acme", ["admin"]))  # another requester is not capped


def test_a_tenant_holds_at_most_its_cap_of_pending_approvals(gateway):
    """Many requesters, each under her own cap, cannot bury the tenant's inbox; another tenant
    is not capped by it, and an answered approval frees its place."""
    gw = gateway(approval_max_pending_per_subject=2, approval_max_pending_per_tenant=3)
    asked = [gw.ask(pay(1500 + n), (f"u-{n}", "acme", ["admin"])) for n in range(3)]
    capped = gw.decide(pay(1700), ("u-9", "acme", ["admin"]))
    error = assert_error(capped, 429, "RATE_LIMITED", retryable=True)
    assert error["message"] == "too many pending approvals for this tenant"
    assert 1 <= int(capped.headers["Retry-After"]) <= 900
    assert gw.ask(pay(1700), ("u-9", "globex", ["admin"]))
    assert gw.answer(asked[0]).status_code == 200
    assert gw.ask(pay(1700), ("u-9", "acme", ["admin"]))


def test_the_inbox_is_oldest_first_in_cursor_pages(gateway):
    gw = gateway()
    ids = []
    for amount in range(1001, 1006):
        ids.append(gw.ask(pay(amount)))
        time.sleep(0.002)
    seen, cursor = [], None
    while True:
        query = "/v1/approvals?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = gw.client.get(query, headers=auth(*APPROVER)).get_json()
        seen += [a["approval_id"] for a in page["approvals"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    for bad in ("cursor=%%%", "cursor=bm9wZQ", "cursor=12.ap_short", "limit=%C2%B2", "limit=0"):
        resp = gw.client.get(f"/v1/approvals?{bad}", headers=auth(*APPROVER))
        assert_error(resp, 400, "VALIDATION_ERROR", retryable=False, path=bad.split("=")[0])


def test_a_long_poll_returns_when_the_approval_is_answered(gateway):
    gw = gateway()
    approval_id = gw.ask(pay())
    timer = threading.Timer(0.5, lambda: gw.answer(approval_id))
    started = time.monotonic()
    timer.start()
    resp = gw.client.get(f"/v1/approvals/{approval_id}?wait=10", headers=auth(*ADMIN))
    elapsed = time.monotonic() - started
    timer.join()
    data = resp.get_json()
    assert data["approval"]["state"] == "approved" and data["grant"] and 0.4 < elapsed < 5
    pending = gw.ask(pay(1234))
    started = time.monotonic()
    still = gw.client.get(f"/v1/approvals/{pending}?wait=1", headers=auth(*ADMIN)).get_json()
    assert still["approval"]["state"] == "pending" and time.monotonic() - started >= 0.9
    for bad in ("wait=31", "wait=-1", "wait=1.5", "wait=%C2%B2"):
        resp = gw.client.get(f"/v1/approvals/{pending}?{bad}", headers=auth(*ADMIN))
        assert_error(resp, 400, "VALIDATION_ERROR", retryable=False, path="wait")


# --- the shipped policies ------------------------------------------------------------------------


def test_the_shipped_banking_policy_lets_the_account_holder_confirm_with_a_step_up_token_only(client):
    holder = ("emma", "bank-demo", ["account_holder"])
    body = decide_body("send_money", {"recipient": "UK12345678901234567890", "amount": 98.7, "subject": "gift",
                                      "date": "2026-12-01"})
    token = make_token(*holder)
    asked = client.post("/v1/decide", json=body, headers={**bearer(token), "Idempotency-Key": uuid.uuid4().hex}).get_json()
    assert asked["decision"] == "user-approval", asked
    approval_id = asked["approval"]["approval_id"]
    answer = {"approved": True, "reason": "yes, my gift"}
    for refused in (token, make_token(*holder)):  # the agent's token, or another ordinary one of hers
        resp = client.post(f"/v1/approvals/{approval_id}", json=answer, headers=bearer(refused))
        assert_error(resp, 403, "FORBIDDEN", retryable=False)
    confirmed = client.post(f"/v1/approvals/{approval_id}", json=answer, headers=bearer(make_token(*holder, aud=STEP_UP)))
    assert confirmed.status_code == 200, confirmed.get_json()
    grant = confirmed.get_json()["grant"]
    presented = {**body, "approval": {"approval_id": approval_id, "grant": grant}}
    allowed = client.post("/v1/decide", json=presented, headers={**bearer(token), "Idempotency-Key": uuid.uuid4().hex})
    assert allowed.get_json()["decision"] == "allow"


def test_another_account_holder_neither_sees_nor_answers_a_holders_transfer(client):
    """banking's approval_rules say requester_only: the approval is the account holder's own,
    so another holder of the same role and tenant can neither answer, show nor list it."""
    holder, other = ("emma", "bank-demo", ["account_holder"]), ("mallory", "bank-demo", ["account_holder"])
    body = decide_body("send_money", {"recipient": "US133000000121212121212", "amount": 900.0, "subject": "refund",
                                      "date": "2026-12-01"})
    asked = client.post("/v1/decide", json=body, headers={**auth(*holder), "Idempotency-Key": uuid.uuid4().hex}).get_json()
    assert asked["decision"] == "user-approval", asked
    approval_id = asked["approval"]["approval_id"]
    for token in (make_token(*other), make_token(*other, aud=STEP_UP)):
        resp = client.post(f"/v1/approvals/{approval_id}", json={"approved": True}, headers=bearer(token))
        assert_error(resp, 403, "FORBIDDEN", retryable=False)
    assert_error(client.get(f"/v1/approvals/{approval_id}", headers=auth(*other)), 403, "FORBIDDEN", retryable=False)
    # Her inbox: no approval she may answer, and account_holder is no default approver role.
    assert_error(client.get("/v1/approvals", headers=auth(*other)), 403, "FORBIDDEN", retryable=False)
    shown = client.get(f"/v1/approvals/{approval_id}", headers=auth(*holder)).get_json()["approval"]
    assert shown["requester_only"] is True and shown["state"] == "pending"


def test_the_shipped_payments_policy_needs_two_approvers_above_its_quorum_amount(client):
    body = pay(20000)
    asked = client.post("/v1/decide", json=body, headers={**auth(*ADMIN), "Idempotency-Key": uuid.uuid4().hex}).get_json()
    approval_id = asked["approval"]["approval_id"]
    assert "payment over 10000 needs two approvers" in asked["reasons"]
    listed = client.get("/v1/approvals", headers=auth(*APPROVER)).get_json()["approvals"][0]
    assert {r["id"] for r in listed["matched_rules"]} == {"payments.amount_over_threshold", "payments.amount_over_quorum_threshold"}
    first = client.post(f"/v1/approvals/{approval_id}", json={"approved": True}, headers=auth(*APPROVER)).get_json()
    assert first["approval"]["quorum"] == 2 and first["approval"]["state"] == "pending" and first["grant"] is None
    second = client.post(f"/v1/approvals/{approval_id}", json={"approved": True}, headers=auth(*APPROVER_2)).get_json()
    presented = {**body, "approval": {"approval_id": approval_id, "grant": second["grant"]}}
    allowed = client.post("/v1/decide", json=presented, headers={**auth(*ADMIN), "Idempotency-Key": uuid.uuid4().hex}).get_json()
    assert allowed["decision"] == "allow", allowed


def test_a_call_a_scoped_grant_lets_through_has_a_receipt_naming_the_grant(gateway, tmp_path):
    """The receipt and the decision record agree on the approval that let the call through."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from app.receipts.keys import PublicKeys, private_key_pem
    from app.receipts.verify import verify_receipt

    key_file = tmp_path / "receipt.pem"
    key_file.write_bytes(private_key_pem(Ed25519PrivateKey.generate()))
    gw = gateway({"grant_scopes": ["once", "duration"], "max_grant_ttl_s": 3600}, receipt_key_files=[str(key_file)])
    approval_id = gw.ask(pay(1500))
    scope = {"kind": "duration", "ttl_s": 600, "constraints": {"/amount": {"max": 2000}}}
    assert gw.answer(approval_id, scope=scope).status_code == 200
    later = gw.decide(pay(1800)).get_json()
    assert later["decision"] == "allow", later
    keys = PublicKeys.from_jwks(gw.client.get("/.well-known/toolgate-keys").get_json()["keys"])
    claims = verify_receipt(later["receipt"], keys).claims
    [record] = gw.records(decision="allow", event="decide")
    assert claims.grant_id == record.approval_id == approval_id
