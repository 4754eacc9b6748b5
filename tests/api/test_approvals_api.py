"""The human approval flow through HTTP with real tokens, the real engine and a real Redis
(DESIGN §5): user-approval -> approver API -> signed one-time grant -> allow."""

from __future__ import annotations

import base64
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.approvals.grants import GrantSigner
from tests.support.approvals import (
    ADMIN,
    APPROVER,
    PAYMENT_REASON,
    answer,
    approve,
    decide,
    edit_data,
    headers,
    payment,
    policy_copy,
    request_approval,
    with_grant,
)
from tests.support.calls import auth, decide_body, make_token
from tests.support.errors import assert_error

USED = "approval grant already used"
INVALID = "approval grant invalid"
EXPIRED = "approval grant expired"


def grant_claims(grant: str) -> dict:
    payload = grant.split(".")[2]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def assert_denied(data: dict, reason: str) -> None:
    assert data["decision"] == "deny", data
    assert data["reasons"] == [reason]
    assert data["ai_sdk_status"] == "denied"
    assert "approval" not in data and "idempotency" not in data


# --- the processPayment flow ---------------------------------------------------------------------


def test_process_payment_flow_end_to_end(client):
    body = payment(1500)

    # 1. the admin's payment needs approval, with the policy's reason
    first = decide(client, body)
    assert first["decision"] == "user-approval"
    assert first["ai_sdk_status"] == "user-approval"
    assert first["reasons"] == [PAYMENT_REASON]
    approval = first["approval"]
    assert approval["request_reason"] == PAYMENT_REASON
    assert approval["expires_at"].endswith("Z") and approval["approval_id"].startswith("ap_")
    approval_id = approval["approval_id"]

    # 2. the approver lists it and approves it with a reason
    listed = client.get("/v1/approvals?state=pending", headers=auth(*APPROVER))
    assert listed.status_code == 200, listed.get_json()
    [item] = listed.get_json()["approvals"]
    assert item["approval_id"] == approval_id and item["state"] == "pending"
    assert item["requester"] == "u-admin" and item["tool"] == {"name": "processPayment", "version": "1"}
    assert item["tool_call_id"] == body["tool_call_id"] and item["input"] == body["input"]
    assert item["request_reason"] == PAYMENT_REASON and item["approver_roles"] == ["approver"]
    assert item["decision_id"] == first["decision_id"]
    answered = answer(client, approval_id, APPROVER, approved=True, reason="known recipient")
    assert answered.status_code == 200, answered.get_json()
    grant = answered.get_json()["grant"]
    assert grant.startswith("tgg1.k-test.")
    assert answered.get_json()["approval"]["answer"]["reason"] == "known recipient"
    assert answered.get_json()["approval"]["state"] == "approved"
    assert client.get("/v1/approvals", headers=auth(*APPROVER)).get_json()["approvals"] == []

    # 3. the tool service repeats the call with the grant: allow, approved
    allowed = decide(client, with_grant(body, approval_id, grant))
    assert allowed["decision"] == "allow", allowed
    assert allowed["ai_sdk_status"] == "approved"
    assert allowed["reasons"] == [f"{PAYMENT_REASON} (approved by u-approver)"]
    assert allowed["idempotency"]["state"] == "reserved"

    # 4. the same grant again (a new attempt): deny, already used
    assert_denied(decide(client, with_grant(body, approval_id, grant)), USED)
    shown = client.get(f"/v1/approvals/{approval_id}", headers=auth(*ADMIN)).get_json()
    assert shown["approval"]["state"] == "used" and shown["grant"] is None


