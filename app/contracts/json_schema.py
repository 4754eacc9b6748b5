"""Contracts authored as JSON Schema (draft 2020-12 with format assertions for uuid, date,
date-time and email). Unknown input fields are always rejected: an object schema that does not
say otherwise gets ``additionalProperties: false``.

``pattern`` runs on RE2 (google-re2), which matches in time linear in the input: Python's
backtracking ``re`` turned a pattern like ``^(a+)+$`` into seconds of CPU on 25 characters. A
pattern RE2 cannot compile (lookarounds, backreferences) is refused when the contract loads, and
so is ``patternProperties`` (jsonschema matches property names with ``re``). RE2 is also
stricter where it matters: its digit class is ASCII only and `$` does not match before a final newline.

Money: ``multipleOf`` is checked exactly, in decimal (float division says 19.99 is no multiple
of 0.01), and ``x-decimal-places: N`` says "at most N digits after the point" without a float in
the schema, so a client that validates the published schema with float arithmetic agrees.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError

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


@functools.lru_cache(maxsize=4096)
def _re2(pattern: str) -> Any:
    """The compiled RE2 program of ``pattern``. Raises ``re2.error`` when RE2 refuses it."""
    return re2.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """The ``pattern`` keyword, on RE2 (jsonschema's own uses ``re.search``)."""
    if validator.is_type(instance, "string") and _re2(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _decimal(number: float | int) -> Decimal:
    """The decimal a JSON number was written as (``repr`` of a float is its shortest form)."""
    return Decimal(repr(number)) if isinstance(number, float) else Decimal(number)


def _multiple_of(validator: Any, divisor: float | int, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """``multipleOf`` in exact decimal arithmetic."""
    if not validator.is_type(instance, "number"):
        return
    try:
        remainder = _decimal(instance) % _decimal(divisor)
    except InvalidOperation:  # beyond decimal's precision: a number this large has no such fraction
        remainder = Decimal(0) if isinstance(instance, int) else Decimal(1)
    if remainder != 0:
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")


def _decimal_places(validator: Any, places: int, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """``x-decimal-places``: at most ``places`` digits after the decimal point."""
    if validator.is_type(instance, "number") and not isinstance(instance, bool):
        exponent = _decimal(instance).normalize().as_tuple().exponent
        if isinstance(exponent, int) and -exponent > places:
            yield ValidationError(f"{instance!r} has more than {places} decimal places")


_KEYWORDS = {"pattern": _pattern, "multipleOf": _multiple_of, "x-decimal-places": _decimal_places}


def linear_time(base: Any) -> Any:
    """The jsonschema validator class ``base`` (a draft) with ``pattern`` on RE2 and exact
    decimal ``multipleOf`` / ``x-decimal-places``."""
    return validators.extend(base, _KEYWORDS)


_Validator = linear_time(Draft202012Validator)


def backtracking_problem(schema: Any) -> str | None:
    """What in ``schema`` would run on a backtracking regex engine, or None: a ``pattern`` RE2
    cannot compile, or any ``patternProperties``."""
    if isinstance(schema, list):
        return next((p for p in map(backtracking_problem, schema) if p), None)
    if not isinstance(schema, dict):
        return None
    if "patternProperties" in schema:
        return "patternProperties is not supported"
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            _re2(pattern)
        except re2.error as exc:
            return f"pattern {pattern!r} is not supported by the linear-time engine (RE2): {exc}"
    return next((p for p in map(backtracking_problem, schema.values()) if p), None)


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
    validator = _Validator(schema, format_checker=_FORMAT_CHECKER)

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
        problem = backtracking_problem(schema)
        if problem:
            raise ContractLoadError(f"{source}: {key} {problem}")
    out = schemas.get("output_schema")
    return ToolContract(
        meta=meta,
        input_schema=schemas["input_schema"],
        output_schema=out,
        source=source,
        _validate_input=_validator(schemas["input_schema"], meta.sensitive_paths, "input"),
        _validate_output=_validator(out, (), "result") if out else None,
    )
