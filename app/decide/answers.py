"""An approver's answer to a pending approval (DESIGN §5), recorded like a decide call."""

from __future__ import annotations

from app import metrics
from app.approvals.records import Approval
from app.audit.records import new_decision_id
from app.decide.deps import Deps
from app.decide.events import RequestFacts, answer_event
from app.models import ApprovalAnswerBody, Subject


def answer(deps: Deps, request: RequestFacts, approver: Subject, approval_id: str, body: ApprovalAnswerBody) -> tuple[Approval, str | None]:
    """Record ``approver``'s answer to ``approval_id``; returns the answered approval and, for an
    approval, its one-time grant. The answer's decision id is bound in the grant.

    Raises what ``ApprovalService.answer`` raises (404, 403, 409, 503); every answer, refused
    ones included, leaves an ``approval_answer`` record (503 when it cannot be written).
    """
    decision_id = new_decision_id()
    answered, grant = deps.recorder.run(
        lambda: deps.approvals.answer(approver, approval_id, approved=body.approved, reason=body.reason, decision_id=decision_id),
        lambda result, error: answer_event(
            request, approver, approval_id, decision_id, body, result[0] if result else None, error
        ),
    )
    metrics.APPROVALS_ANSWERED.labels("approved" if body.approved else "rejected").inc()
    return answered, grant