def test_a_retry_of_the_approved_attempt_gets_the_replay_not_a_deny(client):
    """The approved call reserved its Idempotency-Key; once the tool service reported the result,
    a retry with the same key and grant replays it. Another attempt (another key) is refused."""
    body = payment(1500)
    approval_id, grant = approve(client, body)
    presented = with_grant(body, approval_id, grant)
    allowed = decide(client, presented, key="pay-once")
    assert allowed["idempotency"]["state"] == "reserved"
    in_flight = client.post("/v1/decide", json=presented, headers=headers(key="pay-once"))
    assert_error(in_flight, 409, "CONFLICT", retryable=True)
    done = client.post("/v1/executions/pay-once/complete", json={"result": {"payment_id": "p-1"}}, headers=auth(*ADMIN))
    assert done.status_code == 200, done.get_json()
    replay = decide(client, presented, key="pay-once")
    assert (replay["decision"], replay["ai_sdk_status"]) == ("allow", "approved")
    assert replay["idempotency"]["state"] == "replayed"
    assert replay["idempotency"]["result"] == {"payment_id": "p-1"}
    assert_denied(decide(client, presented, key="pay-twice"), USED)


def test_a_retry_without_the_grant_after_the_approved_run_replays_and_opens_no_approval(client):
    """Issue 24: a settled call stays settled. The requester lost the grant (a new process);
    its retry, same key and input, another tool call id, gets the stored result of the approved
    run instead of a new approval in the approvers' inbox."""
    body = payment(1500)
    approval_id, grant = approve(client, body)
    assert decide(client, with_grant(body, approval_id, grant), key="pay-settled")["idempotency"]["state"] == "reserved"
    done = client.post("/v1/executions/pay-settled/complete", json={"result": {"payment_id": "p-1"}}, headers=auth(*ADMIN))
    assert done.status_code == 200, done.get_json()
    for retry in (body, {**body, "tool_call_id": "call-regenerated"}):
        replay = decide(client, retry, key="pay-settled")
        assert (replay["decision"], replay["ai_sdk_status"]) == ("allow", "not-applicable"), replay
        assert replay["reasons"] == ["this call already ran under its idempotency key: its stored outcome is replayed"]
        assert replay["idempotency"]["state"] == "replayed"
        assert replay["idempotency"]["result"] == {"payment_id": "p-1"}
        assert "approval" not in replay
    assert client.get("/v1/approvals?state=pending", headers=auth(*APPROVER)).get_json()["approvals"] == []
    # The policy still has the last word: a deny is not turned into a replay.
    denied = decide(client, body, identity=("u-admin", "acme", ["support_agent"]), key="pay-settled")
    assert denied["decision"] == "deny"


def test_plain_allow_is_not_applicable(client):
    data = decide(client, payment(10))
    assert (data["decision"], data["ai_sdk_status"]) == ("allow", "not-applicable")
    assert "approval" not in data


def test_policy_deny_is_denied(client):
    data = decide(client, payment(1500), identity=("u-agent", "acme", ["support_agent"]))
    assert (data["decision"], data["ai_sdk_status"]) == ("deny", "denied")


def test_retry_of_the_same_call_returns_the_same_pending_approval(client):
    body = payment(1500)
    first = decide(client, body)["approval"]
    reordered = {**body, "input": dict(reversed(list(body["input"].items())))}
    assert decide(client, reordered)["approval"] == first
    assert decide(client, payment(1500))["approval"]["approval_id"] != first["approval_id"]


def test_requester_picks_the_grant_up_with_get(client):
    body = payment(2500)
    approval_id, grant = approve(client, body)
    resp = client.get(f"/v1/approvals/{approval_id}", headers=auth(*ADMIN))
    assert resp.status_code == 200
    assert resp.get_json()["grant"] == grant
    assert client.get(f"/v1/approvals/{approval_id}", headers=auth(*APPROVER)).get_json()["grant"] is None


def test_denied_approval_makes_the_next_decide_deny_with_the_approvers_reason(client):
    body = payment(5000)
    approval_id = request_approval(client, body)
    resp = answer(client, approval_id, approved=False, reason="recipient is not on the allow list")
    assert resp.status_code == 200 and resp.get_json()["grant"] is None
    assert resp.get_json()["approval"]["state"] == "denied"
    assert_denied(decide(client, with_grant(body, approval_id, None)), "recipient is not on the allow list")


