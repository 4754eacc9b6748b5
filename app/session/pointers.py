"""JSON Pointers (RFC 6901) as contracts use them to mark fields, with one extension: a ``*``
segment stands for every item of an array and every member of an object.

``values_at(document, "/transactions/*/recipient")`` returns ``[(concrete pointer, value)]``
for every value the pointer reaches (none when a segment is missing).
"""

from __future__ import annotations

from typing import Any

from app.contracts.contract import pointer as join_pointer


def _segments(pointer: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]


def values_at(document: Any, pointer: str) -> list[tuple[str, Any]]:
    """Every ``(concrete pointer, value)`` that ``pointer`` reaches in ``document``."""
    found: list[tuple[list[str | int], Any]] = [([], document)]
    for segment in _segments(pointer):
        reached: list[tuple[list[str | int], Any]] = []
        for path, node in found:
            if isinstance(node, dict):
                if segment == "*":
                    reached.extend(([*path, key], value) for key, value in node.items())
                elif segment in node:
                    reached.append(([*path, segment], node[segment]))
            elif isinstance(node, list):
                if segment == "*":
                    reached.extend(([*path, index], value) for index, value in enumerate(node))
                elif segment.isdigit() and int(segment) < len(node) and (segment == "0" or not segment.startswith("0")):
                    reached.append(([*path, int(segment)], node[int(segment)]))
        found = reached
    return [(join_pointer(path), value) for path, value in found]
