"""What the agent frameworks' adapters share (``langchain_tools``, ``openai_agents_tools``):
``FrameworkCall``, one guarded tool whose refusals become tool results, so that the model reads
them and the run goes on, instead of an exception that ends the run.

- ``deny``: the result ``"toolgate denied this call: <reasons>"``; the tool did not run.
- ``user-approval``: ``on_approval(pending)`` if given (LangGraph's ``interrupt``), else the
  result ``"this call waits for a person's approval: <reason> (approval <id>)"``; the tool did
  not run. The same call asked again (same key, or tool call id) reads that approval (waiting
  up to ``approval_wait_s``): approved, it runs once with the grant; denied, the approver's
  reason is the result; still pending, the same waiting result.

Everything else (the tool's own errors, gateway errors after the retry rules, ``ReportFailed``)
propagates to the framework's tool-error handling.

The idempotency key of a call: none when the input carries the contract's key field
(``key_field``: the gateway takes it from the input), else ``idempotency_key(tool_call_id,
input)``, by default ``<prefix>:<tool_call_id>`` (a regenerated step with a new id is a new
call: pass your own function for a key that survives it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolgate_client.errors import ApprovalNotUsable, ApprovalRequired, ApprovalTimeout, ToolCallDenied
from toolgate_client.guarded import GuardedTool, PendingApproval, ToolCall

KeyFunction = Callable[[str, Mapping[str, Any]], str | None]
OnApproval = Callable[[PendingApproval], object]
_REMEMBERED = 10_000


def denial_result(denied: ToolCallDenied) -> str:
    """The tool result of a denied call."""
    return "toolgate denied this call: " + ("; ".join(denied.reasons) or "no reason given")


def approval_result(pending: PendingApproval) -> str:
    """The tool result of a call that waits for a person's approval."""
    return f"this call waits for a person's approval: {pending.request_reason} (approval {pending.approval_id})"


class FrameworkCall:
    """Runs calls of one guarded tool for an agent framework (module docstring)."""

    def __init__(self, guarded: GuardedTool, *, key_prefix: str, key_field: str | None = None,
                 idempotency_key: KeyFunction | None = None, on_approval: OnApproval | None = None,
                 approval_wait_s: float = 0.0) -> None:
        self.guarded = guarded
        self.key_prefix = key_prefix
        self.key_field = key_field
        self.idempotency_key = idempotency_key
        self.on_approval = on_approval
        self.approval_wait_s = approval_wait_s
        self._pending: dict[str, PendingApproval] = {}

    def key(self, tool_call_id: str, tool_input: Mapping[str, Any]) -> str | None:
        """The key sent for a call (module docstring)."""
        if self.key_field is not None and tool_input.get(self.key_field) is not None:
            return None
        if self.idempotency_key is not None:
            return self.idempotency_key(tool_call_id, tool_input)
        return f"{self.key_prefix}:{tool_call_id}"

    def __call__(self, tool_input: Mapping[str, Any], *, tool_call_id: str) -> Any:
        """The tool's result, or the text of its refusal."""
        key = self.key(tool_call_id, tool_input)
        known = key or tool_call_id
        pending = self._pending.get(known)
        try:
            if pending is not None:
                try:
                    return self._after_approval(known, pending)
                except ApprovalNotUsable:  # expired, or its grant used: ask afresh (a settled call replays)
                    self._pending.pop(known, None)
            return self.guarded.run(ToolCall(tool_input, key, tool_call_id))
        except ToolCallDenied as denied:
            self._pending.pop(known, None)
            return denial_result(denied)
        except ApprovalRequired as needed:
            self._remember(known, needed.pending)
            if self.on_approval is None:
                return approval_result(needed.pending)
            self.on_approval(needed.pending)
            return self._after_approval(known, needed.pending)

    def _after_approval(self, known: str, pending: PendingApproval) -> Any:
        """The call run with its grant, or the waiting result while nobody answered."""
        try:
            result = pending.retry(timeout_s=self.approval_wait_s, poll_interval_s=0.2)
        except ApprovalTimeout:
            return approval_result(pending)
        self._pending.pop(known, None)
        return result

    def _remember(self, known: str, pending: PendingApproval) -> None:
        if len(self._pending) >= _REMEMBERED:
            self._pending.pop(next(iter(self._pending)))
        self._pending[known] = pending
