"""Constraints of a scoped grant on a call's input (DESIGN §5): JSON Pointer (RFC 6901) ->
one of ``{"eq": value}``, ``{"max": number}``, ``{"min": number}``, ``{"one_of": [value, ...]}``.

A constraint holds when the pointer resolves in the input and the value meets it; values are
compared as JSON (a bool is never a number). No constraints: any input of the tool.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def resolves(document: Any, pointer: str) -> bool:
    """Whether ``pointer`` names a member of ``document``."""
    return _resolve(document, pointer) is not _MISSING


def _resolve(document: Any, pointer: str) -> Any:
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        return _MISSING
    node = document
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node) and (part == "0" or not part.startswith("0")):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def constraint_holds(constraint: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` meets one constraint (see the module docstring)."""
    if "eq" in constraint:
        return _same(constraint["eq"], value)
    if constraint.get("max") is not None:
        return _is_number(value) and value <= constraint["max"]
    if constraint.get("min") is not None:
        return _is_number(value) and value >= constraint["min"]
    if constraint.get("one_of") is not None:
        return any(_same(option, value) for option in constraint["one_of"])
    return False


def constraints_hold(constraints: dict[str, Any], document: dict[str, Any]) -> bool:
    """Whether every constraint holds on ``document``. ``constraints`` maps pointers to
    constraint dicts or ``Constraint`` models."""
    for pointer, constraint in constraints.items():
        value = _resolve(document, pointer)
        as_dict = constraint if isinstance(constraint, dict) else constraint.model_dump(mode="json")
        if value is _MISSING or not constraint_holds(as_dict, value):
            return False
    return True
