"""Contracts authored as JSON Schema (draft 2020-12 with format assertions for uuid, date,
date-time and email). Unknown input fields are always rejected: an object schema that does not
say otherwise gets ``additionalProperties: false``.
"""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from app.contracts.contract import (
    JSON_SCHEMA_DIALECT,
    ContractLoadError,
    ContractMetadata,
    Problem,
    ToolContract,
    Validate,
    is_sensitive,
    mismatch,
    pointer,
)

_FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER


def _strict_objects(schema: Any) -> Any:
    """Return a copy of ``schema`` in which every object schema without an explicit
    ``additionalProperties``/``unevaluatedProperties`` rejects unknown fields."""
    if isinstance(schema, list):
        return [_strict_objects(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict_objects(v) for k, v in schema.items()}
    is_object = out.get("type") == "object" or "properties" in out
    if is_object and "additionalProperties" not in out and "unevaluatedProperties" not in out:
        out["additionalProperties"] = False
    return out


def _validator(schema: dict[str, Any], sensitive: tuple[str, ...], what: str) -> Validate:
    validator = Draft202012Validator(schema, format_checker=_FORMAT_CHECKER)

    def validate(data: Any) -> Any:
        problems: list[Problem] = []
        for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
            path = pointer(error.absolute_path)
            if error.validator == "additionalProperties" and isinstance(error.instance, dict):
                known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
                problems.extend(
                    {"path": f"{path}/{pointer([key])[1:]}", "message": "Extra inputs are not permitted"}
                    for key in error.instance
                    if key not in known
                )
                continue
            message = "value is not valid" if is_sensitive(path, sensitive) else error.message
            problems.append({"path": path, "message": message[:300]})
        if problems:
            raise mismatch(problems, what)
        return copy.deepcopy(data)

    return validate


def contract_from_schema(
    meta: ContractMetadata, input_schema: dict[str, Any], output_schema: dict[str, Any] | None, source: str
) -> ToolContract:
    """Build a contract from JSON Schemas. Raises ``ContractLoadError`` for an invalid schema."""
    schemas = {"input_schema": _strict_objects(input_schema)}
    if output_schema is not None:
        schemas["output_schema"] = output_schema
    for key, schema in schemas.items():
        schema.setdefault("$schema", JSON_SCHEMA_DIALECT)
        if schema["$schema"] != JSON_SCHEMA_DIALECT:
            raise ContractLoadError(f"{source}: {key} must use JSON Schema draft 2020-12")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ContractLoadError(f"{source}: {key} is not a valid JSON Schema: {exc.message}") from None
        if schema.get("type") != "object" and key == "input_schema":
            raise ContractLoadError(f"{source}: input_schema must be of type object")
    out = schemas.get("output_schema")
    return ToolContract(
        meta=meta,
        input_schema=schemas["input_schema"],
        output_schema=out,
        source=source,
        _validate_input=_validator(schemas["input_schema"], meta.sensitive_paths, "input"),
        _validate_output=_validator(out, (), "result") if out else None,
    )
