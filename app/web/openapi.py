"""``GET /openapi.json``: the OpenAPI 3.1 document, generated from the pydantic wire models."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flask import Blueprint, jsonify
from pydantic.json_schema import models_json_schema

from app.approvals.service import CURSOR_PATTERN as APPROVAL_CURSOR_PATTERN
from app.audit.queries import CURSOR_PATTERN
from app.models import (
    ApprovalAnswerBody,
    ApprovalListResponse,
    ApprovalResponse,
    CompleteReport,
    DecideRequest,
    DecideResponse,
    DecisionListResponse,
    DecisionRecordResponse,
    ErrorBody,
    ExecutionReportResponse,
    FailReport,
    PublishedKeys,
    ScopedGrantListResponse,
    ScopedGrantResponse,
    ToolListResponse,
)
from app.policy.tenant_data import TENANT_DATA_SCHEMA, TENANT_PATTERN
from app.vocabulary import DECISIONS, EVENT_TYPES, IDEMPOTENCY_KEY_PATTERN, REQUEST_ID_PATTERN, SHADOW_OUTCOMES
from app.web.decisions import TEXT_PATTERN

bp = Blueprint("openapi", __name__)

_ERROR_STATUSES = {
    "400": "Malformed body (VALIDATION_ERROR)",
    "401": "Missing or invalid bearer token (UNAUTHENTICATED)",
    "403": "The caller may not do this (FORBIDDEN)",
    "404": "No such resource for this caller (NOT_FOUND)",
    "409": "Idempotency key in flight (CONFLICT)",
    "413": "Body too large (VALIDATION_ERROR)",
    "422": "Schema or contract violation (VALIDATION_ERROR) or key reused (CONFLICT)",
    "429": "Rate limited (RATE_LIMITED)",
    "500": "Internal error (INTERNAL_ERROR)",
    "503": "Dependency unavailable (DEPENDENCY_UNAVAILABLE)",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _tenant_data_path() -> dict[str, Any]:
    """``GET`` and ``PUT`` of one tenant's data (operator roles; app/web/tenant_data.py)."""
    tenant = {"name": "tenant", "in": "path", "required": True, "schema": {"type": "string", "pattern": TENANT_PATTERN}}
    return {
        "parameters": [tenant],
        "get": {
            "operationId": "readTenantData",
            "summary": "One tenant's data as the policy reads it at data.tenants[<tenant>] (operator roles).",
            "security": [{"bearer": []}],
            "responses": {"200": _json(_ANY_OBJECT, "The tenant's data, its source and version."),
                          **_errors("400", "401", "403", "404", "500", "503")},
        },
        "put": {
            "operationId": "pushTenantData",
            "summary": "Replace one tenant's data; the policy revision changes (operator roles).",
            "security": [{"bearer": []}],
            "parameters": [{"name": "If-Match", "in": "header", "required": False,
                            "description": "The version (ETag) this push replaces; 409 when it is no longer current.",
                            "schema": {"type": "string"}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": TENANT_DATA_SCHEMA}}},
            "responses": {"200": _json(_ANY_OBJECT, "Stored: the new version and policy revision."),
                          **_errors("400", "401", "403", "409", "413", "422", "500", "503")},
        },
    }


def _errors(*statuses: str) -> dict[str, Any]:
    return {s: _json(_ref("ErrorBody"), _ERROR_STATUSES[s]) for s in statuses}


_ANY_OBJECT = {"type": "object"}
#: An idempotency key (app.idempotency.keys.validate_key).
_IDEMPOTENCY_KEY = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": IDEMPOTENCY_KEY_PATTERN}


def _execution_report(operation_id: str, summary: str, body: str) -> dict[str, Any]:
    """The path item of one execution report endpoint (``app.web.executions``)."""
    return {
        "post": {
            "operationId": operation_id,
            "summary": summary,
            "security": [{"bearer": []}],
            "parameters": [
                {"name": "key", "in": "path", "required": True, "description": "The idempotency key, URL-encoded.",
                 "schema": _IDEMPOTENCY_KEY},
            ],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(body)}}},
            "responses": {
                "200": _json(_ref("ExecutionReportResponse"), "The report was recorded (or repeated)."),
                **_errors("400", "401", "404", "413", "422", "500", "503"),
                "409": _json(_ref("ErrorBody"), "Not the caller's reservation any more, or already reported (CONFLICT)"),
            },
        }
    }


