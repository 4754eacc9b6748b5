"""Wire and domain models (pydantic). Strict at the edge: unknown fields are rejected."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, model_validator

from app.vocabulary import (
    CALL_ID_PATTERN,
    DECISION_ID_PATTERN,
    LIMIT_ID_PATTERN,
    NAMESPACE_PATTERN,
    RESERVATION_TOKEN_PATTERN,
    RULE_ID_PATTERN,
    TOOL_NAME_PATTERN,
    VERSION_PATTERN,
    AiSdkStatus,
    DecisionWord,
    EventType,
    GrantScope,
)


class Subject(BaseModel):
    """The authenticated caller, built from verified token claims only; or the subject a PEP's
    verified credential asserts (AuthZEN, ``asserted``): then ``asserted_by`` names the PEP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    tenant: str
    roles: tuple[str, ...] = ()
    #: Left out of dumps when None, so an end user's subject dumps as it always has.
    asserted_by: str | None = Field(default=None, exclude_if=lambda value: value is None)

    def asserted(self, subject_id: str) -> Subject:
        """The subject ``subject_id`` of this caller's tenant, as this caller (a PEP) asserts
        it: no roles of its own (the policy finds its attributes in its data)."""
        return Subject(id=subject_id, tenant=self.tenant, asserted_by=self.id)


class ApprovalPresentation(BaseModel):
    """An approval grant presented on a repeated decide call (DESIGN §5)."""

    model_config = ConfigDict(extra="forbid")

    approval_id: str = Field(min_length=1, max_length=128)
    grant: str | None = Field(default=None, max_length=8192)