def test_the_answer_is_recorded_in_the_decision_log(app, client):
    approval_id = request_approval(client, payment(1500))
    answered = answer(client, approval_id).get_json()
    log = app.extensions["toolgate"].decision_reader
    record = log.get(answered["approval"]["answer"]["decision_id"], tenant="acme")
    assert (record.event, record.approval_id, record.approver_id, record.decision) == (
        "approval_answer", approval_id, "u-approver", "allow"
    )


# --- the approver API's refusals ------------------------------------------------------------------


def test_answer_by_the_requester_is_forbidden(client):
    requester = ("u-boss", "acme", ["admin", "approver"])
    approval_id = request_approval(client, payment(1500), requester)
    assert_error(answer(client, approval_id, requester), 403, "FORBIDDEN", retryable=False)


def test_holding_an_approver_role_never_lets_the_requester_approve_her_own_call(make_app, monkeypatch):
    """The removed role waiver (TOOLGATE_APPROVAL_SELF_APPROVE_ROLES) fails closed: setting it
    changes nothing; self-approval is the policy's decision (tests/api/test_approvals_rules.py)."""
    monkeypatch.setenv("TOOLGATE_APPROVAL_SELF_APPROVE_ROLES", "approver,admin")
    client = make_app().test_client()
    requester = ("u-boss", "acme", ["admin", "approver"])
    approval_id = request_approval(client, payment(1500), requester)
    error = assert_error(answer(client, approval_id, requester), 403, "FORBIDDEN", retryable=False)
    assert error["message"] == "an approval cannot be answered by its requester"


def test_answer_without_the_role_is_forbidden(client):
    approval_id = request_approval(client, payment(1500))
    for identity in (("u-agent", "acme", ["support_agent"]), ("u-admin-2", "acme", ["admin"])):
        assert_error(answer(client, approval_id, identity), 403, "FORBIDDEN", retryable=False)


def test_listing_without_an_approver_role_is_forbidden(client):
    request_approval(client, payment(1500))
    resp = client.get("/v1/approvals?state=pending", headers=auth("u-agent", "acme", ["support_agent"]))
    assert_error(resp, 403, "FORBIDDEN", retryable=False)


def test_another_tenants_approval_is_not_found_and_not_listed(client):
    approval_id = request_approval(client, payment(1500), ("u-admin", "globex", ["admin"]))
    foreign = ("u-approver", "acme", ["approver"])
    for resp in (
        client.get(f"/v1/approvals/{approval_id}", headers=auth(*foreign)),
        answer(client, approval_id, foreign),
    ):
        assert_error(resp, 404, "NOT_FOUND", retryable=False)
    assert client.get("/v1/approvals", headers=auth(*foreign)).get_json()["approvals"] == []


def test_answering_twice_is_a_conflict(client):
    approval_id = request_approval(client, payment(1500))
    assert answer(client, approval_id).status_code == 200
    resp = answer(client, approval_id, ("u-approver-2", "acme", ["approver"]), approved=False)
    assert_error(resp, 409, "CONFLICT", retryable=False)


def test_answer_after_expiry_is_a_conflict(make_app, tmp_path):
    client = make_app(policy_dir=policy_copy(tmp_path, approvals={"default_ttl_s": 1})).test_client()
    approval_id = request_approval(client, payment(1500))
    time.sleep(1.1)
    assert_error(answer(client, approval_id), 409, "CONFLICT", retryable=False)


@pytest.mark.parametrize(
    ("body", "problem"),
    [({"approved": "yes"}, "/approved"), ({"approved": 1}, "/approved"), ({"reason": "no answer"}, "/approved"),
     ({"approved": True, "extra": 1}, "/extra"), ({"approved": True, "reason": "x" * 501}, "/reason")],
)
def test_malformed_answers_are_rejected(client, body, problem):
    approval_id = request_approval(client, payment(1500))
    resp = client.post(f"/v1/approvals/{approval_id}", json=body, headers=auth(*APPROVER))
    assert_error(resp, 422, "VALIDATION_ERROR", retryable=False, path=problem)


