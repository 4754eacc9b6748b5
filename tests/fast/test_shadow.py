"""The shadow step of the decide pipeline (app.decide.shadow, app.engine.shadow) over in-memory
stand-ins: the candidate never changes an answer, is recorded beside it, is counted, and a
slow, failing or unusable candidate costs at most its deadline.

The candidate engine is scripted (``Candidate``) like the active one, to reach every outcome;
the real embedded candidate is exercised in ``tests/api/test_shadow_api.py``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from app import metrics
from app.decide.phases import Phases
from app.engine.embedded import EvaluationFailed, RawResult
from app.engine.shadow import ShadowEvaluator
from app.errors import DependencyUnavailable
from app.models import PolicyDecision, ShadowOutcome
from tests.fast.test_pipeline import PAY, READ, run
from tests.support import fakes

DENY_ALL = {"decision": "deny", "reasons": ["candidate says no"],
            "matched_rules": [{"id": "files.candidate_rule", "effect": "deny", "message": "candidate says no"}]}


class Candidate:
    """A scripted candidate engine: ``script(policy_input)`` returns the raw document value
    (or raises); ``gate`` (an Event) holds every evaluation until it is set."""

    def __init__(self, script: Any = None) -> None:
        self.script = script or (lambda _: DENY_ALL)
        self.inputs: list[dict[str, Any]] = []
        self.gate: threading.Event | None = None
        self.active_revision: str | None = "sha256:candidate00000000"

    def evaluate_raw(self, policy_input: dict[str, Any]) -> RawResult:
        self.inputs.append(policy_input)
        if self.gate is not None:
            self.gate.wait(10)
        value = self.script(policy_input)
        return RawResult(value, value is not None, "sha256:candidate00000000")

    def warm(self) -> None:
        return None

    def status(self, *, with_detail: bool = True) -> dict[str, Any]:
        return {"engine": "scripted", "revision": self.active_revision}

    def close(self) -> None:
        return None


@pytest.fixture
def candidate(deps) -> Candidate:
    scripted = Candidate()
    # A deadline no scripted evaluation misses on a loaded machine; the slow-candidate test sets its own.
    object.__setattr__(deps, "shadow", ShadowEvaluator(scripted, deadline_ms=2000, workers=1))
    yield scripted
    if scripted.gate is not None:
        scripted.gate.set()


def _count(name: str, labels: dict[str, str]) -> float:
    return metrics.DEFAULT_REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_disagreeing_candidate_is_recorded_and_counted_but_changes_nothing(deps, engine, candidate) -> None:
    labels = {"tool": "readFile", "active": "allow", "shadow": "deny", "agreement": "disagree"}
    before = _count("toolgate_shadow_decisions_total", labels)
    response, _ = run(deps, READ)
    assert response.decision == "allow" and response.reasons == ["allowed by script"]
    assert "shadow" not in response.model_dump()
    assert candidate.inputs == engine.inputs  # the very same input document
    [record] = fakes.records(deps)
    assert record.decision == record.policy_decision == "allow"
    assert record.shadow == {
        "source": "candidate", "revision": "sha256:candidate00000000", "decision": "deny",
        "reasons": ["candidate says no"],
        "matched_rules": [{"id": "files.candidate_rule", "effect": "deny", "message": "candidate says no"}],
        "error": None, "agrees": False,
    }
    assert record.shadow_outcome == "disagrees" and "shadow" in record.durations_ms
    assert _count("toolgate_shadow_decisions_total", labels) == before + 1


def test_an_agreeing_candidate(deps, candidate) -> None:
    candidate.script = lambda _: {"decision": "allow", "reasons": ["fine"]}
    run(deps, READ)
    [record] = fakes.records(deps)
    assert record.shadow["agrees"] is True and record.shadow_outcome == "agrees"


def test_the_candidate_never_touches_the_reservation_or_the_approval(deps, engine, candidate) -> None:
    engine.script = lambda _: PolicyDecision(decision="user-approval", reasons=("needs a look",))
    candidate.script = lambda _: {"decision": "allow", "reasons": ["fine"]}
    response, _ = run(deps, PAY, key="pay-shadow")
    assert response.decision == "user-approval" and response.approval is not None and response.idempotency is None
    engine.script = lambda _: PolicyDecision(decision="deny", reasons=("no",))
    denied, _ = run(deps, {**PAY, "tool_call_id": "call_8"}, key="pay-shadow-2")
    assert denied.decision == "deny" and denied.idempotency is None
    assert [r.shadow["decision"] for r in fakes.records(deps)] == ["allow", "allow"]


def test_a_slow_candidate_is_abandoned_at_its_deadline_and_the_next_call_does_not_wait(deps, candidate) -> None:
    candidate.gate = threading.Event()  # the candidate hangs until released
    object.__setattr__(deps, "shadow", ShadowEvaluator(candidate, deadline_ms=500, workers=1))
    started = time.monotonic()
    response, _ = run(deps, READ)
    first = time.monotonic() - started
    started = time.monotonic()
    again, _ = run(deps, READ)  # the only shadow worker is still busy with the abandoned one
    second = time.monotonic() - started
    assert response.decision == again.decision == "allow"
    assert 0.5 <= first < 5.0 and second < first
    first_record, second_record = fakes.records(deps)
    # The time spent waiting for the shadow: up to the deadline (counted from the candidate's
    # start, before the active evaluation and the approval step), then nothing at all.
    assert 250 <= first_record.durations_ms["shadow"] <= 2500 and second_record.durations_ms["shadow"] < 250
    assert first_record.shadow["error"] == "timeout" and first_record.shadow["revision"] == "sha256:candidate00000000"
    assert second_record.shadow["error"] == "overloaded" and second_record.shadow_outcome == "error"
    candidate.gate.set()  # the abandoned evaluation ends; its result is dropped and the worker is free again
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        run(deps, READ)
        if list(fakes.records(deps))[-1].shadow.get("decision") == "deny":
            break
    assert list(fakes.records(deps))[-1].shadow["decision"] == "deny"


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (lambda _: (_ for _ in ()).throw(EvaluationFailed("policy evaluation failed")), "evaluation_error"),
        (lambda _: (_ for _ in ()).throw(DependencyUnavailable("policy engine is unavailable")), "unavailable"),
        (lambda _: None, "invalid_result"),
        (lambda _: {"decision": "yes"}, "invalid_result"),
        (lambda _: True, "invalid_result"),
    ],
    ids=["evaluation-error", "no-bundle", "undefined", "unknown-word", "bare-true"],
)
def test_a_failing_candidate_is_an_error_outcome_not_a_failed_call(deps, candidate, script, error) -> None:
    candidate.script = script
    before = _count("toolgate_shadow_errors_total", {"source": "candidate", "kind": error})
    invalid_before = _count("toolgate_policy_invalid_results_total", {})
    response, _ = run(deps, READ)
    assert response.decision == "allow"
    [record] = fakes.records(deps)
    assert record.shadow["error"] == error and record.shadow["decision"] is None and record.shadow["agrees"] is None
    assert _count("toolgate_shadow_errors_total", {"source": "candidate", "kind": error}) == before + 1
    assert _count("toolgate_policy_invalid_results_total", {}) == invalid_before  # the active policy's metric


def test_the_active_policys_log_only_view_is_the_shadow_without_a_candidate(deps, engine) -> None:
    view = ShadowOutcome(source="log_only", revision="scripted", decision="deny", reasons=("strict",))
    engine.script = lambda _: PolicyDecision(decision="allow", reasons=("ok",), log_only=view)
    response, _ = run(deps, READ)
    assert response.decision == "allow"
    [record] = fakes.records(deps)
    assert record.shadow["source"] == "log_only" and record.shadow["decision"] == "deny" and not record.shadow["agrees"]
    assert "shadow" not in record.durations_ms  # nothing was waited for


def test_no_shadow_leaves_no_shadow_member(deps) -> None:
    run(deps, READ)
    [record] = fakes.records(deps)
    assert record.shadow is None and record.shadow_outcome is None and record.policy_decision == "allow"


def test_a_failing_active_policy_still_fails_the_call_with_a_candidate(deps, engine, candidate) -> None:
    def broken(_: dict[str, Any]) -> PolicyDecision:
        raise DependencyUnavailable("policy engine is unavailable")

    engine.script = broken
    error, _ = run(deps, READ)
    assert isinstance(error, DependencyUnavailable)
    [record] = fakes.records(deps)
    assert record.error_code == "DEPENDENCY_UNAVAILABLE" and record.shadow is None and record.policy_input is None


def test_the_record_keeps_the_policy_input_minus_what_must_not_be_stored(deps, engine) -> None:
    body = {**READ, "context": {"conversation_id": "c-9", "user_prompt": "my card is 4111 1111 1111 1111"}}
    run(deps, body)
    [record] = fakes.records(deps)
    seen = engine.inputs[0]
    assert record.policy_input_redacted == ("/context/user_prompt",)
    assert record.policy_input["context"] == {"conversation_id": "c-9", "user_prompt": "[REDACTED]"}
    assert "input" not in record.policy_input["call"] and record.policy_input["call"]["id"] == "call_1"
    assert {k: v for k, v in record.evaluated_input().items() if k != "context"} == {
        k: v for k, v in seen.items() if k != "context"
    }
    assert record.policy_input["history"] == seen["history"] and record.policy_input["request"] == seen["request"]


def test_kept_context_fields_are_a_setting(tmp_path, engine) -> None:
    config = fakes.settings(tmp_path, audit_context_fields="conversation_id,user_prompt")
    built = fakes.deps(config, engine)
    try:
        run(built, {**READ, "context": {"conversation_id": "c-9", "user_prompt": "read q1"}})
        [record] = fakes.records(built)
        assert record.policy_input_redacted == () and record.evaluated_input() == engine.inputs[0]
    finally:
        built.decision_log.close()


def test_a_refused_approval_was_not_evaluated(deps, candidate) -> None:
    body = {**PAY, "approval": {"approval_id": "ap_" + "A" * 32, "grant": "tgg1.k-fast.e30.AAAA"}}
    response, _ = run(deps, body, key="pay-refused")
    assert response.decision == "deny"
    [record] = fakes.records(deps)
    assert record.policy_input is None and record.policy_decision is None and record.shadow is None
    assert candidate.inputs == []


def test_phases_name_the_shadow_wait() -> None:
    assert "shadow" in metrics.PHASES and Phases().ms == {}


def test_with_a_grant_the_shadow_is_that_of_the_evaluation_that_decided(deps, engine, candidate) -> None:
    """The approval step asks the policy twice (without the grant, then with it): the record
    keeps the second input and the candidate's answer on it; the first candidate evaluation is
    discarded, never counted."""
    from tests.fast.test_approval_outcome import REASON, approve, policy

    engine.script = policy(REASON)
    candidate.script = lambda document: (
        {"decision": "allow", "reasons": ["approved"]} if document["approval"]
        else {"decision": "user-approval", "reasons": [REASON], "approval": {"approver_roles": ["approver"]}}
    )
    asked, _ = run(deps, PAY, key="k-shadow")
    _, grant = approve(deps, asked.approval.approval_id)
    labels = {"tool": "processPayment", "active": "allow", "shadow": "allow", "agreement": "agree"}
    before = _count("toolgate_shadow_decisions_total", labels)
    presented = {**PAY, "approval": {"approval_id": asked.approval.approval_id, "grant": grant}}
    allowed, _ = run(deps, presented, key="k-shadow")
    assert allowed.decision == "allow"
    [record] = [r for r in fakes.records(deps) if r.decision_id == allowed.decision_id]
    assert record.policy_decision == "allow" and record.policy_input["approval"]
    assert record.shadow["decision"] == "allow" and record.shadow["agrees"] is True
    assert _count("toolgate_shadow_decisions_total", labels) == before + 1
    assert [bool(i["approval"]) for i in engine.inputs] == [False, False, True]
