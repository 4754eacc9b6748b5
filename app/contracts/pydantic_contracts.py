"""Contracts authored as pydantic models: for input that is normalized (trimmed, defaulted) or
checked across fields. The models' JSON Schemas are published as the contract's schemas."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from app.bodies import release_validation_error
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


def _validator(model: type[BaseModel], sensitive: tuple[str, ...], what: str) -> Validate:
    def validate(data: Any) -> Any:
        try:
            return model.model_validate(data).model_dump(mode="json")
        except ValidationError as exc:
            problems: list[Problem] = []
            for err in exc.errors(include_input=False, include_url=False):
                path = pointer(err["loc"])
                message = "value is not valid" if is_sensitive(path, sensitive) else err["msg"].removeprefix("Value error, ")
                problems.append({"path": path, "message": message[:300]})
            release_validation_error(exc)
            raise mismatch(problems, what) from None

    return validate


def contract_from_models(
    meta: ContractMetadata, input_model: type[BaseModel], output_model: type[BaseModel] | None, source: str
) -> ToolContract:
    """Build a contract from pydantic models. Raises ``ContractLoadError`` when the input model
    accepts unknown fields."""
    if input_model.model_config.get("extra") != "forbid":
        raise ContractLoadError(f"{source}: input model must set extra='forbid'")
    return ToolContract(
        meta=meta,
        input_schema={"$schema": JSON_SCHEMA_DIALECT, **input_model.model_json_schema()},
        output_schema={"$schema": JSON_SCHEMA_DIALECT, **output_model.model_json_schema()} if output_model else None,
        source=source,
        _validate_input=_validator(input_model, meta.sensitive_paths, "input"),
        _validate_output=_validator(output_model, (), "result") if output_model else None,
        fills_defaults=True,  # model_dump writes every field, defaults included
    )
