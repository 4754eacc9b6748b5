"""What an approval is (DESIGN §5): the request written once at creation, the approver's
answer, and the call both are bound to. Times are Unix epoch milliseconds.

Life of one approval (``Approval.state``)::

    pending --answer(approved)--> approved --consume--> used
       |    \\--answer(denied)---> denied
       \\-- expires_at passes: shown as ``expired``; can no longer be answered
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from app.models import ApprovalAnswerView, ApprovalView, ToolRef
from app.timefmt import rfc3339_ms

StoredState = Literal["pending", "approved", "denied", "used"]
STORED_STATES: tuple[str, ...] = ("pending", "approved", "denied", "used")


def new_approval_id() -> str:
    """An unguessable approval id: ``ap_`` and 32 base64url characters (192 random bits)."""
    return "ap_" + secrets.token_urlsafe(24)


@dataclass(frozen=True)
class CallFacts:
    """The facts of one decide call that an approval is bound to (from the verified subject and
    the validated request)."""

    tenant: str
    subject: str
    tool: str
    version: str
    tool_call_id: str | None
    input_fingerprint: str

    def binding(self, approval_id: str) -> dict[str, str | None]:
        """The same members as ``GrantClaims.binding`` for this call."""
        return {
            "approval_id": approval_id,
            "tenant": self.tenant,
            "subject": self.subject,
            "tool": self.tool,
            "version": self.version,
            "tool_call_id": self.tool_call_id,
            "input_fingerprint": self.input_fingerprint,
        }


class ApprovalRequest(BaseModel):
    """The immutable part of an approval, written once at creation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approval_id: str
    tenant: str
    requester: str
    tool: str
    version: str
    tool_call_id: str | None
    input_fingerprint: str
    input: dict[str, Any]
    request_reason: str
    approver_roles: tuple[str, ...]
    decision_id: str
    created_at_ms: int
    expires_at_ms: int
    ttl_s: int

    def call(self) -> CallFacts:
        """The call this approval was requested for."""
        return CallFacts(self.tenant, self.requester, self.tool, self.version, self.tool_call_id, self.input_fingerprint)


class ApprovalAnswer(BaseModel):
    """The approver's answer. ``grant_expires_at_ms`` is set for an approval only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approved: bool
    reason: str
    approver: str
    approver_roles: tuple[str, ...]
    decision_id: str
    answered_at_ms: int
    grant_expires_at_ms: int | None = None


@dataclass(frozen=True)
class Approval:
    """One approval as read from Redis."""

    request: ApprovalRequest
    state: StoredState
    answer: ApprovalAnswer | None

    def state_at(self, now_ms: int) -> str:
        """The state to show: the stored one, or ``expired`` for a pending approval past its
        expiry and an approved one whose grant expired unused."""
        if self.state == "pending" and now_ms >= self.request.expires_at_ms:
            return "expired"
        if self.state == "approved" and self.answer and now_ms >= (self.answer.grant_expires_at_ms or 0):
            return "expired"
        return self.state

    def view(self, now_ms: int) -> ApprovalView:
        """The wire form (``ApprovalView``) at ``now_ms``; the input is already redacted."""
        req, answer = self.request, self.answer
        return ApprovalView(
            approval_id=req.approval_id,
            state=self.state_at(now_ms),  # type: ignore[arg-type]
            tool=ToolRef(name=req.tool, version=req.version),
            tool_call_id=req.tool_call_id,
            requester=req.requester,
            input=req.input,
            input_fingerprint=req.input_fingerprint,
            request_reason=req.request_reason,
            approver_roles=list(req.approver_roles),
            decision_id=req.decision_id,
            created_at=rfc3339_ms(req.created_at_ms),
            expires_at=rfc3339_ms(req.expires_at_ms),
            answer=None
            if answer is None
            else ApprovalAnswerView(
                approved=answer.approved,
                reason=answer.reason,
                approver=answer.approver,
                answered_at=rfc3339_ms(answer.answered_at_ms),
                decision_id=answer.decision_id,
                grant_expires_at=rfc3339_ms(answer.grant_expires_at_ms) if answer.grant_expires_at_ms else None,
            ),
        )
