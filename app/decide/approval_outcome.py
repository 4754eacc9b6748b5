"""After the policy (DESIGN §5): on ``allow`` use up the verified grant, on ``user-approval``
open a pending approval (or find the one pending for this same call)."""

from __future__ import annotations

from dataclasses import dataclass

from app import metrics
from app.approvals.presented import UNBINDABLE_INPUT, ApprovalRejected, VerifiedApproval
from app.approvals.service import ApprovalService
from app.decide.presented import call_facts, refusal
from app.decide.stages import Prepared, Presented
from app.models import ApprovalInfo, PolicyDecision
from app.timefmt import rfc3339_ms


@dataclass(frozen=True)
class ApprovalOutcome:
    """The decision after its approval step, the presented approval (a grant refused at use
    becomes a ``Refusal``) and the pending approval opened for a ``user-approval``."""

    decision: PolicyDecision
    presented: Presented
    approval: ApprovalInfo | None


def _deny(reason: str, instead_of: PolicyDecision) -> PolicyDecision:
    """A deny for ``reason`` in place of the policy's decision (same policy revision)."""
    return PolicyDecision(decision="deny", reasons=(reason,), policy_revision=instead_of.policy_revision)


def settle(stage: Prepared, decision: PolicyDecision, approvals: ApprovalService) -> ApprovalOutcome:
    """Use the grant of an allowed call (atomic, one time: a lost race turns the decision into a
    deny "approval grant already used"), or open the approval a ``user-approval`` asks for
    (a deny when the input cannot be bound to a grant). Raises ``DependencyUnavailable`` (503:
    Redis, fail closed)."""
    presented = stage.presented
    if decision.decision == "allow" and isinstance(presented, VerifiedApproval):
        try:
            approvals.consume(presented)
        except ApprovalRejected as rejected:
            refused = refusal(stage, presented.claims.approval_id, rejected)
            return ApprovalOutcome(_deny(refused.reason, decision), refused, None)
        return ApprovalOutcome(decision, presented, None)
    if decision.decision != "user-approval":
        return ApprovalOutcome(decision, presented, None)
    try:
        facts = call_facts(stage, refusal=UNBINDABLE_INPUT)
    except ApprovalRejected as rejected:
        refused = refusal(stage, "", rejected)
        return ApprovalOutcome(_deny(refused.reason, decision), presented, None)
    approval = approvals.request(facts, decision, display_input=stage.display_input, decision_id=stage.call.decision_id)
    metrics.APPROVALS_CREATED.inc()
    info = ApprovalInfo(
        approval_id=approval.request.approval_id,
        request_reason=approval.request.request_reason,
        expires_at=rfc3339_ms(approval.request.expires_at_ms),
    )
    return ApprovalOutcome(decision, presented, info)
