"""The tool contract registry: load contracts, look them up by exact (name, version), validate.

A contract is authored either as a JSON Schema file under ``contracts/`` (``*.yaml``, ``*.yml``
or ``*.json``; draft 2020-12 with format assertions for uuid, date, date-time and email) or as a
pydantic model in ``app.contract_models`` (for normalization and cross-field rules). Both
become a ``ToolContract``. Unknown input fields are always rejected: a JSON Schema object that
does not say otherwise gets ``additionalProperties: false``.

Lookups are by exact membership in a dict keyed by ``(name, version)``; nothing is resolved by
attribute access or path, so names such as ``__class__`` or ``../x`` can only miss.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.bodies import release_validation_error
from app.errors import ValidationFailed

Risk = Literal["low", "medium", "high"]
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER


class ContractLoadError(ValueError):
    """A contract file or model is invalid. The message names the file and the problem."""


class ContractMetadata(BaseModel):
    """The metadata every contract carries, whatever its authoring form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")
    version: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
    description: str = ""
    mutating: bool
    risk: Risk
    retry_safe: bool = False
    sensitive_paths: tuple[str, ...] = ()
    idempotency_key_field: str | None = None
    lease_s: int | None = Field(default=None, gt=0, le=86_400)


class _ContractFile(ContractMetadata):
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


Problem = dict[str, str]
Validate = Callable[[Any], Any]


