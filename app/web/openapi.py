"""``GET /openapi.json``: the OpenAPI 3.1 document, generated from the pydantic wire models."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flask import Blueprint, jsonify
from pydantic.json_schema import models_json_schema

from app.models import DecideRequest, DecideResponse, ErrorBody

bp = Blueprint("openapi", __name__)

_ERROR_STATUSES = {
    "400": "Malformed body (VALIDATION_ERROR)",
    "401": "Missing or invalid bearer token (UNAUTHENTICATED)",
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


def _errors(*statuses: str) -> dict[str, Any]:
    return {s: _json(_ref("ErrorBody"), _ERROR_STATUSES[s]) for s in statuses}


_ANY_OBJECT = {"type": "object"}


@lru_cache(maxsize=1)
def build_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the public API (dict)."""
    _, defs = models_json_schema(
        [(DecideRequest, "validation"), (DecideResponse, "serialization"), (ErrorBody, "serialization")],
        ref_template="#/components/schemas/{model}",
    )
    bearer = [{"bearer": []}]
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
                         "schema": {"type": "string", "minLength": 1, "maxLength": 255}},
                        {"name": "X-Request-Id", "in": "header", "required": False,
                         "description": "Echoed when it matches ^[A-Za-z0-9._:-]{1,128}$, else replaced.",
                         "schema": {"type": "string"}},
                    ],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("DecideRequest")}}},
                    "responses": {
                        "200": _json(_ref("DecideResponse"), "A decision (allow, deny or user-approval)."),
                        **_errors("400", "401", "409", "413", "422", "429", "500", "503"),
                    },
                }
            },
            "/v1/tools": {
                "get": {
                    "operationId": "listTools",
                    "summary": "List tool contracts with their JSON Schemas.",
                    "security": bearer,
                    "responses": {
                        "200": _json(
                            {"type": "object", "required": ["tools", "request_id"],
                             "properties": {"tools": {"type": "array", "items": _ANY_OBJECT}, "request_id": {"type": "string"}}},
                            "Every registered contract.",
                        ),
                        **_errors("401", "500", "503"),
                    },
                }
            },
            "/healthz": {"get": {"operationId": "healthz", "responses": {"200": _json(_ANY_OBJECT, "Process is up.")}}},
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "responses": {"200": _json(_ANY_OBJECT, "Ready."), "503": _json(_ANY_OBJECT, "Not ready.")},
                }
            },
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
