"""``GET /v1/tools``: every registered tool contract with its JSON Schema."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from app.web.requests import request_id

bp = Blueprint("tools", __name__)


@bp.get("/v1/tools")
def list_tools():
    """List contracts: ``{"tools": [{name, version, description, mutating, risk, retry_safe,
    sensitive_paths, idempotency_key_field, lease_s, input_schema, output_schema}], "request_id"}``.

    The ``input_schema`` can be handed to a model as the tool definition. Requires a valid
    bearer token (401 otherwise).
    """
    deps = current_app.extensions["toolgate"]
    deps.verifier.verify(request.headers.getlist("Authorization"))
    return jsonify({"tools": [c.describe() for c in deps.contracts.all()], "request_id": request_id()})
