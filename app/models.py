"""Wire and domain models (pydantic). Strict at the edge: unknown fields are rejected."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$"
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"
CALL_ID_PATTERN = r"^[\x21-\x7e]{1,128}$"

DecisionWord = Literal["allow", "deny", "user-approval"]


class Subject(BaseModel):
    """The authenticated caller, built from verified token claims only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    tenant: str
    roles: tuple[str, ...] = ()


class ApprovalPresentation(BaseModel):
    """An approval grant presented on a repeated decide call (DESIGN §5)."""

    model_config = ConfigDict(extra="forbid")

    approval_id: str = Field(min_length=1, max_length=128)
    grant: str | None = Field(default=None, max_length=8192)


class DecideRequest(BaseModel):
    """Body of ``POST /v1/decide``.

    ``tool`` must match ``^[A-Za-z][A-Za-z0-9_.-]{0,127}$``; ``version`` defaults to ``"1"``;
    ``input`` is the tool's arguments object (validated against the tool contract);
    ``context`` is caller-supplied and untrusted.
    """

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(pattern=TOOL_NAME_PATTERN, description="Tool name, exact contract name.")
    version: str = Field(default="1", pattern=VERSION_PATTERN, description="Contract version.")
    tool_call_id: str | None = Field(
        default=None, pattern=CALL_ID_PATTERN, description="The model's tool call id (printable ASCII, 1-128)."
    )
    input: dict[str, Any] = Field(default_factory=dict, description="Tool arguments.")
    context: dict[str, Any] = Field(default_factory=dict, description="Caller-supplied, untrusted context.")
    approval: ApprovalPresentation | None = None


class ToolRef(BaseModel):
    """A tool name and contract version as echoed in responses."""

    name: str
    version: str


class PolicyDecision(BaseModel):
    """A normalized policy result (DESIGN §3)."""

    model_config = ConfigDict(frozen=True)

    decision: DecisionWord
    reasons: tuple[str, ...] = ()
    approval_reason: str | None = None
    approver_roles: tuple[str, ...] | None = None
    approval_ttl_s: int | None = None
    #: True when the engine's answer was unusable and this deny was made by normalization.
    normalized_from_invalid: bool = False
    engine_decision_id: str | None = None


class ErrorInfo(BaseModel):
    """The ``error`` member of an error body."""

    code: str
    message: str
    retryable: bool
    details: Any | None = None
    retry_after_seconds: int | None = None


class ErrorBody(BaseModel):
    """Every non-2xx response: ``{"ok": false, "error": {...}, "request_id"}``."""

    ok: Literal[False] = False
    error: ErrorInfo
    request_id: str


class IdempotencyInfo(BaseModel):
    """Idempotency state of a decide response (DESIGN §4)."""

    key: str
    state: Literal["reserved", "replayed"]
    lease_expires_at: str | None = None
    result: Any | None = None
    replayed: bool | None = None


class ApprovalInfo(BaseModel):
    """A pending approval created by a ``user-approval`` decision (DESIGN §5)."""

    approval_id: str
    request_reason: str
    expires_at: str


class DecideResponse(BaseModel):
    """Body of a ``200`` decide response. Deny is a decision, not an error."""

    decision: DecisionWord
    reasons: list[str]
    decision_id: str
    request_id: str
    policy_revision: str
    tool: ToolRef
    input: dict[str, Any]
    approval: ApprovalInfo | None = None
    idempotency: IdempotencyInfo | None = None
    ai_sdk_status: Literal["not-applicable", "approved", "denied", "user-approval"] | None = None
