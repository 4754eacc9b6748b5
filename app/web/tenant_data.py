"""``/v1/policy/tenants/<tenant>/data``: an operator reads or replaces one tenant's data, which
the policy reads at ``data.tenants[<tenant>]`` (docs/policy-authors.md "Tenant data").

Access: a valid bearer token (401) holding one of ``policy_operator_roles``, for its own tenant,
or for any tenant in a token of ``audit_platform_tenant``; anyone else gets 403 FORBIDDEN.

- ``GET``: ``200 {"tenant", "data", "source": "pushed"|"policy_dir", "version", "request_id"}``
  with ``ETag: "<version>"``; 404 when the tenant has no data.
- ``PUT`` (a JSON object, at most ``tenant_data_max_bytes``, the documented keys only):
  ``200 {"tenant", "version", "previous_version", "policy_revision", "decision_id",
  "request_id"}``; 400 not a JSON object or a tenant id that cannot have data, 413 too large,
  422 outside the schema (``details.problems``), 409 pushes are off or would not reach the
  policy, or ``If-Match: "<version>"`` (optional, the ``ETag`` of a ``GET``) names a version
  that is no longer current, 503 not stored or not recorded. Recorded as a ``tenant_data_put`` event in the
  tenant's chain; ``policy_revision`` is the revision every worker reports once it has reloaded.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from app.bodies import parse_json_object
from app.decide import tenant_data
from app.errors import ValidationFailed
from app.models import Subject
from app.web.auth import require_subject
from app.web.body import TOO_LARGE, request_body
from app.web.context import current_deps, request_facts
from app.web.requests import log_fields, request_id

bp = Blueprint("tenant_data", __name__)


@bp.get("/v1/policy/tenants/<tenant>/data")
@require_subject
def read_tenant_data(subject: Subject, tenant: str) -> Response:
    settings = current_deps().settings
    tenant_data.authorize(settings, subject, tenant)
    stored = tenant_data.read(settings, tenant)
    resp = jsonify({
        "tenant": tenant, "data": stored.document, "source": stored.source, "version": stored.version,
        "request_id": request_id(),
    })
    resp.headers["ETag"] = f'"{stored.version}"'
    return resp


@bp.put("/v1/policy/tenants/<tenant>/data")
@require_subject
def push_tenant_data(subject: Subject, tenant: str) -> Response:
    deps = current_deps()
    tenant_data.authorize(deps.settings, subject, tenant)
    body = request_body()
    if len(body) > deps.settings.tenant_data_max_bytes:
        raise ValidationFailed(TOO_LARGE, http_status=413)
    if_match = request.headers.get("If-Match")
    pushed = tenant_data.push(deps, request_facts(), subject, tenant, parse_json_object(body),
                              if_match=if_match.strip().strip('"') if if_match else None)
    log_fields(tenant_data_version=pushed.version, policy_revision=pushed.policy_revision)
    resp = jsonify({
        "tenant": pushed.tenant, "version": pushed.version, "previous_version": pushed.previous_version,
        "policy_revision": pushed.policy_revision, "decision_id": pushed.decision_id, "request_id": request_id(),
    })
    resp.headers["ETag"] = f'"{pushed.version}"'
    return resp
