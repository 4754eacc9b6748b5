"""AuthZEN Authorization API 1.0 (``app.decide.authzen``): ``POST /access/v1/evaluation``,
``POST /access/v1/evaluations`` and the PDP metadata at ``/.well-known/authzen-configuration``.

``X-Request-ID`` (AuthZEN §10.1.3): the PEP's value comes back as sent when it is a safe
header value (1-128 visible ASCII characters); any other value is refused with 400 rather than
replaced, so that a PEP never matches an answer to the wrong request."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response, g, jsonify, request
from werkzeug.sansio.utils import host_is_trusted

from app.decide.authzen import Evaluator
from app.errors import ValidationFailed
from app.models import Subject
from app.web.auth import require_subject
from app.web.body import request_body
from app.web.context import current_deps
from app.web.requests import request_id, traceparent

bp = Blueprint("authzen", __name__)

#: An ``X-Request-ID`` echoed as sent: visible ASCII (no spaces, no control characters), bounded.
SAFE_REQUEST_ID = re.compile(r"^[\x21-\x7e]{1,128}$")

EVALUATION_PATH = "/access/v1/evaluation"
EVALUATIONS_PATH = "/access/v1/evaluations"


@bp.before_request
def _echo_request_id() -> None:
    """Use the PEP's ``X-Request-ID`` as this request's id. Raises ``ValidationFailed`` (400)
    for a value that is not a safe header value."""
    supplied = request.headers.get("X-Request-Id")
    if supplied is None:
        return
    if not SAFE_REQUEST_ID.match(supplied):
        raise ValidationFailed(
            "X-Request-ID must be 1-128 visible ASCII characters",
            http_status=400,
            details={"problems": [{"path": "/headers/X-Request-ID", "message": "1-128 visible ASCII characters"}]},
        )
    g.request_id = supplied


def _evaluator(subject: Subject) -> Evaluator:
    return Evaluator(
        current_deps(), subject, request_id(), tuple(request.headers.getlist("Authorization")), traceparent()[0]
    )


@bp.post(EVALUATION_PATH)
@require_subject
def evaluation(subject: Subject) -> Response:
    """One access evaluation: body ``{subject, action, resource, context?}``, answer
    ``{"decision": bool, "context": {decision_id, toolgate_decision, reasons, reason?}}``.
    Headers: ``Authorization: Bearer <JWT>`` (the subject of the evaluation, or a PEP's
    credential), ``X-Request-ID`` (echoed as sent). Errors (DESIGN §7 bodies): 400 malformed or
    incomplete request, arguments that fail the tool's contract (at the request's paths) or an
    unsafe ``X-Request-ID``, 401, 403 a subject other than the caller (without the PEP role), 503."""
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
    else this request's base URL when its ``Host`` is one of ``TOOLGATE_AUTHZEN_ALLOWED_HOSTS``)
    and the two evaluation endpoints under it. No token needed. Raises ``ValidationFailed`` (400)
    for another ``Host`` without a configured URL."""
    settings = current_deps().settings
    base = (settings.authzen_pdp_url or _request_base_url(settings.authzen_allowed_hosts)).rstrip("/")
    metadata: dict[str, Any] = {
        "policy_decision_point": base,
        "access_evaluation_endpoint": base + EVALUATION_PATH,
        "access_evaluations_endpoint": base + EVALUATIONS_PATH,
    }
    return jsonify(metadata)


def _request_base_url(allowed_hosts: list[str]) -> str:
    """This request's base URL, if its ``Host`` header names one of ``allowed_hosts``."""
    if not allowed_hosts or not host_is_trusted(request.host, allowed_hosts):
        raise ValidationFailed(
            "the Host header is not an allowed host: set TOOLGATE_AUTHZEN_PDP_URL or TOOLGATE_AUTHZEN_ALLOWED_HOSTS",
            http_status=400,
            details={"problems": [{"path": "/headers/Host", "message": "not one of TOOLGATE_AUTHZEN_ALLOWED_HOSTS"}]},
        )
    return request.host_url