def test_approvals_api_needs_a_token_and_a_known_state(client):
    assert_error(client.get("/v1/approvals"), 401, "UNAUTHENTICATED", retryable=False)
    assert_error(client.post("/v1/approvals/ap_x", json={"approved": True}), 401, "UNAUTHENTICATED", retryable=False)
    for query in ("state=approved", "limit=0"):
        resp = client.get(f"/v1/approvals?{query}", headers=auth(*APPROVER))
        assert_error(resp, 400, "VALIDATION_ERROR", retryable=False, path=[query.split("=", 1)[0]])


# --- every fail-closed case of the issue -----------------------------------------------------------


def test_grant_with_one_bit_flipped_is_invalid(client):
    body = payment(1500)
    approval_id, grant = approve(client, body)
    for index in (0, 5, len(grant) // 2, len(grant) - 1):
        flipped = grant[:index] + chr(ord(grant[index]) ^ 1) + grant[index + 1:]
        assert_denied(decide(client, with_grant(body, approval_id, flipped)), INVALID)
    assert decide(client, with_grant(body, approval_id, grant))["decision"] == "allow"  # the real one still works


@pytest.mark.parametrize(
    "change",
    [
        {"tool": "runCommand", "input": {"command": "ls"}},
        {"version": "2"},
        {"tool_call_id": "call-other"},
        {"input": {"amount": 15000, "currency": "EUR", "recipient": "acct_42"}},
        {"input": {"amount": 1500, "currency": "EUR", "recipient": "acct_666"}},
    ],
)
def test_grant_for_a_changed_call_is_invalid(client, change):
    body = payment(1500)
    approval_id, grant = approve(client, body)
    assert_denied(decide(client, with_grant({**body, **change}, approval_id, grant)), INVALID)


def test_grant_presented_by_another_subject_or_tenant_is_invalid(client):
    body = payment(1500)
    approval_id, grant = approve(client, body)
    for identity in (("u-admin-2", "acme", ["admin"]), ("u-admin", "globex", ["admin"])):
        assert_denied(decide(client, with_grant(body, approval_id, grant), identity), INVALID)
    assert decide(client, with_grant(body, approval_id, grant))["decision"] == "allow"


def test_grant_from_another_tenant_is_invalid(client):
    body = payment(1500)
    globex_admin, globex_approver = ("u-admin", "globex", ["admin"]), ("u-approver", "globex", ["approver"])
    approval_id, grant = approve(client, body, globex_admin, globex_approver)
    assert_denied(decide(client, with_grant(body, approval_id, grant), ADMIN), INVALID)


def test_grant_signed_with_an_unknown_kid_is_invalid(client):
    body = payment(1500)
    approval_id, grant = approve(client, body)
    claims = GrantSigner([("k-test", b"a" * 32)]).verify(grant, now_ms=0)
    forged = GrantSigner([("k-unknown", b"u" * 32)]).sign(claims)
    assert_denied(decide(client, with_grant(body, approval_id, forged)), INVALID)


def test_expired_grant_is_refused(make_app, tmp_path):
    client = make_app(policy_dir=policy_copy(tmp_path, approvals={"default_ttl_s": 1})).test_client()
    body = payment(1500)
    approval_id, grant = approve(client, body)
    time.sleep(1.1)
    assert_denied(decide(client, with_grant(body, approval_id, grant)), EXPIRED)


def test_grant_is_never_a_bearer_token(client):
    body = payment(1500)
    approval_id, grant = approve(client, body)
    resp = client.post(
        "/v1/decide", json=with_grant(body, approval_id, grant), headers={"Authorization": f"Bearer {grant}"}
    )
    assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)
    resp = client.get("/v1/approvals", headers={"Authorization": f"Bearer {grant}"})
    assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)


