"""The input a tool runs with: the gateway's answer, with its redacted members taken back from
the arguments the caller sent.

A decide response's ``input`` is the contract's normalized input (trimmed strings, defaults,
an approver's edit) with the members the contract marks sensitive replaced by
``"[REDACTED]"``: the gateway never echoes them. An approver can never change those members,
so the caller's own value is the one to run with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

REDACTED = "[REDACTED]"


def executable_input(decided: Mapping[str, Any], sent: Mapping[str, Any]) -> dict[str, Any]:
    """``decided`` (the response's ``input``) with every ``"[REDACTED]"`` member replaced by the
    member at the same place in ``sent`` (the arguments of the call), where ``sent`` has one."""
    return cast("dict[str, Any]", _merge(dict(decided), sent))


def _merge(decided: Any, sent: Any) -> Any:
    if decided == REDACTED:
        return sent
    if isinstance(decided, dict) and isinstance(sent, Mapping):
        return {key: _merge(value, sent[key]) if key in sent else value for key, value in decided.items()}
    if isinstance(decided, list) and isinstance(sent, list) and len(decided) == len(sent):
        return [_merge(d, s) for d, s in zip(decided, sent, strict=True)]
    return decided
