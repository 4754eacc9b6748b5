"""``POST /v1/executions/<key>/complete`` and ``.../fail``: execution reports (DESIGN §4)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from flask import Blueprint, current_app, jsonify, request

from app import metrics
from app.audit import AuditEvent, hash_idempotency_key
from app.bodies import parse_body
from app.errors import ToolgateError
from app.executions import report_complete, report_failure
from app.idempotency import Report
from app.models import CompleteReport, FailReport, Subject
from app.web.requests import log_fields, request_id, traceparent

bp = Blueprint("executions", __name__)


@bp.post("/v1/executions/<path:key>/complete")
def complete(key: str):
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
    deps = current_app.extensions["toolgate"]
    subject = _subject(deps)
    with _recorded("execution_complete", deps, subject, key) as reasons:
        report = parse_body(CompleteReport, request.get_data(cache=False), "report does not match its schema")
        outcome = report_complete(deps.idempotency, deps.contracts, subject, key, report)
        reasons.append(f"execution {outcome.state}")
    return _answer(key, outcome)


@bp.post("/v1/executions/<path:key>/fail")
def fail(key: str):
    """Report that the call reserved under ``key`` (URL-encoded) failed.

    Body: ``FailReport`` ``{"retryable": bool, "reason": str (1-500), "reservation_token"?}``.
    ``retryable: true`` releases the key (a retry may execute the tool; ``state:
    "released"``); ``false`` stores the failure for the retention time and replays it to
    retries (``state: "failed"``). Headers, answer and errors as ``complete``.
    """
    deps = current_app.extensions["toolgate"]
    subject = _subject(deps)
    with _recorded("execution_fail", deps, subject, key) as reasons:
        report = parse_body(FailReport, request.get_data(cache=False), "report does not match its schema")
        reasons.append(report.reason)
        outcome = report_failure(deps.idempotency, subject, key, report)
        reasons.append(f"execution {outcome.state}")
    return _answer(key, outcome)


@contextmanager
def _recorded(event: str, deps, subject: Subject, key: str) -> Iterator[list[str]]:
    """Append the report's decision log record (DESIGN §6) once the block ends, refused
    reports included; yields the list of reasons to record. The key is stored only as its
    keyed hash. Raises ``DependencyUnavailable`` (503) when the record cannot be written."""
    reasons: list[str] = []
    error: ToolgateError | None = None
    try:
        yield reasons
    except ToolgateError as exc:
        error = exc
        raise
    finally:
        secret = deps.settings.audit_key_hash_secret.get_secret_value()
        deps.decision_log.append(
            AuditEvent(
                event=event,
                request_id=request_id(),
                trace_id=traceparent()[1],
                tenant=subject.tenant,
                subject_id=subject.id,
                roles=subject.roles,
                reasons=tuple(r[:500] for r in reasons),
                idempotency_key_hash=hash_idempotency_key(secret, key),
                error_code=error.code if error else None,
            )
        )


def _subject(deps) -> Subject:
    subject = deps.verifier.verify(request.headers.getlist("Authorization"))
    log_fields(tenant=subject.tenant, subject=subject.id)
    return subject


def _answer(key: str, report: Report):
    log_fields(execution_state=report.state)
    metrics.EXECUTION_REPORTS.labels(report.state).inc()
    body = {"key": key, "state": report.state}
    if report.expires_at is not None:
        body["retention_expires_at"] = report.expires_at
    body["request_id"] = request_id()
    return jsonify(body)
