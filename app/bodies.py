"""Request bodies: strict JSON (RFC 8259) parsed into strict pydantic models.

Every endpoint that takes a body uses ``parse_body``: 400 for a body that is not one JSON
object, 422 with ``details.problems: [{path, message}]`` (JSON Pointers) for a schema mismatch.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from app.errors import ValidationFailed

M = TypeVar("M", bound=BaseModel)
_MAX_PROBLEMS = 50


def release_validation_error(exc: ValidationError) -> None:
    """Drop the tracebacks ``exc`` keeps of exceptions raised inside custom validators.

    pydantic-core holds those exceptions where the cycle collector cannot see them, so a
    reference cycle through their tracebacks (frames -> the request being handled) is never
    freed: each rejected request leaked its frames, about 23 KB (pydantic-xml issue #222 shows
    the same in plain pydantic). Call it once the problems have been read from ``exc``.
    """
    for error in exc.errors(include_input=False, include_url=False):
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, BaseException):
            cause.__traceback__ = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _InexactNumber(ValueError):
    """A JSON number whose digits a 64-bit float cannot keep."""


def _finite_float(text: str) -> float:
    """``text`` as a float, refused when it is out of range or when the float is another number
    (``50.000000000000001`` would become ``50.0``: the policy would judge one amount and the tool
    service, parsing the caller's text exactly, could execute another)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    if Decimal(repr(value)) != Decimal(text):
        raise _InexactNumber(text)
    return value


#: The largest magnitude of an integer every JSON peer reads exactly (I-JSON, RFC 7493 §2.2):
#: a 64-bit float holds every integer up to it, and RFC 8785 (fingerprints) only those.
MAX_EXACT_INTEGER = 2**53 - 1


def _exact_int(text: str) -> int:
    """``text`` as an int, refused beyond +-(2**53 - 1): a peer that parses numbers as 64-bit
    floats (JavaScript, many JSON libraries) would read another integer than the policy judged."""
    value = int(text)
    if not -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER:
        raise _InexactNumber(text)
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate object key")
    return obj


def parse_json(body: bytes) -> Any:
    """Parse ``body`` as one JSON text (RFC 8259): UTF-8, no NaN/Infinity, no duplicate keys,
    finite numbers that a 64-bit float represents as written and integers within +-(2**53 - 1)
    (RFC 8259 §6: beyond that, implementations disagree), no unpaired surrogate escapes. Raises ``ValidationFailed`` (400)
    with a safe message."""
    try:
        data = json.loads(
            body.decode("utf-8"),
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_exact_int,
            object_pairs_hook=_no_duplicate_keys,
        )
    except _InexactNumber:
        raise ValidationFailed(
            "request body has a number with more digits than a 64-bit float keeps", http_status=400
        ) from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValidationFailed("request body is not valid JSON", http_status=400) from None
    if _has_lone_surrogate(body, data):
        raise ValidationFailed("request body contains an unpaired UTF-16 surrogate escape", http_status=400)
    return data


def parse_json_object(body: bytes) -> dict[str, Any]:
    """``parse_json`` for a body that must be one JSON object. Raises ``ValidationFailed`` (400)."""
    data = parse_json(body)
    if not isinstance(data, dict):
        raise ValidationFailed("request body must be a JSON object", http_status=400)
    return data


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}|\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(body: bytes, data: Any) -> bool:
    """True when a ``\\uD800``-``\\uDFFF`` escape does not form a valid pair (RFC 8259 §8.2
    leaves such strings' behaviour unpredictable; RFC 8785 cannot canonicalize them)."""
    if b"\\u" not in body or _SURROGATE_ESCAPE.search(body) is None:
        return False
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_body(model: type[M], body: bytes, message: str) -> M:
    """Parse ``body`` as one JSON object into ``model``. Raises ``ValidationFailed``: 400 when
    it is not a JSON object, 422 with ``message`` and the problems when the schema rejects it."""
    data = parse_json_object(body)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"path": "/" + "/".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in exc.errors(include_input=False, include_url=False)
        ]
        release_validation_error(exc)
        raise ValidationFailed(message, http_status=422, details={"problems": problems[:_MAX_PROBLEMS]}) from None