def test_bearer_token_is_never_a_grant(client):
    body = payment(1500)
    approval_id = request_approval(client, body)
    assert answer(client, approval_id).status_code == 200
    token = make_token(*ADMIN)
    assert_denied(decide(client, with_grant(body, approval_id, token)), INVALID)


def test_missing_grant_fails_closed(client):
    body = payment(1500)
    approval_id = request_approval(client, body)
    assert_denied(decide(client, with_grant(body, approval_id, None)), "approval grant missing")
    assert answer(client, approval_id).status_code == 200
    assert_denied(decide(client, with_grant(body, approval_id, None)), "approval grant missing")


def test_tool_call_id_with_a_newline_is_rejected_before_any_approval(client):
    body = payment(1500, tool_call_id="call-1\ncall-2")
    resp = client.post("/v1/decide", json=body, headers=headers())
    assert_error(resp, 422, "VALIDATION_ERROR", retryable=False, path="/tool_call_id")


def test_tool_call_id_carrying_the_json_of_another_field_cannot_reuse_a_grant(client):
    body = payment(1500, tool_call_id='call-9","tool":"processPayment')
    approval_id, grant = approve(client, body)
    shifted = payment(1500, tool_call_id="call-9")
    assert_denied(decide(client, with_grant(shifted, approval_id, grant)), INVALID)
    assert grant_claims(grant)["tool_call_id"] == 'call-9","tool":"processPayment'
    assert decide(client, with_grant(body, approval_id, grant))["decision"] == "allow"


# --- policy and keys change between approval and use ---------------------------------------------


def test_policy_changed_to_deny_between_approval_and_use_deny_wins(make_app, tmp_path):
    policies = policy_copy(tmp_path)
    client = make_app(policy_dir=policies).test_client()
    body = payment(1500)
    approval_id, grant = approve(client, body)
    roles = json.loads((policies / "data.json").read_text())["roles"]
    roles["admin"]["tools"].remove("processPayment")
    edit_data(policies, roles=roles)
    changed = make_app(policy_dir=policies).test_client()
    data = decide(changed, with_grant(body, approval_id, grant))
    assert_denied(data, "role admin may not use tool processPayment")
    # the refusal did not use the grant up: under the shipped policy it still works
    restored = make_app().test_client()
    assert decide(restored, with_grant(body, approval_id, grant))["decision"] == "allow"


def test_key_rotation_old_kid_verifies_while_configured_then_fails(make_app, base_settings):
    new, old = "k-test:" + "a" * 32, "k-old:" + "b" * 32
    before = make_app(approval_keys=old).test_client()
    during = make_app(approval_keys=f"{new},{old}").test_client()
    after = make_app(approval_keys=new).test_client()

    first, second = payment(1500), payment(1600)
    first_id, first_grant = approve(before, first)
    second_id, second_grant = approve(before, second)
    assert first_grant.split(".")[1] == second_grant.split(".")[1] == "k-old"

    assert decide(during, with_grant(first, first_id, first_grant))["decision"] == "allow"
    assert_denied(decide(after, with_grant(second, second_id, second_grant)), INVALID)
    # grants issued during the rotation are signed with the new key and verify afterwards
    third = payment(1700)
    third_id, third_grant = approve(during, third)
    assert third_grant.split(".")[1] == "k-test"
    assert decide(after, with_grant(third, third_id, third_grant))["decision"] == "allow"


# --- one-time use under concurrency -----------------------------------------------------------------


