"""The policy decision and its approval step (DESIGN §3, §5).

- A verified grant: the policy is asked first without it; only when it still asks for approval
  for reasons (and a quorum) the grant covers is it asked again with ``input.approval`` (a
  changed policy whose reasons changed asks again: a new pending approval; one that now denies
  or allows decides alone). An ``allow`` then uses the grant up (atomic, one time).
- No grant, and the policy asks for approval: a standing scoped grant of the requester that
  covers the call is tried (the policy is asked with it); else a pending approval is opened (or
  the one pending for this same call found).
- A call whose idempotency key is settled (its execution completed, or failed for good) opens
  no approval: nothing will run again, so it is allowed as a replay of the stored outcome. A
  retry that lost its grant gets the result of the approved run, not a new approval in the
  approvers' inbox. A deny of the policy still denies it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from app.approvals.presented import UNBINDABLE_INPUT, ApprovalRejected, Granted, VerifiedApproval
from app.approvals.service import ApprovalService, OpenedApproval, Requirement
from app.decide.presented import call_facts, refusal
from app.decide.stages import Prepared, Presented, Refusal, conversation_id
from app.models import ApprovalEditInfo, ApprovalInfo, PolicyDecision
from app.timefmt import rfc3339_ms

log = logging.getLogger(__name__)

#: Asks the policy about the stage's call with ``input.approval`` from the given approval (None: none).
Evaluate = Callable[[Granted | None], PolicyDecision]
#: The reason recorded when a grant no longer covers what the policy asks.
REASONS_CHANGED = "the policy asks again: its approval reasons changed"
#: The reason of a call that would need approval but whose idempotency key is already settled.
ALREADY_SETTLED = "this call already ran under its idempotency key: its stored outcome is replayed"


@dataclass(frozen=True)
class ApprovalOutcome:
    """The decision after its approval step, the approval that let it through (or the refusal
    of the presented one) and the pending approval opened for a ``user-approval``."""

    decision: PolicyDecision
    presented: Presented
    approval: ApprovalInfo | None


def _deny(reason: str, instead_of: PolicyDecision) -> PolicyDecision:
    """A deny for ``reason`` in place of the policy's decision (same policy revision)."""
    return PolicyDecision(decision="deny", reasons=(reason,), policy_revision=instead_of.policy_revision)


def requirement(decision: PolicyDecision, approvals: ApprovalService) -> Requirement:
    """What a ``user-approval`` decision asks of an approval."""
    return Requirement(
        reasons=tuple(sorted(set(decision.reasons))),
        approver_roles=decision.approver_roles or approvals.default_approver_roles,
        quorum=decision.approval_quorum or 1,
    )


def decide(stage: Prepared, evaluate: Evaluate, approvals: ApprovalService, *, credential_digest: str | None) -> ApprovalOutcome:
    """The decision of a (non-dry-run) call whose presented approval was not refused. Raises
    ``DependencyUnavailable`` (503: engine or Redis, fail closed) and ``RateLimited`` (429: the
    requester holds too many pending approvals)."""
    presented = stage.presented
    if isinstance(presented, VerifiedApproval):
        first = evaluate(None)
        claims = presented.claims
        if first.decision != "user-approval":
            return ApprovalOutcome(first, None, None)
        if ApprovalService.covers(claims.reasons, claims.quorum, requirement(first, approvals)):
            return _use_grant(stage, evaluate(presented), presented, approvals)
        log.info("grant no longer covers the policy's reasons", extra={
            "event": "approval_reasons_changed", "approval_id": claims.approval_id,
            "granted_revision": claims.policy_revision, "revision": first.policy_revision})
        stale = Refusal(approval_id=claims.approval_id, reason=REASONS_CHANGED, kind="stale")
        return _open(stage, first, approvals, credential_digest, stale)
    decision = evaluate(None)
    if decision.decision != "user-approval":
        return ApprovalOutcome(decision, presented, None)
    try:
        facts = call_facts(stage, refusal=UNBINDABLE_INPUT)
    except ApprovalRejected as rejected:
        refused = refusal(stage, "", rejected)
        return ApprovalOutcome(_deny(refused.reason, decision), presented, None)
    standing = approvals.standing_grant(facts, stage.normalized_input, conversation_id(stage.request), requirement(decision, approvals))
    if standing is not None:
        with_grant = evaluate(standing)
        if with_grant.decision != "user-approval":
            return ApprovalOutcome(with_grant, standing if with_grant.decision == "allow" else None, None)
    return _open(stage, decision, approvals, credential_digest, presented)


def _use_grant(stage: Prepared, decision: PolicyDecision, presented: VerifiedApproval, approvals: ApprovalService) -> ApprovalOutcome:
    """Use the grant of an allowed call (a lost race turns the decision into a deny "approval
    grant already used"); any other decision leaves the grant unused."""
    if decision.decision != "allow":
        return ApprovalOutcome(decision, presented, None)
    try:
        approvals.consume(presented)
    except ApprovalRejected as rejected:
        refused = refusal(stage, presented.claims.approval_id, rejected)
        return ApprovalOutcome(_deny(refused.reason, decision), refused, None)
    return ApprovalOutcome(decision, presented, None)


def _open(
    stage: Prepared, decision: PolicyDecision, approvals: ApprovalService, credential_digest: str | None, presented: Presented
) -> ApprovalOutcome:
    """Open (or find) the pending approval a ``user-approval`` asks for (a deny when the input
    cannot be bound to a grant; a replay, without approval, when the call's key is settled)."""
    if stage.reservation is not None and stage.reservation.stored is not None:
        settled = PolicyDecision(decision="allow", reasons=(ALREADY_SETTLED,), policy_revision=decision.policy_revision)
        return ApprovalOutcome(settled, presented, None)
    try:
        facts = call_facts(stage, refusal=UNBINDABLE_INPUT)
    except ApprovalRejected as rejected:
        refused = refusal(stage, "", rejected)
        return ApprovalOutcome(_deny(refused.reason, decision), presented, None)
    opened = OpenedApproval(
        call=facts,
        display_input=stage.display_input,
        call_input=stage.normalized_input,
        sensitive_paths=stage.sensitive_paths,
        conversation_id=conversation_id(stage.request),
        credential_digest=credential_digest,
        decision_id=stage.call.decision_id,
        policy_revision=decision.policy_revision,
    )
    approval = approvals.request(opened, decision)
    info = ApprovalInfo(
        approval_id=approval.request.approval_id,
        request_reason=approval.request.request_reason,
        expires_at=rfc3339_ms(approval.request.expires_at_ms),
    )
    return ApprovalOutcome(decision, presented, info)


def edit_info(presented: Presented) -> ApprovalEditInfo | None:
    """What the approver changed, for the decide response (None: approved as requested)."""
    if not isinstance(presented, VerifiedApproval) or not presented.changes:
        return None
    claims = presented.claims
    return ApprovalEditInfo(
        approval_id=claims.approval_id, approved_by=list(claims.approvers or (claims.approver,)), changes=list(presented.changes)
    )
