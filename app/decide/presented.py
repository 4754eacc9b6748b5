"""The approval presented on a decide call (DESIGN §5), checked before the policy:
``VerifiedApproval`` (its ``policy_input()`` becomes ``input.approval``), ``Refusal`` (the call
is denied with its stable reason; the policy is not asked), or None (nothing presented)."""

from __future__ import annotations

import logging
from dataclasses import replace

from app import metrics
from app.approvals.presented import GRANT_INVALID, ApprovalRejected, VerifiedApproval
from app.approvals.records import CallFacts
from app.approvals.service import ApprovalService
from app.decide.stages import Presented, Refusal, Validated
from app.errors import ValidationFailed
from app.fingerprint import fingerprint
from app.idempotency.store import PendingCall

log = logging.getLogger(__name__)


def call_facts(stage: Validated, *, refusal: str) -> CallFacts:
    """The facts of this call that approvals and grants are bound to (DESIGN §5): verified
    tenant and subject, tool, version, tool_call_id and the input fingerprint.

    Raises ``ApprovalRejected`` with the reason ``refusal`` when the input has no RFC 8785 form
    (an integer beyond 2**53, a lone surrogate): such an input can never be bound to a grant.
    """
    if stage.fingerprint is None:
        raise ApprovalRejected(refusal, "invalid", "the input has no RFC 8785 canonical form")
    return CallFacts(
        tenant=stage.subject.tenant,
        subject=stage.subject.id,
        tool=stage.tool.qualified,
        version=stage.tool.version,
        tool_call_id=stage.request.tool_call_id,
        input_fingerprint=stage.fingerprint,
    )


def refusal(stage: Validated, approval_id: str, rejected: ApprovalRejected) -> Refusal:
    """The ``Refusal`` of a rejected approval, counted and logged with its detail."""
    metrics.GRANTS_REJECTED.labels(rejected.kind).inc()
    log.warning(
        "approval refused: %s",
        rejected.detail,
        extra={"event": "approval_refused", "decision_id": stage.call.decision_id, "approval_id": approval_id,
               "kind": rejected.kind, "detail": rejected.detail},
    )
    return Refusal(approval_id=approval_id, reason=rejected.reason, kind=rejected.kind)


def check(stage: Validated, reservation: PendingCall | None, approvals: ApprovalService) -> tuple[Validated, Presented]:
    """Verify the approval presented on this call, if any (see the module docstring); returns
    the stage to go on with and the outcome.

    A grant already used by this call's idempotency key passes again, so a retry of that
    attempt gets the idempotency answer (409 in flight, or the replay) instead of a deny. A
    grant whose approver narrowed the input, presented with the requested input, replaces the
    input with the approved one (validated by the contract when approved, and checked here
    against the fingerprint the grant binds): the policy, the response and the record see the
    approved input. Raises ``DependencyUnavailable`` (503) when Redis fails: fail closed.
    """
    presented = stage.request.approval
    if presented is None:
        return stage, None
    try:
        facts = call_facts(stage, refusal=GRANT_INVALID)
        attempt = reservation.scope.key if reservation else None
        verified = approvals.verify_presented(presented, facts, idempotency_key=attempt)
        if verified.approved_input is None:
            return stage, verified
        return _approved(stage, verified), verified
    except ApprovalRejected as rejected:
        return stage, refusal(stage, presented.approval_id, rejected)


def _approved(stage: Validated, verified: VerifiedApproval) -> Validated:
    """``stage`` with the approver's input in place of the requested one. Raises
    ``ApprovalRejected`` when it does not have the fingerprint the grant binds."""
    approved = verified.approved_input
    assert approved is not None
    subject, tool = stage.subject, stage.tool
    try:
        fp = fingerprint(subject.tenant, subject.id, tool.qualified, tool.version, approved)
    except ValidationFailed:
        fp = None
    if fp is None or fp != verified.claims.approved_input_fingerprint:
        raise ApprovalRejected(GRANT_INVALID, "invalid", "the stored approved input does not match the grant")
    return replace(stage, normalized_input=approved, fingerprint=fp)
