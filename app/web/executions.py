"""``POST /v1/executions/<key>/complete`` and ``.../fail``: execution reports (DESIGN §4)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.decide import reports
from app.idempotency.store import Report
from app.models import ExecutionReportResponse, Subject
from app.web.auth import require_subject
from app.web.body import request_body
from app.web.context import current_deps, request_facts
from app.web.requests import log_fields, request_id

bp = Blueprint("executions", __name__)


@bp.post("/v1/executions/<path:key>/complete")
@require_subject
def complete(subject: Subject, key: str) -> Response:
    """Report that the call reserved under ``key`` (URL-encoded) ran and produced a result.

    Headers: ``Authorization: Bearer <JWT>`` of the tenant and subject that reserved the key.
    Body: ``CompleteReport`` ``{"result": <JSON>, "reservation_token"?: str}``. ``200``
    ``ExecutionReportResponse`` ``{"key", "state": "completed", "retention_expires_at",
    "request_id"}``; a repeat of the same report answers the same. Errors: 400 malformed body,
    401, 404 NOT_FOUND (no such reservation for this tenant and subject; a malformed key), 409
    CONFLICT (not the caller's reservation any more, or already settled), 422
    VALIDATION_ERROR (body schema, or the result does not match the tool's output schema),
    503 (Redis).
    """
    return _answer(key, reports.complete(current_deps(), request_facts(), subject, key, request_body()))


@bp.post("/v1/executions/<path:key>/fail")
@require_subject
def fail(subject: Subject, key: str) -> Response:
    """Report that the call reserved under ``key`` (URL-encoded) failed.

    Body: ``FailReport`` ``{"retryable": bool, "reason": str (1-500), "reservation_token"?}``.
    ``retryable: true`` releases the key (a retry may execute the tool; ``state:
    "released"``); ``false`` stores the failure for the retention time and replays it to
    retries (``state: "failed"``). Headers, answer and errors as ``complete``.
    """
    return _answer(key, reports.fail(current_deps(), request_facts(), subject, key, request_body()))


def _answer(key: str, report: Report) -> Response:
    log_fields(execution_state=report.state)
    optional = {"retention_expires_at": report.expires_at} if report.expires_at is not None else {}
    body = ExecutionReportResponse(key=key, state=report.state, request_id=request_id(), **optional)
    return jsonify(body.model_dump(mode="json", exclude_unset=True))