def _approval_paths() -> dict[str, Any]:
    """The path items of the approvals API (``app.web.approvals``)."""
    bearer: list[dict[str, list[str]]] = [{"bearer": []}]
    approval_id = {"name": "approval_id", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 128}}
    return {
        "/v1/approvals": {
            "get": {
                "operationId": "listApprovals",
                "summary": "List the pending approvals of the caller's tenant that the caller may answer.",
                "security": bearer,
                "parameters": [
                    {"name": "state", "in": "query", "required": False, "schema": {"type": "string", "enum": ["pending"]}},
                    {"name": "limit", "in": "query", "required": False,
                     "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100}},
                    {"name": "cursor", "in": "query", "required": False, "description": "next_cursor of the previous page.",
                     "schema": {"type": "string", "pattern": APPROVAL_CURSOR_PATTERN}},
                ],
                "responses": {
                    "200": _json(_ref("ApprovalListResponse"), "Pending approvals, oldest first."),
                    **_errors("400", "401", "403", "500", "503"),
                },
            }
        },
        "/v1/approvals/{approval_id}": {
            "get": {
                "operationId": "showApproval",
                "summary": "Show one approval (to its requester, with the grant once approved; or to an approver); "
                "with wait, once it is no longer pending or the seconds are up (a long poll).",
                "security": bearer,
                "parameters": [approval_id, {"name": "wait", "in": "query", "required": False,
                                             "schema": {"type": "integer", "minimum": 0, "maximum": 30, "default": 0}}],
                "responses": {
                    "200": _json(_ref("ApprovalResponse"), "The approval."),
                    **_errors("400", "401", "403", "404", "500", "503"),
                },
            },
            "post": {
                "operationId": "answerApproval",
                "summary": "Vote on a pending approval: approve (the vote that reaches the quorum returns the one-time "
                "grant; the input may be narrowed, the grant scoped) or deny (stores the reason). A step-up token "
                "may be the bearer token of a requester's own confirmation.",
                "security": bearer,
                "parameters": [approval_id],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("ApprovalAnswerBody")}}},
                "responses": {
                    "200": _json(_ref("ApprovalResponse"), "The answered approval, with the grant for an approval."),
                    **_errors("400", "401", "403", "404", "413", "422", "500", "503"),
                    "409": _json(_ref("ErrorBody"), "Already answered, expired, voted before, or a quorum collecting "
                                 "another input (CONFLICT)"),
                },
            },
        },
        "/v1/grants": {
            "get": {
                "operationId": "listGrants",
                "summary": "The standing scoped grants of the caller's tenant.",
                "security": bearer,
                "responses": {
                    "200": _json(_ref("ScopedGrantListResponse"), "Standing grants, soonest expiry first."),
                    **_errors("401", "500", "503"),
                },
            }
        },
        "/v1/grants/{grant_id}": {
            "delete": {
                "operationId": "revokeGrant",
                "summary": "Revoke a standing scoped grant (its requester or an approver).",
                "security": bearer,
                "parameters": [{"name": "grant_id", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 128}}],
                "responses": {
                    "200": _json(_ref("ScopedGrantResponse"), "The revoked grant."),
                    **_errors("401", "403", "404", "500", "503"),
                    "409": _json(_ref("ErrorBody"), "Revoked before (CONFLICT)"),
                },
            }
        },
    }