def test_the_same_grant_sent_by_twenty_threads_is_accepted_exactly_once(make_app):
    app = make_app(threads=32, redis_socket_timeout_ms=2000)
    body = payment(1500)
    approval_id, grant = approve(app.test_client(), body)
    presented = with_grant(body, approval_id, grant)
    barrier = threading.Barrier(20)

    def send(_):
        client = app.test_client()
        request_headers = headers()
        barrier.wait()
        resp = client.post("/v1/decide", json=presented, headers=request_headers)
        assert resp.status_code == 200, resp.get_json()
        return resp.get_json()

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(send, range(20)))
    allowed = [r for r in results if r["decision"] == "allow"]
    assert len(allowed) == 1 and allowed[0]["ai_sdk_status"] == "approved"
    assert sorted(r["reasons"][0] for r in results if r["decision"] != "allow") == [USED] * 19


# --- the docs -------------------------------------------------------------------------------------


def test_openapi_documents_the_approvals_api(client):
    paths = client.get("/openapi.json").get_json()["paths"]
    assert {"get"} <= set(paths["/v1/approvals"])
    assert {"get", "post"} <= set(paths["/v1/approvals/{approval_id}"])


# --- the policy cases about approvals (tests/data/cases/policy-cases.jsonl) ------------------------

CASES_REGO = """
# Test-only family for the approval cases pc-03, pc-19, pc-21 and pc-23.
package tools.cases

governs.kubectl := {}

governs.delete_file := {}

approver_roles := ["approver"]

approval_required contains {"rule": "kubectl_by_oncall", "message": "kubectl by oncall"} if {
	input.tool.name == "kubectl"
	"sre-oncall" in input.subject.roles
}

approval_required contains {"rule": "deletes_need_a_human", "message": "deletes need a human"} if {
	input.tool.name == "delete_file"
}

deny contains {"rule": "account_suspended", "message": "account suspended"} if "suspended" in input.subject.roles
"""

CASE_CONTRACTS = {
    "kubectl": {"verb": {"type": "string"}, "resource": {"type": "string"}, "name": {"type": "string"}},
    "delete_file": {"path": {"type": "string", "minLength": 1}, "recursive": {"type": "boolean"}},
}

ONCALL = ("u-oncall", "acme", ["sre-oncall"])
ALICE = ("u-alice", "acme", ["developer"])


@pytest.fixture
def cases_client(make_app, tmp_path):
    """An app whose policy is the shipped library plus ``CASES_REGO`` and whose contracts add
    kubectl and delete_file (roles: sre-oncall may use kubectl, developer delete_file)."""
    policies = policy_copy(tmp_path)
    (policies / "tools" / "cases").mkdir()
    (policies / "tools" / "cases" / "cases.rego").write_text(CASES_REGO)
    roles = json.loads((policies / "data.json").read_text())["roles"]
    roles["sre-oncall"] = {"tools": ["kubectl"], "dynamic_tools": False}
    roles["developer"]["tools"].append("delete_file")
    edit_data(policies, roles=roles)
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    for name, properties in CASE_CONTRACTS.items():
        contract = {
            "name": name, "version": "1", "mutating": True, "risk": "high",
            "input_schema": {"type": "object", "properties": properties, "required": [next(iter(properties))]},
        }
        (contracts / f"{name}.v1.json").write_text(json.dumps(contract))
    return make_app(policy_dir=policies, contracts_dir=contracts).test_client()


