"""``GET /v1/tools``: every registered tool contract with its JSON Schema."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.models import Subject, ToolDescription, ToolListResponse
from app.web.auth import require_subject
from app.web.context import current_deps
from app.web.requests import request_id

bp = Blueprint("tools", __name__)


@bp.get("/v1/tools")
@require_subject
def list_tools(subject: Subject) -> Response:
    """List contracts: ``ToolListResponse`` ``{"tools": [{name, version, description, mutating,
    risk, retry_safe, sensitive_paths, idempotency_key_field, lease_s, input_schema,
    output_schema}], "request_id"}``. The ``input_schema`` can be handed to a model as the tool
    definition. Errors: 401.
    """
    body = ToolListResponse(tools=[ToolDescription.model_validate(c.describe()) for c in current_deps().contracts.all()], request_id=request_id())
    return jsonify(body.model_dump(mode="json"))
