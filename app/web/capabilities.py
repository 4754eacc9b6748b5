"""``GET /v1/capabilities``: the registered tools the caller may use (``app.decide.capabilities``)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.decide.capabilities import usable_contracts
from app.models import CapabilitiesResponse, Subject, ToolDescription
from app.web.auth import require_subject
from app.web.context import current_deps
from app.web.requests import log_fields, request_id

bp = Blueprint("capabilities", __name__)


@bp.get("/v1/capabilities")
@require_subject
def list_capabilities(subject: Subject) -> Response:
    """The contracts the caller may call with at least one input: ``CapabilitiesResponse``
    ``{"tools": [ToolDescription...], "request_id"}`` (the shape of ``GET /v1/tools``), sorted by
    name then version. "May" is the policy's capability document (docs/design.md §3). Errors:
    401; 503 DEPENDENCY_UNAVAILABLE when the policy cannot be asked (nothing is listed).
    """
    deps = current_deps()
    usable = usable_contracts(deps.capability_engine, deps.contracts, subject)
    log_fields(capabilities=len(usable))
    body = CapabilitiesResponse(
        tools=[ToolDescription.model_validate(c.describe()) for c in usable], request_id=request_id()
    )
    return jsonify(body.model_dump(mode="json"))
