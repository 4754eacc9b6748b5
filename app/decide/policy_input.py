"""The policy input document (DESIGN §3). Identity comes from the verified subject only;
``context`` is what the caller sent (untrusted); ``history`` is built from the gateway's own
decision log."""

from __future__ import annotations

from typing import Any

from app.approvals.presented import Granted
from app.audit.interfaces import DecisionLogReader
from app.decide.stages import Validated, conversation_id
from app.timefmt import now_rfc3339_ms


def trusted_history(stage: Validated, reader: DecisionLogReader) -> dict[str, Any]:
    """``input.history``: what the decision log says this verified subject did in the caller's
    conversation (``context.conversation_id``) over the last 24 h — allowed, non-replayed calls
    counted per tool. Without a conversation id the policy gets ``{}``: per-conversation rules
    then see no history, never a caller-supplied one. Raises ``DependencyUnavailable`` (503)
    when the decision log cannot be read."""
    conversation = conversation_id(stage.request)
    if conversation is None:
        return {}
    subject = stage.subject
    return reader.subject_history(subject.tenant, subject.id, conversation_id=conversation).as_input()


def build(stage: Validated, *, history: dict[str, Any], approval: Granted | None) -> dict[str, Any]:
    """The input document for ``stage``'s call."""
    subject = stage.subject
    return {
        "subject": {"id": subject.id, "tenant": subject.tenant, "roles": list(subject.roles)},
        "tool": stage.tool.as_input(),
        "call": {"id": stage.request.tool_call_id, "input": stage.normalized_input},
        "context": stage.request.context,
        "history": history,
        "approval": approval.policy_input() if approval else None,
        "request": {"id": stage.call.request_id, "time": now_rfc3339_ms()},
    }