def _decision_paths() -> dict[str, Any]:
    """The path items of the decision log API (``app.web.decisions``), for auditors."""
    bearer: list[dict[str, list[str]]] = [{"bearer": []}]

    def query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
        return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}

    text = {"type": "string", "minLength": 1, "maxLength": 256, "pattern": TEXT_PATTERN}
    when = {"type": "string", "format": "date-time"}
    return {
        "/v1/decisions": {
            "get": {
                "operationId": "listDecisions",
                "summary": "Decision records, newest first (auditor roles; own tenant unless platform auditor).",
                "security": bearer,
                "parameters": [
                    query("tenant", text, "platform auditors; an auditor may only name its own"),
                    query("subject", text), query("tool", text),
                    query("decision", {"type": "string", "enum": list(DECISIONS)}),
                    query("event", {"type": "string", "enum": list(EVENT_TYPES)}),
                    query("error_code", text), query("request_id", text), query("approval_id", text),
                    query("idempotency_key", {**text, "maxLength": 255},
                          "the raw key, matched by its keyed hash"),
                    query("shadow", {"type": "string", "enum": list(SHADOW_OUTCOMES)},
                          "decide records whose shadow policy agreed, disagreed, or gave no decision"),
                    query("since", when, "inclusive, RFC 3339 with offset"),
                    query("until", when, "exclusive, RFC 3339 with offset"),
                    query("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}),
                    query("cursor", {"type": "string", "pattern": CURSOR_PATTERN}, "next_cursor of the previous page"),
                ],
                "responses": {
                    "200": _json(_ref("DecisionListResponse"), "A page of records."),
                    **_errors("400", "401", "403", "500", "503"),
                },
            }
        },
        "/v1/decisions/{decision_id}": {
            "get": {
                "operationId": "showDecision",
                "summary": "One decision record (404 for another tenant's unless platform auditor).",
                "security": bearer,
                "parameters": [{"name": "decision_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": _json(_ref("DecisionRecordResponse"), "The record."),
                    **_errors("401", "403", "404", "500", "503"),
                },
            }
        },
    }


@lru_cache(maxsize=1)
def build_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the public API (dict)."""
    _, defs = models_json_schema(
        [
            (DecideRequest, "validation"), (DecideResponse, "serialization"), (ErrorBody, "serialization"),
            (CompleteReport, "validation"), (FailReport, "validation"), (ExecutionReportResponse, "serialization"),
            (ApprovalAnswerBody, "validation"), (ApprovalResponse, "serialization"),
            (ApprovalListResponse, "serialization"), (DecisionListResponse, "serialization"),
            (ScopedGrantListResponse, "serialization"), (ScopedGrantResponse, "serialization"),
            (DecisionRecordResponse, "serialization"), (ToolListResponse, "serialization"),
            (PublishedKeys, "serialization"),
        ],
        ref_template="#/components/schemas/{model}",
    )
    bearer: list[dict[str, list[str]]] = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "toolgate",
            "version": "1",
            "description": "Policy decision point for AI tool calls.",
        },
        "paths": {
            "/v1/decide": {
                "post": {
                    "operationId": "decide",
                    "summary": "Decide whether a proposed tool call may run.",
                    "security": bearer,
                    "parameters": [
                        {"name": "Idempotency-Key", "in": "header", "required": False,
                         "schema": _IDEMPOTENCY_KEY},
                        {"name": "X-Request-Id", "in": "header", "required": False,
                         "description": f"Echoed when it matches {REQUEST_ID_PATTERN}, else replaced.",
                         "schema": {"type": "string"}},
                    ],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("DecideRequest")}}},
                    "responses": {
                        "200": _json(_ref("DecideResponse"), "A decision (allow, deny or user-approval)."),
                        **_errors("400", "401", "409", "413", "422", "429", "500", "503"),
                    },
                }
            },
            "/v1/executions/{key}/complete": _execution_report(
                "completeExecution", "Report the result of a reserved tool call.", "CompleteReport"
            ),
            "/v1/executions/{key}/fail": _execution_report(
                "failExecution", "Report that a reserved tool call failed.", "FailReport"
            ),
            **_approval_paths(),
            **_decision_paths(),
            "/v1/tools": {
                "get": {
                    "operationId": "listTools",
                    "summary": "List tool contracts with their JSON Schemas.",
                    "security": bearer,
                    "responses": {
                        "200": _json(_ref("ToolListResponse"), "Every registered contract."),
                        **_errors("401", "500", "503"),
                    },
                }
            },
            "/v1/capabilities": {
                "get": {
                    "operationId": "listCapabilities",
                    "summary": "The tool contracts the caller's policy lets it use at all (the capability document).",
                    "security": bearer,
                    "responses": {
                        "200": _json(_ref("ToolListResponse"), "The usable contracts, sorted by name then version."),
                        **_errors("401", "500", "503"),
                    },
                }
            },
            "/.well-known/toolgate-keys": {
                "get": {
                    "operationId": "publishedKeys",
                    "summary": "The public keys of decision receipts and decision-log checkpoints (JWK Set).",
                    "responses": {"200": _json(_ref("PublishedKeys"), "The key set.")},
                }
            },
            "/healthz": {"get": {"operationId": "healthz", "responses": {"200": _json(_ANY_OBJECT, "Process is up.")}}},
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "responses": {"200": _json(_ANY_OBJECT, "Ready."), "503": _json(_ANY_OBJECT, "Not ready.")},
                }
            },
            "/v1/policy/status": {
                "get": {
                    "operationId": "policyStatus",
                    "summary": "The policy revision active in each worker and the last refused bundle (operator roles).",
                    "security": [{"bearer": []}],
                    "responses": {"200": _json(_ANY_OBJECT, "Policy status."), **_errors("401", "403", "500", "503")},
                }
            },
            "/v1/policy/tenants/{tenant}/data": _tenant_data_path(),
        },
        "components": {
            "schemas": defs["$defs"],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
    }


@bp.get("/openapi.json")
def openapi():
    """The OpenAPI 3.1 document (no authentication)."""
    return jsonify(build_openapi())