def test_pc03_kubectl_by_oncall_needs_approval_bound_to_the_call(cases_client):
    """pc-03. DESIGN wins where the case differs: the user-approval response carries
    ``approval {approval_id, request_reason, expires_at}``; the signed part (the grant) is issued
    when an approver approves, and it binds approval id, tool_call_id, tool, the input fingerprint
    and the subject, but not the conversation (``context`` is caller-supplied and untrusted)."""
    from app.fingerprint import fingerprint

    body = decide_body("kubectl", {"verb": "delete", "resource": "pod", "name": "api-7f9"},
                       tool_call_id="call-03", context={"conversation_id": "conv-03"})
    data = decide(cases_client, body, ONCALL)
    assert (data["decision"], data["reasons"]) == ("user-approval", ["kubectl by oncall"])
    approval_id = data["approval"]["approval_id"]
    assert data["approval"]["request_reason"] == "kubectl by oncall"
    shown = cases_client.get(f"/v1/approvals/{approval_id}", headers=auth(*APPROVER)).get_json()["approval"]
    assert shown["request_reason"] == "kubectl by oncall"  # shown to the approver
    claims = grant_claims(answer(cases_client, approval_id).get_json()["grant"])
    assert claims["approval_id"] == approval_id
    assert (claims["tool_call_id"], claims["tool"], claims["subject"]) == ("call-03", "kubectl", "u-oncall")
    assert claims["input_fingerprint"] == fingerprint("acme", "u-oncall", "kubectl", "1", body["input"])
    assert "conv-03" not in json.dumps(claims)
    # another call needs its own approval: ids are unique
    other = decide(cases_client, {**body, "tool_call_id": "call-03b"}, ONCALL)
    assert other["approval"]["approval_id"] != approval_id


def test_pc19_valid_approval_with_reordered_input_keys_is_allowed_and_consumed(cases_client):
    """pc-19. The approval id is the server's (not ``appr-19``) and the signature is our grant."""
    body = decide_body("delete_file", {"path": "/tmp/a.txt", "recursive": False},
                       tool_call_id="call-19", context={"conversation_id": "conv-19"})
    first = decide(cases_client, body, ALICE)
    assert (first["decision"], first["reasons"]) == ("user-approval", ["deletes need a human"])
    approval_id = first["approval"]["approval_id"]
    grant = answer(cases_client, approval_id).get_json()["grant"]
    reordered = {**body, "input": {"recursive": False, "path": "/tmp/a.txt"}}
    data = decide(cases_client, with_grant(reordered, approval_id, grant), ALICE)
    assert (data["decision"], data["ai_sdk_status"]) == ("allow", "approved")
    state = cases_client.get(f"/v1/approvals/{approval_id}", headers=auth(*ALICE)).get_json()["approval"]["state"]
    assert state == "used"


def test_pc21_approval_without_a_signature_is_denied(cases_client):
    """pc-21. DESIGN wins: there is no ``reject`` decision, a missing grant is a ``deny`` with the
    stable reason "approval grant missing" (the case's "missing signature"); the case's
    self-asserted ``approved: true`` is not part of the API at all (422, see
    tests/faults/test_approval_faults.py)."""
    body = decide_body("delete_file", {"path": "/tmp/b.txt"}, tool_call_id="call-21",
                       context={"conversation_id": "conv-21"})
    approval_id = decide(cases_client, body, ALICE)["approval"]["approval_id"]
    data = decide(cases_client, with_grant(body, approval_id, None), ALICE)
    assert_denied(data, "approval grant missing")
    data = decide(cases_client, with_grant(body, "appr-21", None), ALICE)
    assert_denied(data, "approval grant missing")


def test_pc23_policy_denial_at_use_wins_over_a_valid_approval(cases_client):
    """pc-23. DESIGN §2 builds the subject from verified ``sub``, tenant and roles only, so a
    ``suspended`` claim never reaches the policy; the suspension is a ``suspended`` role in the
    caller's verified token instead. The grant is left unused by the denial."""
    body = decide_body("delete_file", {"path": "/tmp/c.txt"}, tool_call_id="call-23",
                       context={"conversation_id": "conv-23"})
    approval_id = decide(cases_client, body, ALICE)["approval"]["approval_id"]
    grant = answer(cases_client, approval_id).get_json()["grant"]
    suspended = ("u-alice", "acme", ["developer", "suspended"])
    assert_denied(decide(cases_client, with_grant(body, approval_id, grant), suspended), "account suspended")
    state = cases_client.get(f"/v1/approvals/{approval_id}", headers=auth(*ALICE)).get_json()["approval"]["state"]
    assert state == "approved"
