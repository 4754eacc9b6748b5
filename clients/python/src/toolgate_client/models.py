"""Typed views of the gateway's JSON answers (pydantic, frozen).

Members the gateway adds later are ignored, members this client needs are required: a body
without them raises ``UnexpectedResponse`` from ``parse``. Times stay RFC 3339 strings as sent.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from toolgate_client.errors import UnexpectedResponse

DecisionWord = Literal["allow", "deny", "user-approval"]
AiSdkStatus = Literal["not-applicable", "approved", "denied", "user-approval"]


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ToolRef(_View):
    name: str
    version: str


class ToolDescription(_View):
    """A registered tool as ``GET /v1/tools`` and ``GET /v1/capabilities`` describe it."""

    name: str
    version: str
    mutating: bool
    description: str = ""
    input_schema: dict[str, Any] = {}


class ToolList(_View):
    tools: list[ToolDescription]
    request_id: str


class ApprovalInfo(_View):
    """The pending approval a ``user-approval`` decision opened."""

    approval_id: str
    request_reason: str
    expires_at: str


class IdempotencyInfo(_View):
    """``reserved``: run the tool, then report with ``reservation_token`` before
    ``lease_expires_at``. ``replayed``: it ran before; ``outcome`` ``completed`` with
    ``result``, or ``failed`` with ``failure_reason``."""

    key: str
    state: Literal["reserved", "replayed"]
    replayed: bool
    reservation_token: str | None = None
    lease_expires_at: str | None = None
    outcome: Literal["completed", "failed"] | None = None
    result: Any = None
    failure_reason: str | None = None


class Decision(_View):
    """A ``200`` answer of ``POST /v1/decide``; ``input`` is the contract's normalized input."""

    decision: DecisionWord
    reasons: list[str]
    decision_id: str
    request_id: str
    policy_revision: str
    tool: ToolRef
    input: dict[str, Any]
    approval: ApprovalInfo | None = None
    idempotency: IdempotencyInfo | None = None
    ai_sdk_status: AiSdkStatus | None = None
    dry_run: bool | None = None


class ExecutionReport(_View):
    """The answer to ``complete`` / ``fail``."""

    key: str
    state: Literal["completed", "failed", "released"]
    retention_expires_at: str | None = None
    request_id: str


class ApprovalAnswer(_View):
    approved: bool
    reason: str
    approver: str
    answered_at: str
    decision_id: str
    grant_expires_at: str | None = None


class Approval(_View):
    """One approval; ``input`` has the contract's sensitive paths redacted."""

    approval_id: str
    state: Literal["pending", "approved", "denied", "used", "expired"]
    tool: ToolRef
    tool_call_id: str | None
    requester: str
    input: dict[str, Any]
    input_fingerprint: str
    request_reason: str
    approver_roles: list[str]
    decision_id: str
    created_at: str
    expires_at: str
    answer: ApprovalAnswer | None = None


class ApprovalResult(_View):
    """``GET`` / ``POST /v1/approvals/<id>``: the approval and, for its approver or (while
    approved and unused) its requester, the one-time ``grant``."""

    approval: Approval
    grant: str | None = None
    request_id: str


class ApprovalList(_View):
    approvals: list[Approval]
    request_id: str


class DecisionRecord(BaseModel):
    """One decision log record (README "Audit", record fields); unknown members are kept."""

    model_config = ConfigDict(frozen=True, extra="allow")

    decision_id: str
    event: str
    time: str
    request_id: str | None = None
    tenant: str
    subject_id: str | None = None
    tool: str | None = None
    version: str | None = None
    decision: str | None = None
    reasons: list[str] = []
    error_code: str | None = None
    approval_id: str | None = None
    replayed: bool | None = None
    seq: int
    hash: str


class DecisionPage(_View):
    records: list[DecisionRecord]
    next_cursor: str | None
    request_id: str


V = TypeVar("V", bound=BaseModel)


def parse(model: type[V], body: dict[str, Any]) -> V:
    """``model`` from a response ``body``; raises ``UnexpectedResponse`` when it does not fit."""
    try:
        return model.model_validate(body)
    except ValidationError:
        request_id = body.get("request_id") if isinstance(body.get("request_id"), str) else None
        raise UnexpectedResponse(f"response does not match {model.__name__}", status=200, request_id=request_id) from None
