"""The decision record of each kind of recorded call (DESIGN §6), built from what the call
learnt and how it ended. Inputs are stored with the contract's sensitive paths redacted;
idempotency keys only as their keyed hash. A decide call's record also keeps the policy input
its policy saw, minus what must not be stored (``recorded_policy_input``), its policy's own
decision and the shadow outcome beside it, so that the call can be evaluated again."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from app.approvals.presented import Granted
from app.approvals.records import Approval, StoredScopedGrant
from app.audit.records import AuditEvent, is_storable
from app.contracts.contract import pointer
from app.contracts.redaction import REDACTED, redact
from app.decide import shadow
from app.decide.stages import Authenticated, Decided, Evaluation, Parsed, Prepared, Refusal, Validated, conversation_id
from app.errors import InternalError, ToolgateError
from app.models import ApprovalAnswerBody, Subject
from app.vocabulary import EventType, qualified_tool

KeyHash = Callable[[str], str]
_MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class RequestFacts:
    """The request id and W3C trace id of a recorded call that is not a decide call."""

    request_id: str
    trace_id: str | None


def _caller(request: RequestFacts, subject: Subject) -> dict[str, Any]:
    """The record fields that say who called and in which request."""
    return {
        "request_id": request.request_id,
        "trace_id": request.trace_id,
        "tenant": subject.tenant,
        "subject_id": subject.id,
        "roles": subject.roles,
    }


def _error_code(error: ToolgateError | None, succeeded: bool) -> str | None:
    if error is not None:
        return error.code
    return None if succeeded else InternalError.code


def _recorded_input(stage: Authenticated) -> tuple[dict[str, Any] | None, list[str]]:
    """The input as the record keeps it, and the JSON Pointers redacted: the normalized input
    with the sensitive paths redacted; for input that failed validation, the raw input redacted
    the same way, or nothing when the contract has sensitive paths (in invalid input their
    values may sit anywhere), or when it cannot be canonicalized (RFC 8785)."""
    if isinstance(stage, Validated):
        redacted, paths = redact(stage.normalized_input, stage.sensitive_paths)
        storable = stage.fingerprint is not None or is_storable(redacted)
    elif isinstance(stage, Parsed) and not stage.sensitive_paths:
        redacted, paths = redact(stage.request.input, ())
        storable = is_storable(redacted)
    else:
        return None, []
    return (redacted, paths) if storable else (None, paths)


def recorded_policy_input(
    evaluation: Evaluation, input_redacted: list[str], context_fields: Collection[str]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """What the record keeps of the policy input of ``evaluation``, and the JSON Pointers
    (into the policy input) whose values it does not keep.

    Kept: the whole document but ``call.input`` (the record's ``input``, already redacted at
    ``input_redacted``, the contract's sensitive paths) and the members of ``context`` not in
    ``context_fields`` (the caller's untrusted text: prompts, anything it chose to send), which
    are replaced by ``[REDACTED]``. ``subject``, ``tool``, ``call.id``, the trusted
    ``history`` and ``session`` (built by the gateway from its own records), the verified
    ``approval`` and ``request`` (its id and time) are kept as the policy saw them. A kept
    document without an RFC 8785 form is dropped by the decision log's writer, which encodes
    it once with the rest of the record (``app.audit.sql_writer.encoded``)."""
    document = evaluation.document
    context = document.get("context") or {}
    kept_context: dict[str, Any] = {}
    redacted = [f"/call/input{path}" for path in input_redacted]
    for key, value in context.items():
        if key in context_fields:
            kept_context[key] = value
        else:
            kept_context[key] = REDACTED
            redacted.append(pointer(["context", key]))
    call = {key: value for key, value in document["call"].items() if key != "input"}
    kept = {**document, "call": call, "context": kept_context}
    return kept, tuple(redacted)


def decide_event(
    stage: Authenticated,
    decided: Decided | None,
    error: ToolgateError | None,
    *,
    engine: str,
    key_hash: KeyHash,
    durations_ms: dict[str, float],
    context_fields: Collection[str] = ("conversation_id",),
) -> AuditEvent:
    """The ``decide`` (or ``decide_dry_run``) record of an authenticated call: ``stage`` is the
    furthest it reached, ``decided`` its outcome (None when it failed), ``error`` the error it
    returned (neither: an unexpected failure, recorded as INTERNAL_ERROR). ``context_fields``:
    the context members its policy input keeps (``recorded_policy_input``)."""
    call, subject = stage.call, stage.subject
    request = stage.request if isinstance(stage, Parsed) else None
    prepared = stage if isinstance(stage, Prepared) else None
    response = decided.response if decided else None
    presented = decided.presented if decided else prepared.presented if prepared else None
    key = prepared.reservation.scope.key if prepared and prepared.reservation else call.idempotency_key
    recorded_input, redacted_paths = _recorded_input(stage)
    if decided and decided.approval:
        approval_id: str | None = decided.approval.approval_id
    elif isinstance(presented, Granted):
        approval_id = presented.approval_id
    else:
        approval_id = presented.approval_id if isinstance(presented, Refusal) else None
    evaluation = decided.evaluation if decided else None
    policy_input: dict[str, Any] | None = None
    policy_input_redacted: tuple[str, ...] = ()
    if evaluation is not None and recorded_input is not None:
        policy_input, policy_input_redacted = recorded_policy_input(evaluation, redacted_paths, context_fields)
    return AuditEvent(
        decision_id=call.decision_id,
        event="decide_dry_run" if request is not None and request.dry_run else "decide",
        request_id=call.request_id,
        trace_id=call.trace_id,
        tenant=subject.tenant,
        subject_id=subject.id,
        roles=subject.roles,
        conversation_id=conversation_id(request) if request else None,
        tool=qualified_tool(request.namespace, request.tool) if request else None,
        version=request.version if request else None,
        decision=response.decision if response else None,
        ai_sdk_status=response.ai_sdk_status if response else None,
        reasons=tuple(response.reasons) if response else (),
        matched_rules=tuple(rule.model_dump() for rule in response.matched_rules) if response else (),
        policy_revision=response.policy_revision if response else None,
        engine=engine,
        engine_decision_id=decided.decision.engine_decision_id if decided else None,
        input_fingerprint=stage.fingerprint if isinstance(stage, Validated) else None,
        input=recorded_input,
        redacted_paths=tuple(redacted_paths),
        idempotency_key_hash=key_hash(key) if key else None,
        replayed=bool(response and response.idempotency and response.idempotency.state == "replayed"),
        approval_id=approval_id,
        approver_id=presented.approver if isinstance(presented, Granted) else None,
        error_code=_error_code(error, decided is not None),
        durations_ms=dict(durations_ms),
        policy_input=policy_input,
        policy_input_redacted=policy_input_redacted,
        policy_decision=evaluation.decision.decision if evaluation else None,
        shadow=shadow.recorded(evaluation.shadow, evaluation.decision) if evaluation else None,
    )


def answer_event(
    request: RequestFacts,
    subject: Subject,
    approval_id: str,
    decision_id: str,
    answer: ApprovalAnswerBody,
    answered: Approval | None,
    error: ToolgateError | None,
    *,
    asked: Approval | None = None,
) -> AuditEvent:
    """The ``approval_answer`` record of an approver's answer, refused answers included. An
    approval that narrowed the input records the approved input (redacted) and its fingerprint
    (the ``decide`` record that asked keeps the requested ones); one short of its quorum says
    how many approvals it has. A refused answer names the tool of ``asked`` (the approval as
    found before answering, None when it was not found) and the refusal's message, with the
    paths of its problems, among the reasons."""
    facts = answered.request if answered else asked.request if asked else None
    ok = answered is not None
    reasons = [answer.reason] if answer.reason else []
    if error is not None:
        reasons.append(("refused: " + error.message + _problem_paths(error))[:_MAX_REASON_CHARS])
    vote = next((v for v in answered.votes if v.approver == subject.id), None) if answered else None
    recorded_input, fingerprint = None, facts.input_fingerprint if facts else None
    if facts is not None and vote is not None and vote.edit is not None:
        recorded_input = redact(vote.edit.input, facts.sensitive_paths)[0]
        fingerprint = vote.edit.fingerprint
        reasons.append("input narrowed: " + ", ".join(f"{c.op} {c.path}" for c in vote.edit.changes)[:_MAX_REASON_CHARS])
    if answered is not None and answered.state == "pending" and answer.approved:
        reasons.append(f"approval {len(answered.approvers)} of {answered.request.quorum}")
    return AuditEvent(
        decision_id=decision_id,
        event="approval_answer",
        **_caller(request, subject),
        tool=facts.tool if facts else None,
        version=facts.version if facts else None,
        decision=("allow" if answer.approved else "deny") if ok else None,
        ai_sdk_status=("approved" if answer.approved else "denied") if ok else None,
        reasons=tuple(reasons),
        input_fingerprint=fingerprint if ok else None,
        input=recorded_input,
        approval_id=approval_id[:128],
        approver_id=subject.id,
        error_code=_error_code(error, ok),
    )


def _problem_paths(error: ToolgateError) -> str:
    """`` (at /amount, /currency)``: where the refused value was, from the error's problems."""
    problems = error.details.get("problems") if isinstance(error.details, dict) else None
    paths = [p["path"] for p in problems or [] if isinstance(p, dict) and isinstance(p.get("path"), str)]
    return f" (at {', '.join(paths[:10])})" if paths else ""


def revoke_event(
    request: RequestFacts, subject: Subject, grant_id: str, revoked: StoredScopedGrant | None, error: ToolgateError | None
) -> AuditEvent:
    """The ``grant_revoke`` record of the revocation of a standing scoped grant."""
    grant = revoked.grant if revoked else None
    return AuditEvent(
        event="grant_revoke",
        **_caller(request, subject),
        tool=grant.tool if grant else None,
        version=grant.version if grant else None,
        reasons=(f"scoped grant {grant_id[:64]} revoked",) if grant else (),
        approval_id=grant.approval_id if grant else None,
        error_code=_error_code(error, revoked is not None),
    )


def report_event(
    event: EventType,
    request: RequestFacts,
    subject: Subject,
    key_hash: str,
    reasons: list[str],
    error: ToolgateError | None,
    succeeded: bool,
    for_decision_id: str | None = None,
) -> AuditEvent:
    """The ``execution_complete`` / ``execution_fail`` record of a tool service's report;
    ``for_decision_id``: the decide call whose reservation it settled (its receipt's id)."""
    return AuditEvent(
        event=event,
        **_caller(request, subject),
        reasons=tuple(r[:_MAX_REASON_CHARS] for r in reasons),
        idempotency_key_hash=key_hash,
        error_code=_error_code(error, succeeded),
        for_decision_id=for_decision_id,
    )


def unkeyed_failure_event(
    request: RequestFacts, subject: Subject, tool: str, version: str, reason: str
) -> AuditEvent:
    """The ``execution_fail`` record of a call without an idempotency key whose execution
    failed (an MCP upstream that could not be reached or did not answer)."""
    return AuditEvent(
        event="execution_fail",
        **_caller(request, subject),
        tool=tool,
        version=version,
        reasons=(reason[:_MAX_REASON_CHARS],),
        error_code="DEPENDENCY_UNAVAILABLE",
    )


def resolution_event(request: RequestFacts, tenant: str, operator: str, key_hash: str, state: str) -> AuditEvent:
    """The ``idempotency_resolve`` record of an operator's resolution of a key as ``state``."""
    return AuditEvent(
        event="idempotency_resolve",
        request_id=request.request_id,
        trace_id=request.trace_id,
        tenant=tenant,
        subject_id=f"operator:{operator}",
        reasons=(f"resolved as {state} by an operator",),
        idempotency_key_hash=key_hash,
    )
