"""``POST /v1/decide``: the policy decision endpoint (DESIGN §2)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, after_this_request, jsonify, request

from app.decide.phases import Phases
from app.decide.pipeline import decide as run_decide
from app.decide.stages import Authenticated, DecideCall, Decided, Parsed, Progress, Received
from app.web.body import request_body
from app.web.context import current_deps
from app.web.requests import log_fields, request_id, trace_phases, traceparent

bp = Blueprint("decide", __name__)


@bp.post("/v1/decide")
def decide() -> Response:
    """Decide whether a proposed tool call may run.

    Headers: ``Authorization: Bearer <JWT>`` (required), ``Idempotency-Key`` (1-255 printable
    ASCII), ``X-Request-Id``, ``traceparent``. Body: ``DecideRequest`` (at most
    ``TOOLGATE_MAX_BODY_BYTES``, default 64 KiB). ``200`` with a ``DecideResponse`` for every
    decision, deny included; errors per DESIGN §7 (400/413/422 VALIDATION_ERROR, 401
    UNAUTHENTICATED, 409/422 CONFLICT, 503 DEPENDENCY_UNAVAILABLE, also when the decision log
    cannot record the call). Every response of a call that has a decision record (every
    call that passed authentication, unless the record could not be written) carries its id in
    ``X-Decision-Id``.
    """
    header, _ = traceparent()
    call = DecideCall(
        request_id=request_id(),
        authorization=tuple(request.headers.getlist("Authorization")),
        body=request_body(),
        idempotency_key=request.headers.get("Idempotency-Key"),
        traceparent=header,
    )
    progress = Progress(call)
    phases = Phases()

    @after_this_request
    def _decision_id_header(response: Response) -> Response:  # on errors too, whenever the call has a record
        if progress.recorded:
            response.headers["X-Decision-Id"] = call.decision_id
        return response

    try:
        with phases.measure("total"):
            answer = run_decide(current_deps(), progress, phases)
    finally:
        log_fields(**_summary(progress.stage, phases))
        trace_phases([span for span in phases.spans if span[0] != "total"])
    return jsonify(answer.model_dump(mode="json", exclude_unset=True))


def _summary(stage: Received, phases: Phases) -> dict[str, Any]:
    """The log fields of the call: what its furthest stage knows."""
    fields: dict[str, Any] = {"decision_id": stage.call.decision_id, "durations_ms": phases.ms}
    if isinstance(stage, Authenticated):
        fields.update(tenant=stage.subject.tenant, subject=stage.subject.id)
    if isinstance(stage, Parsed):
        fields.update(tool=stage.request.tool, version=stage.request.version)
    if isinstance(stage, Decided):
        fields.update(decision=stage.decision.decision, reasons=list(stage.decision.reasons))
    return fields
