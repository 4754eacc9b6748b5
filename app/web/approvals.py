"""The approvals API (DESIGN §5): approvers list, show and answer pending approvals of their
tenant; requesters wait for an answer (long poll); standing scoped grants are listed and revoked.

Every endpoint needs a bearer token (401 otherwise); the tenant always comes from the token, so
another tenant's approval id is simply unknown (404). ``POST /v1/approvals/<id>`` also takes a
**step-up token** (``aud`` = ``TOOLGATE_APPROVAL_STEP_UP_AUDIENCE``, not the gateway's own
audience, ``iat`` at most ``TOOLGATE_APPROVAL_STEP_UP_MAX_AGE_S`` old): the separate credential
with which a requester confirms her own call when the policy allows self-approval. Bodies and
errors per DESIGN §7.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Literal

from flask import Blueprint, Response, current_app, jsonify, request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.approvals.records import Credential, credential_digest
from app.approvals.service import CURSOR_PATTERN
from app.auth import jws
from app.auth.rejection import reject
from app.auth.verifier import TokenVerifier
from app.bodies import parse_body
from app.decide import answers
from app.errors import Unauthenticated, ValidationFailed
from app.models import (
    ApprovalAnswerBody,
    ApprovalListResponse,
    ApprovalResponse,
    ScopedGrantListResponse,
    ScopedGrantResponse,
    Subject,
)
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
    cursor: Annotated[str, Field(pattern=CURSOR_PATTERN)] | None = None


class ApprovalShowParams(BaseModel):
    """Query parameters of ``GET /v1/approvals/<id>``: ``wait`` seconds of long poll."""

    model_config = ConfigDict(extra="forbid")

    wait: Annotated[int, Field(ge=0, le=120), BeforeValidator(ascii_digits)] = 0


def _wait_s() -> float:
    wait = parse_query(ApprovalShowParams).wait
    most = current_deps().settings.approval_max_wait_s
    if wait > most:
        raise ValidationFailed(
            "query parameters are not valid", details={"problems": [{"path": "wait", "message": f"at most {most} seconds"}]}
        )
    return float(wait)


def _step_up_verifier() -> TokenVerifier:
    """The verifier of step-up tokens: the gateway's keys and issuer, the step-up audience."""
    verifier = current_app.extensions.get("toolgate_step_up")
    if verifier is None:
        deps = current_deps()
        settings = deps.settings.model_copy(update={"jwt_audience": deps.settings.approval_step_up_audience})
        verifier = TokenVerifier(settings, jwks_cache=deps.verifier.jwks)
        current_app.extensions["toolgate_step_up"] = verifier
    return verifier


def _claims(header: str) -> dict:
    """The payload of a token that already verified (read for ``aud`` and ``iat``)."""
    token = header.strip().partition(" ")[2].strip()
    payload: dict = json.loads(jws.b64url_decode(token.split(".")[1]))
    return payload


def authenticate_approver() -> tuple[Subject, Credential]:
    """The caller of an answer and how she authenticated: a step-up token (fresh, with the
    step-up audience only), else an ordinary bearer token. Raises ``Unauthenticated`` (401)."""
    deps = current_deps()
    headers = request.headers.getlist("Authorization")
    digest = credential_digest(headers) or ""
    try:
        subject = _step_up_verifier().verify(headers)
    except Unauthenticated:
        subject = None
    if subject is not None:
        claims = _claims(headers[0])
        aud = claims.get("aud")
        audiences: list = aud if isinstance(aud, list) else [aud]
        if deps.settings.jwt_audience not in audiences:
            issued = claims.get("iat")
            max_age = deps.settings.approval_step_up_max_age_s
            if not isinstance(issued, int) or isinstance(issued, bool) or time.time() - issued > max_age:
                raise reject(f"step-up token is older than {max_age} s or has no iat")
            log_fields(tenant=subject.tenant, subject=subject.id, credential="step-up")
            return subject, Credential("step-up", digest)
    subject = deps.verifier.verify(headers)
    log_fields(tenant=subject.tenant, subject=subject.id, credential="bearer")
    return subject, Credential("bearer", digest)


