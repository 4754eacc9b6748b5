"""The approvals API (DESIGN §5): approvers list, show and answer pending approvals of their tenant.

Every endpoint needs a bearer token (401 otherwise); the tenant always comes from the token, so
another tenant's approval id is simply unknown (404). Bodies and errors per DESIGN §7.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request
from ulid import ULID

from app import metrics
from app.approvals import Approval, ApprovalService
from app.audit import AuditEvent
from app.bodies import parse_body
from app.errors import ToolgateError, ValidationFailed
from app.models import ApprovalAnswerBody, ApprovalListResponse, ApprovalResponse, Subject
from app.web.requests import log_fields, request_id, traceparent

bp = Blueprint("approvals", __name__)

_MAX_LIMIT = 500


def _caller() -> tuple[Subject, ApprovalService]:
    deps = current_app.extensions["toolgate"]
    subject = deps.verifier.verify(request.headers.getlist("Authorization"))
    log_fields(tenant=subject.tenant, subject=subject.id)
    return subject, deps.approvals


def _limit() -> int:
    raw = request.args.get("limit", "100")
    if not raw.isdigit() or not 1 <= int(raw) <= _MAX_LIMIT:
        raise ValidationFailed(f"limit must be an integer from 1 to {_MAX_LIMIT}", http_status=400)
    return int(raw)


@bp.get("/v1/approvals")
def list_approvals():
    """List the pending approvals of the caller's tenant that the caller may answer.

    Query: ``state=pending`` (the default and the only state listed), ``limit`` 1-500 (default
    100); soonest expiry first. ``200`` ``ApprovalListResponse``. Errors: 400 bad query, 401,
    403 FORBIDDEN when the caller holds no approver role, 503 Redis down.
    """
    if request.args.get("state", "pending") != "pending":
        raise ValidationFailed("state must be pending", http_status=400)
    limit = _limit()
    subject, approvals = _caller()
    now = approvals.now_ms()
    found = approvals.list_pending(subject, limit=limit)
    body = ApprovalListResponse(approvals=[a.view(now) for a in found], request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


@bp.get("/v1/approvals/<approval_id>")
def show_approval(approval_id: str):
    """Show one approval of the caller's tenant to its requester or to a holder of one of its
    approver roles. The requester also gets the ``grant`` while the approval is approved,
    unused and unexpired (so the tool service can pick it up).

    ``200`` ``ApprovalResponse``. Errors: 401, 403 neither requester nor approver, 404 unknown id
    (or another tenant's), 503 Redis down.
    """
    subject, approvals = _caller()
    approval, grant = approvals.show(subject, approval_id)
    log_fields(approval_id=approval.request.approval_id)
    body = ApprovalResponse(approval=approval.view(approvals.now_ms()), grant=grant, request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


@bp.post("/v1/approvals/<approval_id>")
def answer_approval(approval_id: str):
    """Answer a pending approval: body ``{"approved": bool, "reason": string (<= 500 chars)}``.

    An approval returns ``200`` ``ApprovalResponse`` with the one-time ``grant`` the tool service
    presents on its repeated decide call; a denial stores the reason, which the next decide call
    with this approval id returns as its deny reason. Errors: 400/422 VALIDATION_ERROR, 401,
    403 without one of the approval's approver roles or when answering one's own request
    (unless holding a self-approve role), 404 unknown id (or another tenant's), 409 CONFLICT
    already answered or expired, 503 Redis down or no signing key configured.
    """
    subject, approvals = _caller()
    answer = parse_body(ApprovalAnswerBody, request.get_data(cache=False), "request does not match the approval answer schema")
    decision_id = str(ULID())
    log_fields(approval_id=approval_id[:64], decision_id=decision_id, approved=answer.approved)
    approval: Approval | None = None
    error: ToolgateError | None = None
    try:
        approval, grant = approvals.answer(
            subject, approval_id, approved=answer.approved, reason=answer.reason, decision_id=decision_id
        )
    except ToolgateError as exc:
        error = exc
        raise
    finally:
        _record_answer(subject, approval_id, decision_id, answer, approval, error)
    metrics.APPROVALS_ANSWERED.labels("approved" if answer.approved else "rejected").inc()
    body = ApprovalResponse(approval=approval.view(approvals.now_ms()), grant=grant, request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


def _record_answer(
    subject: Subject,
    approval_id: str,
    decision_id: str,
    answer: ApprovalAnswerBody,
    approval: Approval | None,
    error: ToolgateError | None,
) -> None:
    """Append the ``approval_answer`` record (DESIGN §6), refused answers included. Raises
    ``DependencyUnavailable`` (503) when it cannot be written: no answer leaves unrecorded."""
    _, trace_id = traceparent()
    request_facts = approval.request if approval else None
    current_app.extensions["toolgate"].decision_log.append(
        AuditEvent(
            decision_id=decision_id,
            event="approval_answer",
            request_id=request_id(),
            trace_id=trace_id,
            tenant=subject.tenant,
            subject_id=subject.id,
            roles=subject.roles,
            tool=request_facts.tool if request_facts else None,
            version=request_facts.version if request_facts else None,
            decision=None if error else ("allow" if answer.approved else "deny"),
            ai_sdk_status=None if error else ("approved" if answer.approved else "denied"),
            reasons=(answer.reason,) if answer.reason else (),
            input_fingerprint=request_facts.input_fingerprint if request_facts else None,
            approval_id=approval_id[:128],
            approver_id=subject.id,
            error_code=error.code if error else None,
        )
    )
