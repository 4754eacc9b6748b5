"""The policy input document (DESIGN §3). Identity comes from the verified subject only;
``context`` is what the caller sent (untrusted); ``session`` and ``history`` are built from the
gateway's own session state, only the members the call's policy reads (docs/session.md)."""

from __future__ import annotations

from typing import Any

from app.approvals.presented import Granted
from app.decide.session_step import SessionFacts
from app.decide.stages import Validated
from app.timefmt import now_rfc3339_ms


def build(stage: Validated, *, session: SessionFacts, approval: Granted | None) -> dict[str, Any]:
    """The input document for ``stage``'s call; ``session``: what its policy reads of the
    subject's session (``history`` and ``session`` are absent when it reads neither)."""
    subject = stage.subject
    identity: dict[str, Any] = {"id": subject.id, "tenant": subject.tenant, "roles": list(subject.roles)}
    if subject.asserted_by is not None:
        identity["asserted_by"] = subject.asserted_by
    return {
        "subject": identity,
        "tool": stage.tool.as_input(),
        "call": {"id": stage.request.tool_call_id, "input": stage.normalized_input},
        "context": stage.request.context,
        **session.policy_input(),
        "approval": approval.policy_input() if approval else None,
        "request": {"id": stage.call.request_id, "time": now_rfc3339_ms()},
    }