@dataclass(frozen=True)
class ToolContract:
    """One registered tool contract.

    ``validate_input(data) -> dict`` returns the normalized input or raises
    ``ValidationFailed`` (HTTP 422) whose ``details.problems`` lists ``{path, message}`` with
    ``path`` a JSON Pointer (RFC 6901). ``validate_output(result)`` does the same for a tool
    result when the contract has an output schema.
    """

    meta: ContractMetadata
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    source: str
    _validate_input: Validate = field(repr=False)
    _validate_output: Validate | None = field(repr=False, default=None)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def version(self) -> str:
        return self.meta.version

    def validate_input(self, data: Any) -> dict[str, Any]:
        """Validate and normalize tool input. Raises ``ValidationFailed`` (422)."""
        return self._validate_input(data)

    def validate_output(self, result: Any) -> Any:
        """Validate a tool result against the output schema (identity when there is none).

        Raises ``ValidationFailed`` (422).
        """
        if self._validate_output is None:
            return result
        return self._validate_output(result)

    def redact(self, data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A copy of ``data`` with the contract's sensitive paths replaced by ``REDACTED``,
        and the JSON Pointers that were redacted."""
        return redact(data, self.meta.sensitive_paths)

    def describe(self) -> dict[str, Any]:
        """The public description served by ``GET /v1/tools``."""
        return {
            **self.meta.model_dump(mode="json"),
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
        }


REDACTED = "[REDACTED]"


def redact(data: dict[str, Any], sensitive_paths: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """Copy ``data`` replacing the value at each JSON Pointer (RFC 6901) in ``sensitive_paths``
    that exists with ``REDACTED``. Returns the copy and the pointers that were redacted."""
    if not sensitive_paths:
        return data, []
    out = copy.deepcopy(data)
    done = []
    for pointer in sensitive_paths:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
        node: Any = out
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if parts and isinstance(node, dict) and parts[-1] in node:
            node[parts[-1]] = REDACTED
            done.append(pointer)
    return out, done


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _is_sensitive(path: str, sensitive: tuple[str, ...]) -> bool:
    return any(path == s or path.startswith(s + "/") for s in sensitive)


def _fail(problems: list[Problem], what: str) -> ValidationFailed:
    return ValidationFailed(
        f"{what} does not match the tool contract",
        http_status=422,
        details={"problems": problems[:50]},
    )


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


def _json_schema_validator(schema: dict[str, Any], sensitive: tuple[str, ...], what: str) -> Validate:
    validator = Draft202012Validator(schema, format_checker=_FORMAT_CHECKER)

    def validate(data: Any) -> Any:
        problems = []
        for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
            path = _pointer(error.absolute_path)
            if error.validator == "additionalProperties" and isinstance(error.instance, dict):
                known = error.schema.get("properties", {})
                problems.extend(
                    {"path": f"{path}/{_pointer([key])[1:]}", "message": "Extra inputs are not permitted"}
                    for key in error.instance
                    if key not in known
                )
                continue
            message = "value is not valid" if _is_sensitive(path, sensitive) else error.message
            problems.append({"path": path, "message": message[:300]})
        if problems:
            raise _fail(problems, what)
        return copy.deepcopy(data)

    return validate


def _pydantic_validator(model: type[BaseModel], sensitive: tuple[str, ...], what: str) -> Validate:
    def validate(data: Any) -> Any:
        try:
            return model.model_validate(data).model_dump(mode="json")
        except ValidationError as exc:
            problems = []
            for err in exc.errors(include_input=False, include_url=False):
                path = _pointer(err["loc"])
                message = "value is not valid" if _is_sensitive(path, sensitive) else err["msg"].removeprefix("Value error, ")
                problems.append({"path": path, "message": message[:300]})
            release_validation_error(exc)
            raise _fail(problems, what) from None

    return validate


def contract_from_schema(meta: ContractMetadata, input_schema: dict, output_schema: dict | None, source: str) -> ToolContract:
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
        _validate_input=_json_schema_validator(schemas["input_schema"], meta.sensitive_paths, "input"),
        _validate_output=_json_schema_validator(out, (), "result") if out else None,
    )


def contract_from_models(
    meta: ContractMetadata, input_model: type[BaseModel], output_model: type[BaseModel] | None, source: str
) -> ToolContract:
    """Build a contract from pydantic models (their JSON Schemas are published as-is)."""
    if input_model.model_config.get("extra") != "forbid":
        raise ContractLoadError(f"{source}: input model must set extra='forbid'")
    return ToolContract(
        meta=meta,
        input_schema={"$schema": JSON_SCHEMA_DIALECT, **input_model.model_json_schema()},
        output_schema={"$schema": JSON_SCHEMA_DIALECT, **output_model.model_json_schema()} if output_model else None,
        source=source,
        _validate_input=_pydantic_validator(input_model, meta.sensitive_paths, "input"),
        _validate_output=_pydantic_validator(output_model, (), "result") if output_model else None,
    )


def _read_contract_file(path: Path) -> ToolContract:
    try:
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        spec = _ContractFile.model_validate(raw)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ContractLoadError(f"{path}: {exc}") from None
    meta = ContractMetadata.model_validate(spec.model_dump(exclude={"input_schema", "output_schema"}))
    return contract_from_schema(meta, spec.input_schema, spec.output_schema, str(path))


class ContractRegistry:
    """All contracts of this gateway, keyed by exact ``(name, version)``."""

    def __init__(self, contracts: list[ToolContract]) -> None:
        self._by_key: dict[tuple[str, str], ToolContract] = {}
        for contract in contracts:
            key = (contract.name, contract.version)
            if key in self._by_key:
                raise ContractLoadError(
                    f"duplicate contract {key[0]} v{key[1]}: {self._by_key[key].source} and {contract.source}"
                )
            self._by_key[key] = contract

    @classmethod
    def load(cls, contracts_dir: Path, *, include_builtin: bool = True) -> ContractRegistry:
        """Load every contract file under ``contracts_dir`` (recursively) plus the pydantic
        contracts of ``app.contract_models``. Raises ``ContractLoadError`` listing the first
        invalid file."""
        contracts: list[ToolContract] = []
        if include_builtin:
            from app.contract_models import MODEL_CONTRACTS

            contracts.extend(MODEL_CONTRACTS)
        if contracts_dir.is_dir():
            for path in sorted(contracts_dir.rglob("*")):
                if path.is_file() and path.suffix in {".yaml", ".yml", ".json"}:
                    contracts.append(_read_contract_file(path))
        return cls(contracts)

    def get(self, name: str, version: str) -> ToolContract | None:
        """The contract for exactly ``(name, version)``, or None (a dynamic tool)."""
        return self._by_key.get((name, version))

    def sensitive_paths(self, name: str) -> tuple[str, ...]:
        """Every sensitive path declared by any version of tool ``name``: what to redact from
        the input of a version that has no contract (a caller must not be able to dodge
        redaction by naming an unknown version)."""
        paths = {p for (n, _), c in self._by_key.items() if n == name for p in c.meta.sensitive_paths}
        return tuple(sorted(paths))

    def all(self) -> list[ToolContract]:
        """Every contract, sorted by name then version."""
        return [self._by_key[k] for k in sorted(self._by_key)]

    def __len__(self) -> int:
        return len(self._by_key)