@bp.get("/v1/approvals")
@require_subject
def list_approvals(subject: Subject) -> Response:
    """List the pending approvals of the caller's tenant that the caller may answer.

    Query: ``state=pending`` (the default and the only state listed), ``limit`` 1-500 (default
    100), ``cursor`` (``next_cursor`` of the previous page); oldest first. ``200``
    ``ApprovalListResponse``. Errors: 400 bad query, 401, 403 FORBIDDEN when the caller holds no
    approver role, 503 Redis down.
    """
    params = parse_query(ApprovalListParams)
    approvals = current_deps().approvals
    now = approvals.now_ms()
    found, next_cursor = approvals.list_pending(subject, limit=params.limit, cursor=params.cursor)
    body = ApprovalListResponse(approvals=[a.view(now) for a in found], next_cursor=next_cursor, request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


@bp.get("/v1/approvals/<approval_id>")
@require_subject
def show_approval(subject: Subject, approval_id: str) -> Response:
    """Show one approval of the caller's tenant to its requester or to a caller who may answer
    it. The requester also gets the ``grant`` while the approval is approved, unused and
    unexpired (so the tool service can pick it up). ``wait`` (0 to
    ``TOOLGATE_APPROVAL_MAX_WAIT_S`` seconds): hold the request until the approval is no longer
    pending or the time is up (a long poll).

    ``200`` ``ApprovalResponse``. Errors: 400 bad ``wait``, 401, 403 neither requester nor
    approver, 404 unknown id (or another tenant's), 503 Redis down.
    """
    approvals = current_deps().approvals
    wait_s = _wait_s()
    approval, grant = approvals.wait(subject, approval_id, wait_s) if wait_s else approvals.show(subject, approval_id)
    log_fields(approval_id=approval.request.approval_id)
    body = ApprovalResponse(approval=approval.view(approvals.now_ms()), grant=grant, request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


@bp.post("/v1/approvals/<approval_id>")
def answer_approval(approval_id: str) -> Response:
    """Answer a pending approval: body ``{"approved": bool, "reason": string (<= 500 chars),
    "input"?: object, "scope"?: {"kind", "ttl_s", "constraints"}}``.

    The vote that approves it (the quorum reached) returns ``200`` ``ApprovalResponse`` with the
    one-time ``grant`` the tool service presents on its repeated decide call; an approval short
    of the quorum returns the approval still ``pending``, with its votes; a denial decides and
    stores the reason, which the next decide call with this approval id returns as its deny
    reason. Errors: 400/422 VALIDATION_ERROR (also an edit the contract refuses, a scope the
    policy does not offer), 401, 403 without a role that may answer, with the credential that
    made the request, or by the requester (unless the policy allows self-approval and she
    answers with a step-up token), 404 unknown id (or another tenant's), 409 CONFLICT already
    answered, expired, voted before, or a quorum collecting for another input, 503 Redis down
    or no signing key configured.
    """
    subject, credential = authenticate_approver()
    deps = current_deps()
    body = parse_body(ApprovalAnswerBody, request_body(), "request does not match the approval answer schema")
    log_fields(approval_id=approval_id[:64], approved=body.approved)
    approval, grant = answers.answer(deps, request_facts(), subject, credential, approval_id, body)
    log_fields(decision_id=approval.answer.decision_id if approval.answer else None)
    response = ApprovalResponse(approval=approval.view(deps.approvals.now_ms()), grant=grant, request_id=request_id())
    return jsonify(response.model_dump(mode="json"))


@bp.get("/v1/grants")
@require_subject
def list_grants(subject: Subject) -> Response:
    """The standing scoped grants of the caller's tenant (approvers: every one; others: their
    own and those they may revoke), soonest expiry first, revoked ones included until they
    expire. ``200`` ``ScopedGrantListResponse``; 401, 503."""
    grants = current_deps().approvals.scoped_grants(subject)
    body = ScopedGrantListResponse(grants=[g.view() for g in grants], request_id=request_id())
    return jsonify(body.model_dump(mode="json"))


@bp.delete("/v1/grants/<grant_id>")
@require_subject
def revoke_grant(subject: Subject, grant_id: str) -> Response:
    """Revoke a standing scoped grant (its requester, or an approver): ``200``
    ``ScopedGrantResponse``; 401, 403, 404 unknown id (or another tenant's), 409 revoked before,
    503. Recorded as a ``grant_revoke`` event."""
    revoked = answers.revoke(current_deps(), request_facts(), subject, grant_id)
    log_fields(grant_id=grant_id[:64])
    body = ScopedGrantResponse(grant=revoked.view(), request_id=request_id())
    return jsonify(body.model_dump(mode="json"))
