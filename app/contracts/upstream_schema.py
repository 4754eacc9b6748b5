"""The input schema an upstream server declares for a tool without a contract (an MCP tool's
``inputSchema``): checked when the tool is listed, applied to every call's arguments.

The schema's own ``$schema`` picks the JSON Schema dialect (draft 2020-12 when it names none,
as MCP says); formats are asserted. Unlike a contract, an upstream schema is applied as
written: it is the upstream's statement of what it accepts, and the gateway adds no rules, but
it runs on the contracts' linear-time engine (``app.contracts.json_schema``): an upstream cannot
slow the gateway down with a backtracking pattern, and a schema that needs one is not usable.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError

from app.contracts.contract import Problem, mismatch, pointer
from app.contracts.json_schema import backtracking_problem, linear_time
from app.errors import ValidationFailed


def usable_schema(schema: Any) -> bool:
    """True when ``schema`` is a valid JSON Schema for an object (``type: object``)."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or backtracking_problem(schema):
        return False
    try:
        validators.validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError:
        return False
    return True


def validate_upstream_input(schema: dict[str, Any], data: Any) -> None:
    """Check ``data`` against the upstream ``schema``. Raises ``ValidationFailed`` (422) with
    ``details.problems`` (``{path, message}``, JSON Pointers), also when the schema itself is
    not usable (nothing is forwarded that was not checked)."""
    if not usable_schema(schema):
        raise ValidationFailed(
            "the upstream input schema of this tool is not usable",
            http_status=422,
            details={"problems": [{"path": "", "message": "the tool's input schema is not a valid object schema"}]},
        )
    base = validators.validator_for(schema, default=Draft202012Validator)
    validator = linear_time(base)(schema, format_checker=base.FORMAT_CHECKER)
    problems: list[Problem] = [
        {"path": pointer(error.absolute_path), "message": error.message[:300]}
        for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    ]
    if problems:
        raise mismatch(problems, "input")
