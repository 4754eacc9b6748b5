"""``POST /v1/decide``: the policy decision endpoint (DESIGN §2)."""

from __future__ import annotations

from flask import Blueprint, after_this_request, current_app, jsonify, request

from app.pipeline import DecideCall, DecideContext, decide as run_decide
from app.web.requests import log_fields, request_id, trace_phases, traceparent

bp = Blueprint("decide", __name__)


@bp.post("/v1/decide")
def decide():
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
    deps = current_app.extensions["toolgate"]
    header, _ = traceparent()
    call = DecideCall(
        request_id=request_id(),
        authorization=request.headers.getlist("Authorization"),
        body=request.get_data(cache=False),
        idempotency_key=request.headers.get("Idempotency-Key"),
        traceparent=header,
    )
    ctx = DecideContext(call)

    @after_this_request
    def _decision_id_header(response):  # on errors too, whenever the call has a record
        if ctx.recorded:
            response.headers["X-Decision-Id"] = ctx.decision_id
        return response

    try:
        with ctx.phases.measure("total"):
            body = run_decide(deps, call, ctx)
    finally:
        log_fields(**_summary(ctx))
        trace_phases([span for span in ctx.phases.spans if span[0] != "total"])
    return jsonify(body)


def _summary(ctx: DecideContext) -> dict:
    fields: dict = {"decision_id": ctx.decision_id, "durations_ms": ctx.phases.ms}
    if ctx.subject is not None:
        fields.update(tenant=ctx.subject.tenant, subject=ctx.subject.id)
    if ctx.request is not None:
        fields.update(tool=ctx.request.tool, version=ctx.request.version)
    if ctx.decision is not None:
        fields.update(decision=ctx.decision.decision, reasons=list(ctx.decision.reasons))
    return fields
