"""The approvals API (DESIGN §5): approvers list, show and answer pending approvals of their tenant.

Every endpoint needs a bearer token (401 otherwise); the tenant always comes from the token, so
another tenant's approval id is simply unknown (404). Bodies and errors per DESIGN §7.
"""

from __future__ import annotations

from typing import Annotated, Literal

from flask import Blueprint, Response, jsonify
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.bodies import parse_body
from app.decide import answers
from app.models import ApprovalAnswerBody, ApprovalListResponse, ApprovalResponse, Subject
from app.web.auth import require_subject
from app.web.body import request_body
from app.web.context import current_deps, request_facts
from app.web.query import ascii_digits, parse_query
from app.web.requests import log_fields, request_id

bp = Blueprint("approvals", __name__)

class ApprovalListParams(BaseModel):
    """Query parameters of ``GET /v1/approvals``; unknown parameters are rejected."""

    model_config = ConfigDict(extra="forbid")

    state: Literal["pending"] = "pending"
    limit: Annotated[int, Field(ge=1, le=500), BeforeValidator(ascii_digits)] = 100


@bp.get("/v1/approvals")
@require_subject
def list_approvals(subject: Subject) -> Response:
    """List the pending approvals of the caller's tenant that the caller may answer.

    Query: ``state=pending`` (the default and the only state listed), ``limit`` 1-500 (default
    100); soonest expiry first. ``200`` ``ApprovalListResponse``. Errors: 400 bad query, 401,
    403 FORBIDDEN when the caller holds no approver role, 503 Redis down.
    """
    params = parse_query(ApprovalListParams)
    approvals = current_deps().approvals
    now = approvals.now_ms()
    found = approvals.list_pending(subject, limit=params.limit)
    body = ApprovalListResponse(approvals=[a.view(now) for a in found], request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


@bp.get("/v1/approvals/<approval_id>")
@require_subject
def show_approval(subject: Subject, approval_id: str) -> Response:
    """Show one approval of the caller's tenant to its requester or to a holder of one of its
    approver roles. The requester also gets the ``grant`` while the approval is approved,
    unused and unexpired (so the tool service can pick it up).

    ``200`` ``ApprovalResponse``. Errors: 401, 403 neither requester nor approver, 404 unknown id
    (or another tenant's), 503 Redis down.
    """
    approvals = current_deps().approvals
    approval, grant = approvals.show(subject, approval_id)
    log_fields(approval_id=approval.request.approval_id)
    body = ApprovalResponse(approval=approval.view(approvals.now_ms()), grant=grant, request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


@bp.post("/v1/approvals/<approval_id>")
@require_subject
def answer_approval(subject: Subject, approval_id: str) -> Response:
    """Answer a pending approval: body ``{"approved": bool, "reason": string (<= 500 chars)}``.

    An approval returns ``200`` ``ApprovalResponse`` with the one-time ``grant`` the tool service
    presents on its repeated decide call; a denial stores the reason, which the next decide call
    with this approval id returns as its deny reason. Errors: 400/422 VALIDATION_ERROR, 401,
    403 without one of the approval's approver roles or when answering one's own request
    (unless holding a self-approve role), 404 unknown id (or another tenant's), 409 CONFLICT
    already answered or expired, 503 Redis down or no signing key configured.
    """
    deps = current_deps()
    body = parse_body(ApprovalAnswerBody, request_body(), "request does not match the approval answer schema")
    log_fields(approval_id=approval_id[:64], approved=body.approved)
    approval, grant = answers.answer(deps, request_facts(), subject, approval_id, body)
    log_fields(decision_id=approval.answer.decision_id if approval.answer else None)
    response = ApprovalResponse(approval=approval.view(deps.approvals.now_ms()), grant=grant, request_id=request_id())
    return jsonify(response.model_dump(mode="json"))
