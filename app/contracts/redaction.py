"""Redaction of a contract's sensitive paths wherever input is shown or stored (DESIGN §6)."""

from __future__ import annotations

import copy
from typing import Any

REDACTED = "[REDACTED]"


def redact(data: dict[str, Any], sensitive_paths: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """Copy ``data`` replacing the value at each JSON Pointer (RFC 6901) in ``sensitive_paths``
    that exists with ``REDACTED``. Returns the copy and the pointers that were redacted
    (``data`` itself, unchanged, when there are no sensitive paths)."""
    if not sensitive_paths:
        return data, []
    out = copy.deepcopy(data)
    done = []
    for path in sensitive_paths:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
        node: Any = out
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if parts and isinstance(node, dict) and parts[-1] in node:
            node[parts[-1]] = REDACTED
            done.append(path)
    return out, done