class DecideRequest(BaseModel):
    """Body of ``POST /v1/decide``.

    ``tool`` must match ``^[A-Za-z][A-Za-z0-9_.-]{0,127}$``; ``version`` defaults to ``"1"``;
    ``input`` is the tool's arguments object (validated against the tool contract);
    ``context`` is caller-supplied and untrusted. A dry run presents no approval (the published
    schema says so with a ``not``).
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "not": {
                "required": ["dry_run", "approval"],
                "properties": {"dry_run": {"const": True}, "approval": {"type": "object"}},
            }
        },
    )

    tool: str = Field(pattern=TOOL_NAME_PATTERN, description="Tool name, exact contract name.")
    version: str = Field(default="1", pattern=VERSION_PATTERN, description="Contract version.")
    namespace: str = Field(
        default="", pattern=NAMESPACE_PATTERN, description="The tool suite's namespace (empty: the default namespace)."
    )
    tool_call_id: str | None = Field(
        default=None, pattern=CALL_ID_PATTERN, description="The model's tool call id (printable ASCII, 1-128)."
    )
    input: dict[str, Any] = Field(default_factory=dict, description="Tool arguments.")
    context: dict[str, Any] = Field(default_factory=dict, description="Caller-supplied, untrusted context.")
    approval: ApprovalPresentation | None = None
    dry_run: StrictBool = Field(
        default=False,
        description="Evaluate only: no idempotency key is needed or reserved, no approval is created, "
        "and the decision record is a decide_dry_run event (how policies are tried on recorded traffic).",
    )

    @model_validator(mode="after")
    def _dry_run_presents_no_approval(self) -> DecideRequest:
        if self.dry_run and self.approval is not None:
            raise ValueError("a dry run cannot present an approval")
        return self


class ToolRef(BaseModel):
    """A tool name and contract version as echoed in responses, with its namespace when it is
    not the default one."""

    name: str
    version: str
    namespace: str | None = Field(default=None, exclude_if=lambda value: value is None)


class MatchedRule(BaseModel):
    """One rule that contributed to a decision: its stable id (``family.rule``, or
    ``toolgate.<rule>`` for the library's own), its effect and its message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=RULE_ID_PATTERN)
    effect: Literal["deny", "approval", "allow"]
    message: str


#: Why a shadow policy gave no decision: over its deadline (abandoned), every shadow worker
#: busy (not started), an evaluation error, no candidate bundle active, a result that is not a
#: decision.
ShadowError = Literal["timeout", "overloaded", "evaluation_error", "unavailable", "invalid_result"]
SHADOW_ERRORS: tuple[str, ...] = get_args(ShadowError)


class ShadowOutcome(BaseModel):
    """What a shadow policy decided for one call, beside the policy in force (DESIGN §3): a
    ``candidate`` (TOOLGATE_SHADOW_POLICY_DIR / _BUNDLE) or the active policy's ``log_only``
    families. Recorded, counted, never acted upon. Either ``decision`` (with ``reasons`` and
    ``matched_rules``) or ``error`` is set; ``revision`` is the shadow policy's, when known."""

    model_config = ConfigDict(frozen=True)

    source: Literal["candidate", "log_only"]
    revision: str | None = None
    decision: DecisionWord | None = None
    reasons: tuple[str, ...] = ()
    matched_rules: tuple[MatchedRule, ...] = ()
    error: ShadowError | None = None


class RecordedShadow(ShadowOutcome):
    """A decision record's ``shadow``: the outcome and whether it ``agrees`` with the active
    policy's decision (None when the shadow gave no decision)."""

    agrees: bool | None = None


class LimitSpec(BaseModel):
    """A count or budget the gateway enforces atomically when it answers ``allow`` (the
    decision document's ``limits``, docs/session.md): at most ``max`` within ``window_s``
    seconds per ``scope`` (the verified subject, or the subject's conversation). Each allowed
    call reserves one unit, or the number at the input's ``amount_field`` (a JSON Pointer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=LIMIT_ID_PATTERN)
    scope: Literal["subject", "conversation"]
    window_s: int = Field(gt=0, le=31 * 86_400)
    max: float = Field(ge=0, le=2**53 / 1_000_000)
    amount_field: str | None = Field(default=None, pattern=r"^(/[^/]*)+$")
    message: str | None = Field(default=None, min_length=1, max_length=500)


class RateLimitSpec(BaseModel):
    """A rate limit: at most ``count`` decide calls per ``per_s`` seconds per ``scope`` (the
    tenant, or the verified subject); the decision document's ``rate_limits`` and
    ``TOOLGATE_RATE_LIMIT_PER_SUBJECT`` (docs/session.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=LIMIT_ID_PATTERN)
    scope: Literal["tenant", "subject"]
    count: int = Field(ge=1, le=1_000_000)
    per_s: int = Field(ge=1, le=86_400)


class EscalationRule(BaseModel):
    """``approval.escalation`` of a policy decision: unanswered after ``after_s`` seconds, the
    holders of ``roles`` are notified and may answer too."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    after_s: int
    roles: tuple[str, ...]


class PolicyDecision(BaseModel):
    """A normalized policy result (DESIGN §3). The ``approval_*`` members come from the
    decision's ``approval`` object (``app.engine.base``); None: the gateway's default."""

    model_config = ConfigDict(frozen=True)

    decision: DecisionWord
    reasons: tuple[str, ...] = ()
    matched_rules: tuple[MatchedRule, ...] = ()
    approval_reason: str | None = None
    approver_roles: tuple[str, ...] | None = None
    approval_ttl_s: int | None = None
    approval_quorum: int | None = None
    approval_self_approval: bool = False
    approval_requester_only: bool = False
    approval_escalation: EscalationRule | None = None
    approval_grant_scopes: tuple[str, ...] | None = None
    approval_max_grant_ttl_s: int | None = None
    #: True when the engine's answer was unusable and this deny was made by normalization.
    normalized_from_invalid: bool = False
    engine_decision_id: str | None = None
    #: The revision of the policy snapshot that evaluated (None: ask the engine).
    policy_revision: str | None = None
    #: Counts and budgets to reserve when the call is allowed.
    limits: tuple[LimitSpec, ...] = ()
    #: Rate limits this call counts against, whatever the decision.
    rate_limits: tuple[RateLimitSpec, ...] = ()
    #: What the policy's log-only families would make of the call (the decision document's
    #: ``log_only`` member, DESIGN §3); never acted upon. None: no log-only family governs it.
    log_only: ShadowOutcome | None = None


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
    """Idempotency state of an ``allow`` decide response for a call with a key (DESIGN §4).

    ``reserved``: the caller now owns the key; it executes the tool, then reports to
    ``/v1/executions/<key>/complete`` or ``/fail`` (with ``reservation_token``) before
    ``lease_expires_at`` (RFC 3339). ``replayed``: the call was settled before; do not execute
    again: return ``result`` (``outcome: completed``) or the failure (``outcome: failed``).
    """

    key: str
    state: Literal["reserved", "replayed"]
    replayed: bool
    reservation_token: str | None = None
    lease_expires_at: str | None = None
    outcome: Literal["completed", "failed"] | None = None
    result: Any | None = None
    failure_reason: str | None = None


class CompleteReport(BaseModel):
    """Body of ``POST /v1/executions/<key>/complete``: the tool's result (any JSON value,
    validated against the contract's output schema when it has one)."""

    model_config = ConfigDict(extra="forbid")

    result: Any = Field(description="The tool's result.")
    reservation_token: str | None = Field(
        default=None,
        pattern=RESERVATION_TOKEN_PATTERN,
        description="The reservation_token of the decide response; without it the report applies to the current reservation.",
    )


class FailReport(BaseModel):
    """Body of ``POST /v1/executions/<key>/fail``: ``retryable`` releases the key, otherwise
    the failure is stored and replayed to retries."""

    model_config = ConfigDict(extra="forbid")

    retryable: StrictBool
    reason: str = Field(min_length=1, max_length=500)
    reservation_token: str | None = Field(default=None, pattern=RESERVATION_TOKEN_PATTERN)


class ExecutionReportResponse(BaseModel):
    """Answer to an execution report: the record's state and, for a kept record, the end of
    its retention (RFC 3339)."""

    key: str
    state: Literal["completed", "failed", "released"]
    retention_expires_at: str | None = None
    request_id: str


class ApprovalInfo(BaseModel):
    """A pending approval created by a ``user-approval`` decision (DESIGN §5)."""

    approval_id: str
    request_reason: str
    expires_at: str


class _OneConstraint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EqConstraint(_OneConstraint):
    """The input value equals ``eq`` (JSON equality)."""

    eq: Any


class MaxConstraint(_OneConstraint):
    """The input value is a number of at most ``max``."""

    max: float


class MinConstraint(_OneConstraint):
    """The input value is a number of at least ``min``."""

    min: float


class OneOfConstraint(_OneConstraint):
    """The input value is one of ``one_of``."""

    one_of: list[Any] = Field(min_length=1, max_length=50)


#: One constraint of a scoped grant on the input value at a JSON Pointer.
Constraint = EqConstraint | MaxConstraint | MinConstraint | OneOfConstraint
_Pointer = Annotated[str, StringConstraints(pattern=r"^/", max_length=256)]


class GrantScopeBody(BaseModel):
    """How far an approval reaches: ``once`` (default: ``ttl_s`` and ``constraints`` do not
    apply), or this tool within ``constraints`` (JSON Pointer -> constraint) for ``ttl_s``
    seconds (default: the longest the policy allows), in the requester's conversation
    (``conversation``) or in any of her calls (``duration``)."""

    model_config = ConfigDict(extra="forbid")

    kind: GrantScope = "once"
    ttl_s: int | None = Field(default=None, ge=60, le=30 * 86_400)
    constraints: dict[_Pointer, Constraint] = Field(
        default_factory=dict, max_length=20, json_schema_extra={"additionalProperties": False}
    )


class ApprovalAnswerBody(BaseModel):
    """Body of ``POST /v1/approvals/<id>``: the answer, and a reason shown to the requester
    (for a denial, it becomes the deny reason of the next decide call). ``input`` (approvals
    only; a denial ignores it): the input as the approver narrowed it, validated against the
    tool's contract; sensitive members keep their ``[REDACTED]`` placeholder. ``scope``
    (approvals only): how far the grant reaches (the policy's ``grant_scopes`` say what may be
    chosen)."""

    model_config = ConfigDict(extra="forbid")

    approved: StrictBool
    reason: str = Field(default="", max_length=500)
    input: dict[str, Any] | None = None
    scope: GrantScopeBody | None = None


class InputChange(BaseModel):
    """One member the approver changed: JSON Pointer, the requested and the approved value
    (sensitive members are never editable, so never shown here)."""

    path: str
    requested: Any = None
    approved: Any = None
    #: ``replace``, ``add`` or ``remove``.
    op: Literal["replace", "add", "remove"]


class ApprovalEditInfo(BaseModel):
    """In a decide response: the approver narrowed the input; ``changes`` says how. The
    response's ``input`` is the approved one, which is what the tool service executes."""

    approval_id: str
    approved_by: list[str]
    changes: list[InputChange]


class VoteView(BaseModel):
    """One approver's vote towards a quorum."""

    approver: str
    approved: bool
    reason: str
    at: str
    credential: str
    #: What this approval proposes (every approval of one quorum approves the same).
    changes: list[InputChange] = Field(default_factory=list)
    scope: GrantScope | None = None


class ApprovalAnswerView(BaseModel):
    """An approver's answer as shown by the approvals API. Times are RFC 3339 UTC."""

    approved: bool
    reason: str
    approver: str
    answered_at: str
    decision_id: str
    grant_expires_at: str | None = None
    approvers: list[str] = Field(default_factory=list)
    changes: list[InputChange] = Field(default_factory=list)
    scope: GrantScope = "once"
    scoped_grant_id: str | None = None


class ApprovalView(BaseModel):
    """One approval as shown by the approvals API. ``input`` has sensitive paths redacted;
    ``decision_id`` is the decide call that asked for approval; times are RFC 3339 UTC."""

    approval_id: str
    state: Literal["pending", "approved", "denied", "used", "expired"]
    tool: ToolRef
    tool_call_id: str | None
    requester: str
    conversation_id: str | None = None
    input: dict[str, Any]
    input_fingerprint: str
    request_reason: str
    reasons: list[str] = Field(default_factory=list)
    matched_rules: list[MatchedRule] = Field(default_factory=list)
    policy_revision: str | None = None
    approver_roles: list[str]
    quorum: int = 1
    votes: list[VoteView] = Field(default_factory=list)
    allow_self_approval: bool = False
    requester_only: bool = False
    grant_scopes: list[GrantScope] = Field(default_factory=lambda: list[GrantScope](["once"]))
    escalation_roles: list[str] = Field(default_factory=list)
    escalate_at: str | None = None
    escalated: bool = False
    decision_id: str
    created_at: str
    expires_at: str
    answer: ApprovalAnswerView | None = None


class ApprovalResponse(BaseModel):
    """``GET /v1/approvals/<id>`` and ``POST /v1/approvals/<id>``: the approval, and its grant
    when the caller may hold it (the approver who approved it; the requester while it is
    approved and unused)."""

    approval: ApprovalView
    grant: str | None = None
    request_id: str


class ApprovalListResponse(BaseModel):
    """``GET /v1/approvals?state=pending``: the approvals the caller may answer, oldest first;
    ``next_cursor`` (None on the last page) asks for the next page."""

    approvals: list[ApprovalView]
    next_cursor: str | None = None
    request_id: str


class ScopedGrantView(BaseModel):
    """A standing (scoped) grant: this requester may use this tool within ``constraints``
    (in ``conversation_id`` when set) until ``expires_at``, unless revoked."""

    grant_id: str
    approval_id: str
    scope: GrantScope
    requester: str
    tool: ToolRef
    conversation_id: str | None
    constraints: dict[str, Any]
    reasons: list[str]
    approvers: list[str]
    created_at: str
    expires_at: str
    uses: int
    revoked: bool


class ScopedGrantListResponse(BaseModel):
    """``GET /v1/grants``: the tenant's standing grants, soonest expiry first."""

    grants: list[ScopedGrantView]
    request_id: str


class ScopedGrantResponse(BaseModel):
    """``DELETE /v1/grants/<grant_id>``: the revoked grant."""

    grant: ScopedGrantView
    request_id: str


class DecideResponse(BaseModel):
    """Body of a ``200`` decide response. Deny is a decision, not an error."""

    decision: DecisionWord
    reasons: list[str]
    decision_id: str
    request_id: str
    policy_revision: str
    tool: ToolRef
    input: dict[str, Any]
    matched_rules: list[MatchedRule] = Field(
        default_factory=list, description="The rules that matched, by effect then id (empty when the policy names none)."
    )
    approval: ApprovalInfo | None = None
    approval_edit: ApprovalEditInfo | None = None
    idempotency: IdempotencyInfo | None = None
    dry_run: bool | None = None
    ai_sdk_status: AiSdkStatus | None = None
    receipt: str | None = Field(
        default=None,
        description="The signed receipt of this decision (a compact JWS, EdDSA; docs/design.md §11), when the gateway "
        "has a receipt key; never on a dry run. Verify it with the keys of /.well-known/toolgate-keys.",
    )


class ToolDescription(BaseModel):
    """One registered tool contract as ``GET /v1/tools`` lists it; ``input_schema`` can be
    handed to a model as the tool definition."""

    name: str
    version: str
    namespace: str
    description: str
    mutating: bool
    risk: Literal["low", "medium", "high"]
    retry_safe: bool
    sensitive_paths: list[str]
    idempotency_key_field: str | None
    lease_s: int | None
    amount_fields: list[str] = []
    counterparty_fields: list[str] = []
    resource_fields: list[str] = []
    output_labels: list[str] = []
    output_counterparty_fields: list[str] = []
    #: Provenance marks (docs/session.md "Provenance"): ``{pointer, labels, kind, extract}``.
    output_fields: list[dict[str, Any]] = []
    #: Provenance marks of the input: ``{pointer, kind, extract}``.
    input_fields: list[dict[str, Any]] = []
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None


class ToolListResponse(BaseModel):
    """``GET /v1/tools``: every registered contract."""

    tools: list[ToolDescription]
    request_id: str


class CapabilitiesResponse(BaseModel):
    """``GET /v1/capabilities``: the contracts the caller may use (the policy's capability
    document allows them for the caller's roles and tenant, whatever the input)."""

    tools: list[ToolDescription]
    request_id: str


class DecisionRecord(BaseModel):
    """A decision log record (DESIGN §6); ``hash`` = SHA-256 of the RFC 8785 JSON of every other
    field, ``prev_hash`` the previous record's hash in the tenant chain."""

    decision_id: str = Field(pattern=DECISION_ID_PATTERN, description="ULID")
    event: EventType
    time: str = Field(description="RFC 3339, UTC, microseconds")
    request_id: str
    trace_id: str | None
    tenant: str
    subject_id: str | None
    roles: list[str]
    conversation_id: str | None
    tool: str | None
    version: str | None
    decision: DecisionWord | None
    ai_sdk_status: AiSdkStatus | None
    reasons: list[str]
    matched_rules: list[MatchedRule] = Field(default_factory=list, description="the rules that matched")
    policy_revision: str | None
    engine: str | None
    engine_decision_id: str | None
    input_fingerprint: str | None
    input: dict[str, Any] | None = Field(description="sensitive paths redacted")
    redacted_paths: list[str]
    idempotency_key_hash: str | None
    replayed: bool
    approval_id: str | None
    approver_id: str | None
    error_code: str | None
    durations_ms: dict[str, float]
    for_decision_id: str | None = Field(
        default=None,
        description="execution reports: the decide call (and its receipt) whose reservation the report settles",
    )
    policy_input: dict[str, Any] | None = Field(
        default=None,
        description="decide calls: the policy input the policy saw, without call.input (the record's input) and "
        "with the context members not kept redacted; null when the policy was not asked",
    )
    policy_input_redacted: list[str] = Field(
        default_factory=list, description="JSON Pointers into the policy input whose values the record does not keep"
    )
    policy_decision: DecisionWord | None = Field(
        default=None, description="decide calls: the policy's own decision, before the approval step"
    )
    shadow: RecordedShadow | None = Field(
        default=None, description="decide calls: what the shadow policy decided beside the active one (never acted upon)"
    )
    seq: int = Field(ge=1)
    prev_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class DecisionListResponse(BaseModel):
    """``GET /v1/decisions``: a page of records, newest first; ``next_cursor`` None on the last page."""

    records: list[DecisionRecord]
    next_cursor: str | None
    request_id: str


class DecisionRecordResponse(BaseModel):
    """``GET /v1/decisions/<decision_id>``: one record."""

    record: DecisionRecord
    request_id: str


class PublicJwk(BaseModel):
    """An Ed25519 public key as a JWK (RFC 8037); ``kid`` is its RFC 7638 thumbprint."""

    kty: Literal["OKP"]
    crv: Literal["Ed25519"]
    x: str = Field(description="the public key, base64url")
    kid: str
    alg: Literal["EdDSA"]
    use: Literal["sig"]


class PublishedKeys(BaseModel):
    """``GET /.well-known/toolgate-keys``: a JWK Set of the receipt keys (``keys``, what any JOSE
    library reads) and the decision-log checkpoint keys (``checkpoint_keys``). The first key
    of each list signs; the others verify what they signed before a rotation."""

    keys: list[PublicJwk]
    checkpoint_keys: list[PublicJwk]
