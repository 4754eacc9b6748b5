"""``GET /v1/policy/status``: the policy in force, for operators.

Access: a valid bearer token (401 otherwise) holding one of ``policy_operator_roles`` (default
``operator``); anyone else gets 403 FORBIDDEN.

Body: ``{"engine", "this_worker": {...}, "workers": [{...}, ...], "request_id"}``. Each worker
entry is that process's engine status as it last published it (``pid``, ``revision``, for the
embedded engine ``source``, ``generation``, ``activated_at``, ``refusals`` and ``last_refusal``
with its message; for the sidecar the revision the worker last saw), ``this_worker`` the
answering process's current status (for the sidecar with the sidecar's bundle state).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.errors import Forbidden
from app.models import Subject
from app.web.auth import require_subject
from app.web.context import current_deps
from app.web.requests import request_id

bp = Blueprint("policy_status", __name__)


@bp.get("/v1/policy/status")
@require_subject
def policy_status(subject: Subject) -> Response:
    deps = current_deps()
    if not set(subject.roles) & set(deps.settings.policy_operator_roles):
        raise Forbidden("an operator role is required to read the policy status")
    engine = deps.engine
    return jsonify({
        "engine": engine.name,
        "this_worker": engine.status(),
        "workers": engine.workers(),
        "request_id": request_id(),
    })
