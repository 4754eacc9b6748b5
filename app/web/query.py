"""Query parameters: every endpoint reads its query string through one strict model, so a
malformed parameter is always a 400 with the parameter named, never a 500."""

from __future__ import annotations

from typing import TypeVar

from flask import request
from pydantic import BaseModel, ValidationError

from app.bodies import release_validation_error
from app.errors import ValidationFailed

M = TypeVar("M", bound=BaseModel)
_MAX_PROBLEMS = 20


def parse_query(model: type[M]) -> M:
    """The request's query string as ``model`` (which should forbid unknown parameters).
    Raises ``ValidationFailed`` (400) with ``details.problems: [{path: parameter, message}]``
    for a repeated, unknown or invalid parameter."""
    repeated = sorted(k for k in request.args if len(request.args.getlist(k)) > 1)
    if repeated:
        raise ValidationFailed(
            "query parameters may appear once", details={"problems": [{"path": k, "message": "repeated"} for k in repeated]}
        )
    try:
        return model.model_validate(request.args.to_dict())
    except ValidationError as exc:
        problems = [
            {"path": ".".join(str(p) for p in err["loc"]) or "query", "message": err["msg"]}
            for err in exc.errors(include_input=False, include_url=False)
        ]
        release_validation_error(exc)
        raise ValidationFailed("query parameters are not valid", details={"problems": problems[:_MAX_PROBLEMS]}) from None


def ascii_digits(value: object) -> object:
    """A ``BeforeValidator`` for integer parameters: only ASCII digits (``str.isdigit`` and
    ``int`` also take ``²`` or Arabic-Indic digits). Other values pass on unchanged."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number written with the digits 0-9")
    return value
