"""The decide pipeline (app.decide.pipeline) step by step, over in-memory stand-ins: what each
path answers, what it records, and what it leaves in Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.decide.phases import Phases
from app.decide.pipeline import decide
from app.decide.stages import DecideCall, Decided, Parsed, Progress, Validated
from app.errors import Conflict, DependencyUnavailable, Unauthenticated, ValidationFailed
from app.models import PolicyDecision
from tests.support import fakes

READ = {"tool": "readFile", "version": "1", "tool_call_id": "call_1", "input": {"path": "/srv/reports/q1.csv"}}
PAY = {"tool": "processPayment", "version": "1", "tool_call_id": "call_7",
       "input": {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}}


def run(deps, body: dict[str, Any] | bytes, *, key: str | None = None, token: str | None = None):
    """``decide`` for one request; returns ``(response or the error, progress)``."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    call = DecideCall(
        request_id="req-1",
        authorization=(token or fakes.bearer(deps.settings),),
        body=raw,
        idempotency_key=key,
    )
    progress = Progress(call)
    try:
        return decide(deps, progress, Phases()), progress
    except Exception as exc:
        return exc, progress


def test_an_allowed_read_is_answered_and_recorded(deps, engine) -> None:
    response, progress = run(deps, READ)
    assert response.decision == "allow" and response.policy_revision == fakes.REVISION
    assert response.idempotency is None and response.approval is None
    assert response.ai_sdk_status == "not-applicable"
    assert isinstance(progress.stage, Decided) and progress.recorded
    policy_input = engine.inputs[0]
    assert policy_input["subject"] == {"id": "u-1", "tenant": "acme", "roles": ["admin"]}
    assert policy_input["tool"] == {
        "name": "readFile", "version": "1", "namespace": "", "registered": True, "mutating": False, "risk": "low",
        "output_labels": ["untrusted_content"],
    }
    [record] = fakes.records(deps)
    assert record.decision_id == progress.stage.call.decision_id == response.decision_id
    assert record.event == "decide" and record.decision == "allow" and record.tool == "readFile"
    assert record.input == READ["input"] and record.input_fingerprint == progress.stage.fingerprint
    assert set(record.durations_ms) == {
        "auth", "validate", "idempotency", "grant", "session", "policy", "limits", "approval", "reserve", "note",
    }


def test_a_mutating_call_reserves_its_key_and_a_retry_replays(deps, engine) -> None:
    engine.script = lambda _: PolicyDecision(decision="allow", reasons=("ok",))
    first, _ = run(deps, {**PAY, "input": {**PAY["input"], "amount": 10}}, key="pay-1")
    assert first.idempotency.state == "reserved" and first.idempotency.reservation_token
    deps.idempotency.complete(
        progress_scope(deps, "pay-1"), "u-1", {"paid": True}, token=first.idempotency.reservation_token
    )
    again, _ = run(deps, {**PAY, "input": {**PAY["input"], "amount": 10}}, key="pay-1")
    assert again.idempotency.state == "replayed" and again.idempotency.result == {"paid": True}
    assert len(engine.inputs) == 2  # the policy runs on replays too
    assert list(fakes.records(deps))[-1].replayed is True


def progress_scope(deps, key: str):
    from app.idempotency.keys import Scope

    return Scope("acme", "u-1", key)


def test_user_approval_opens_one_pending_approval(deps, engine) -> None:
    engine.script = lambda _: PolicyDecision(decision="user-approval", reasons=("payment over 1000 needs approval",))
    response, _ = run(deps, PAY, key="pay-2")
    assert response.decision == "user-approval" and response.ai_sdk_status == "user-approval"
    assert response.approval is not None and response.idempotency is None
    again, _ = run(deps, PAY, key="pay-2")
    assert again.approval.approval_id == response.approval.approval_id  # the same pending approval
    assert [r.approval_id for r in fakes.records(deps)] == [response.approval.approval_id] * 2


def test_a_refused_grant_denies_without_asking_the_policy(deps, engine) -> None:
    body = {**PAY, "approval": {"approval_id": "ap_" + "x" * 32, "grant": "tgg1.k.bad.mac"}}
    response, _ = run(deps, body, key="pay-3")
    assert response.decision == "deny" and response.reasons == ["approval grant invalid"]
    assert engine.inputs == []
    [record] = fakes.records(deps)
    assert record.approval_id == "ap_" + "x" * 32 and record.approver_id is None
    assert "policy" not in record.durations_ms


def test_a_mutating_call_without_a_key_is_refused_and_recorded_with_its_input(deps, engine) -> None:
    error, progress = run(deps, PAY)
    assert isinstance(error, ValidationFailed) and error.http_status == 400
    assert error.details == {"problems": [{"path": "/headers/Idempotency-Key", "message": "required for a mutating tool"}]}
    assert isinstance(progress.stage, Validated) and engine.inputs == []
    [record] = fakes.records(deps)
    assert record.error_code == "VALIDATION_ERROR" and record.decision is None
    assert record.tool == "processPayment" and record.input == PAY["input"]


