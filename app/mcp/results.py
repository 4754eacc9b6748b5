"""The ``tools/call`` answers ``toolgate mcp`` makes itself: denials, pending approvals,
refused arguments, replays of stored results. Every one carries the decision under
``_meta["toolgate/decision"]`` (``{decision_id, decision, reasons, replayed}``); a pending
approval also ``_meta["toolgate/approval"]`` (``{approval_id, request_reason, expires_at}``).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from app.errors import ToolgateError
from app.models import DecideResponse

DECISION_META = "toolgate/decision"
APPROVAL_META = "toolgate/approval"
ERROR_META = "toolgate/error"
#: ``_meta`` namespaces an upstream's result may not bring to the client: the protocol's and
#: this gateway's own (an upstream could otherwise plant a ``toolgate/approval`` or
#: ``toolgate/error`` the client would take for the gateway's).
_GATEWAY_META_PREFIXES = ("io.modelcontextprotocol/", "toolgate/")


def decision_meta(response: DecideResponse) -> dict[str, Any]:
    """``_meta["toolgate/decision"]`` of a decided call."""
    replayed = bool(response.idempotency and response.idempotency.replayed)
    return {
        "decision_id": response.decision_id,
        "decision": response.decision,
        "reasons": list(response.reasons),
        "replayed": replayed,
    }


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


def with_decision(result: types.CallToolResult, response: DecideResponse) -> types.CallToolResult:
    """``result`` (an upstream's) with the decision added to its ``_meta``; the upstream's own
    entries in the protocol-reserved ``io.modelcontextprotocol/*`` namespace (such as its server
    info) and in ``toolgate/*`` are dropped: this server is the gateway."""
    meta = {k: v for k, v in (result.meta or {}).items() if not k.startswith(_GATEWAY_META_PREFIXES)}
    meta[DECISION_META] = decision_meta(response)
    return result.model_copy(update={"meta": meta})


def denied(response: DecideResponse) -> types.CallToolResult:
    """The tool result of a ``deny``: an error result with the policy's reasons; the upstream
    was not called."""
    reasons = "; ".join(response.reasons) or "no reason given"
    return types.CallToolResult(
        content=_text(f"toolgate denied this call: {reasons}"),
        is_error=True,
        _meta={DECISION_META: decision_meta(response)},
    )


def approval_pending(response: DecideResponse) -> types.CallToolResult:
    """The tool result of a ``user-approval`` that no one has answered yet: an error result
    with the approval id and the request reason; the upstream was not called."""
    approval = response.approval
    assert approval is not None
    text = (
        f"toolgate: this call needs approval ({approval.request_reason}). Approval {approval.approval_id} is pending "
        f"until {approval.expires_at}; once an approver has answered it, call the tool again with the same arguments."
    )
    return types.CallToolResult(
        content=_text(text),
        is_error=True,
        _meta={DECISION_META: decision_meta(response), APPROVAL_META: approval.model_dump(mode="json")},
    )


def refused(error: ToolgateError) -> types.CallToolResult:
    """The tool result of a call the gateway refused before deciding it (arguments that do not
    match the tool's schema, an idempotency conflict): an error result the model can act on."""
    text = f"toolgate refused this call: {error.message}"
    if error.details is not None:
        text += " " + json.dumps(error.details, separators=(",", ":"))[:2000]
    detail: dict[str, Any] = {"code": error.code, "message": error.message, "retryable": error.retryable}
    if error.details is not None:
        detail["details"] = error.details
    if error.retry_after_s is not None:
        detail["retry_after_seconds"] = error.retry_after_s
    return types.CallToolResult(content=_text(text), is_error=True, _meta={ERROR_META: detail})


def stored(result: types.CallToolResult) -> dict[str, Any]:
    """The form of an upstream result kept for replays (its wire JSON, without ``_meta``)."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"meta"})


def replayed(response: DecideResponse) -> types.CallToolResult:
    """The answer to a retried call that already ran: the stored result, or the stored failure
    as an error result. The upstream is not called again."""
    idempotency = response.idempotency
    assert idempotency is not None
    if idempotency.outcome == "completed" and isinstance(idempotency.result, dict):
        return with_decision(types.CallToolResult.model_validate(idempotency.result), response)
    reason = idempotency.failure_reason or "the earlier attempt failed"
    return types.CallToolResult(
        content=_text(f"toolgate: this call was made before and failed ({reason}); it is not run again."),
        is_error=True,
        _meta={DECISION_META: decision_meta(response)},
    )
