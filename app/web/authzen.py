"""AuthZEN Authorization API 1.0 (``app.decide.authzen``): ``POST /access/v1/evaluation``,
``POST /access/v1/evaluations`` and the PDP metadata at ``/.well-known/authzen-configuration``."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request

from app.decide.authzen import Evaluator
from app.models import Subject
from app.web.auth import require_subject
from app.web.body import request_body
from app.web.context import current_deps
from app.web.requests import request_id, traceparent

bp = Blueprint("authzen", __name__)

EVALUATION_PATH = "/access/v1/evaluation"
EVALUATIONS_PATH = "/access/v1/evaluations"


def _evaluator(subject: Subject) -> Evaluator:
    return Evaluator(
        current_deps(), subject, request_id(), tuple(request.headers.getlist("Authorization")), traceparent()[0]
    )


@bp.post(EVALUATION_PATH)
@require_subject
def evaluation(subject: Subject) -> Response:
    """One access evaluation: body ``{subject, action, resource, context?}``, answer
    ``{"decision": bool, "context": {decision_id, toolgate_decision, reasons, reason?}}``.
    Headers: ``Authorization: Bearer <JWT>`` (the subject of the evaluation), ``X-Request-Id``
    (echoed). Errors (DESIGN §7 bodies): 400 malformed or incomplete request, 401, 403 a subject
    other than the caller, 422 input that fails the tool's contract, 503."""
    return jsonify(_evaluator(subject).evaluation(request_body()))


@bp.post(EVALUATIONS_PATH)
@require_subject
def evaluations(subject: Subject) -> Response:
    """A batch: top-level defaults, ``evaluations: [...]`` and ``options.evaluations_semantic``
    (``execute_all`` | ``deny_on_first_deny`` | ``permit_on_first_permit``); answer
    ``{"evaluations": [decision...]}`` in request order. A refused evaluation is ``false`` with
    ``context.error {status, code, message}``; 401 and 503 fail the whole request."""
    return jsonify(_evaluator(subject).evaluations(request_body()))


@bp.get("/.well-known/authzen-configuration")
def configuration() -> Response:
    """The PDP metadata (AuthZEN §9): ``policy_decision_point`` (``TOOLGATE_AUTHZEN_PDP_URL``,
    else this request's base URL) and the two evaluation endpoints under it. No token needed."""
    configured = current_deps().settings.authzen_pdp_url
    base = (configured or request.host_url).rstrip("/")
    metadata: dict[str, Any] = {
        "policy_decision_point": base,
        "access_evaluation_endpoint": base + EVALUATION_PATH,
        "access_evaluations_endpoint": base + EVALUATIONS_PATH,
    }
    return jsonify(metadata)