def test_input_that_fails_its_contract_is_recorded_raw(deps) -> None:
    bad = {**READ, "input": {"path": 7}}
    error, progress = run(deps, bad)
    assert isinstance(error, ValidationFailed) and error.http_status == 422
    assert [p["path"] for p in error.details["problems"]] == ["/path"]
    assert type(progress.stage) is Parsed
    [record] = fakes.records(deps)
    assert record.input == {"path": 7} and record.input_fingerprint is None


def test_an_unauthenticated_call_leaves_no_record(deps, engine) -> None:
    error, progress = run(deps, READ, token="Bearer not.a.token")
    assert isinstance(error, Unauthenticated) and not progress.recorded
    assert list(fakes.records(deps)) == [] and engine.inputs == []


def test_an_engine_outage_is_a_recorded_503(deps, engine) -> None:
    def down(_: dict[str, Any]) -> PolicyDecision:
        raise DependencyUnavailable("policy engine is unavailable")

    engine.script = down
    error, _ = run(deps, READ)
    assert isinstance(error, DependencyUnavailable) and error.retryable
    [record] = fakes.records(deps)
    assert record.error_code == "DEPENDENCY_UNAVAILABLE" and record.decision is None


def test_an_unexpected_failure_is_recorded_as_an_internal_error(deps, engine) -> None:
    def broken(_: dict[str, Any]) -> PolicyDecision:
        raise RuntimeError("bug")

    engine.script = broken
    error, progress = run(deps, READ)
    assert isinstance(error, RuntimeError) and progress.recorded
    [record] = fakes.records(deps)
    assert record.error_code == "INTERNAL_ERROR"


def test_a_decision_that_cannot_be_recorded_is_not_returned_and_gives_its_key_back(deps) -> None:
    deps.decision_log.failing = True
    error, progress = run(deps, {**PAY, "input": {**PAY["input"], "amount": 10}}, key="pay-4")
    assert isinstance(error, DependencyUnavailable) and not progress.recorded
    deps.decision_log.failing = False
    retried, _ = run(deps, {**PAY, "input": {**PAY["input"], "amount": 10}}, key="pay-4")
    assert retried.idempotency.state == "reserved"  # not blocked by the unrecorded call


def test_a_dry_run_reserves_nothing_and_is_recorded_as_such(deps, engine) -> None:
    response, _ = run(deps, {**PAY, "dry_run": True})
    assert response.dry_run is True and response.idempotency is None
    [record] = fakes.records(deps)
    assert record.event == "decide_dry_run" and "idempotency" not in record.durations_ms


def test_a_key_used_with_another_input_is_a_conflict(deps, engine) -> None:
    run(deps, {**PAY, "input": {**PAY["input"], "amount": 10}}, key="pay-5")
    error, _ = run(deps, {**PAY, "input": {**PAY["input"], "amount": 11}}, key="pay-5")
    assert isinstance(error, Conflict) and error.http_status == 422 and error.retryable is False


@pytest.mark.parametrize("body", [b"[]", b"{", b'{"tool": "readFile", "input": {}, "extra": 1}'])
def test_a_malformed_envelope_is_refused_before_the_contract(deps, body: bytes) -> None:
    error, progress = run(deps, body)
    assert isinstance(error, ValidationFailed) and error.http_status in (400, 422)
    assert not isinstance(progress.stage, Parsed)


def test_two_suites_can_each_have_send_email(deps, engine) -> None:
    """Contracts are keyed by namespace, name and version: the call names its namespace, the
    policy sees it, and fingerprints, records and metrics use ``namespace/name``."""
    from dataclasses import replace

    from app.contracts.contract import ContractMetadata
    from app.contracts.json_schema import contract_from_schema
    from app.contracts.registry import ContractRegistry

    def send_email(namespace: str, field: str):
        meta = ContractMetadata(name="send_email", version="1", namespace=namespace, mutating=False, risk="low")
        spec = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
        return contract_from_schema(meta, spec, None, f"{namespace}.yaml")

    suites = replace(deps, contracts=ContractRegistry([send_email("mail", "to"), send_email("crm", "contact_id")]))
    mail, _ = run(suites, {"tool": "send_email", "namespace": "mail", "input": {"to": "a@example.com"}})
    crm, _ = run(suites, {"tool": "send_email", "namespace": "crm", "input": {"contact_id": "c-1"}})
    assert mail.decision == crm.decision == "allow"
    assert mail.tool.namespace == "mail" and crm.tool.namespace == "crm"
    assert [i["tool"]["namespace"] for i in engine.inputs] == ["mail", "crm"]
    wrong, _ = run(suites, {"tool": "send_email", "namespace": "crm", "input": {"to": "a@example.com"}})
    assert isinstance(wrong, ValidationFailed)  # crm's contract, not mail's
    plain, _ = run(suites, {"tool": "send_email", "input": {"to": "a@example.com"}})
    assert plain.decision == "allow" and engine.inputs[-1]["tool"]["registered"] is False  # no default-namespace contract
    assert [r.tool for r in fakes.records(deps)] == ["mail/send_email", "crm/send_email", "crm/send_email", "send_email"]
