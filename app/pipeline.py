"""The decide pipeline (DESIGN §2): the ordered steps of ``POST /v1/decide``, each a small function.

    decision id -> authenticate -> parse -> validate (contract) -> idempotency -> grant check
    -> policy -> approval (use the grant | open a pending approval) -> reserve -> record

No Flask here: the web layer hands over the request facts (``DecideCall``) and renders what
comes back. Every step may end the call with a ``ToolgateError``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ulid import ULID

from app import metrics
from app.approvals import GRANT_INVALID, UNBINDABLE_INPUT, ApprovalRejected, ApprovalService, CallFacts, VerifiedApproval
from app.audit import AuditEvent, DecisionLog, DecisionLogReader, hash_idempotency_key, is_storable
from app.auth import TokenVerifier
from app.contracts import ContractRegistry, ToolContract, redact
from app.bodies import parse_body
from app.engine import PolicyEngine
from app.errors import DependencyUnavailable, InternalError, ToolgateError, ValidationFailed
from app.fingerprint import fingerprint
from app.idempotency import IdempotencyStore, PendingCall, prepare as prepare_idempotency
from app.models import DecideRequest, PolicyDecision, Subject
from app.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Deps:
    """Everything the pipeline talks to, built once per worker by ``create_app``."""

    settings: Settings
    verifier: TokenVerifier
    contracts: ContractRegistry
    engine: PolicyEngine
    idempotency: IdempotencyStore
    approvals: ApprovalService
    #: Writer and reader of the decision log (one store implementing both, DESIGN §6).
    decision_log: DecisionLog
    decision_reader: DecisionLogReader

    def readiness_checks(self) -> dict[str, Callable[[], None]]:
        """Named probes for ``/readyz``; each raises ``ToolgateError`` when not ready."""
        return {"policy_engine": self.engine.probe, "decision_log": self.decision_log.probe}


@dataclass
class DecideCall:
    """The HTTP facts of one decide request (framework-free)."""

    request_id: str
    authorization: list[str]
    body: bytes
    idempotency_key: str | None = None
    traceparent: str | None = None


@dataclass
class Phases:
    """Per-phase durations in ms, recorded in logs, metrics and (later) the decision log."""

    ms: dict[str, float] = field(default_factory=dict)
    #: (phase, start, end) in epoch ns, for trace spans (app/tracing.py).
    spans: list[tuple[str, int, int]] = field(default_factory=list)

    @contextmanager
    def measure(self, phase: str) -> Iterator[None]:
        start_ns = time.time_ns()
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.ms[phase] = round(elapsed * 1000, 3)
            self.spans.append((phase, start_ns, start_ns + int(elapsed * 1e9)))
            metrics.PHASE_SECONDS.labels(phase).observe(elapsed)


@dataclass
class DecideContext:
    """State carried through the steps of one call; the web layer logs it."""

    call: DecideCall
    decision_id: str = field(default_factory=lambda: str(ULID()))
    phases: Phases = field(default_factory=Phases)
    subject: Subject | None = None
    request: DecideRequest | None = None
    contract: ToolContract | None = None
    #: JSON Pointers redacted wherever the input is shown or stored (the contract's; for a
    #: version without a contract, those of every version of the tool name).
    sensitive_paths: tuple[str, ...] = ()
    normalized_input: dict[str, Any] | None = None
    decision: PolicyDecision | None = None
    #: True once the call's decision record is written.
    recorded: bool = False
    idempotency: PendingCall | None = None
    #: The approval presented on this call (verified or not), or the one it created.
    approval_id: str | None = None
    #: The approver of a verified grant presented on this call.
    approver_id: str | None = None


@dataclass(frozen=True)
class ToolFacts:
    """What the policy is told about the tool (``input.tool``)."""

    name: str
    version: str
    registered: bool
    mutating: bool
    risk: str

    def as_input(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "registered": self.registered,
            "mutating": self.mutating,
            "risk": self.risk,
        }


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, stopping once ``limit`` is exceeded (iterative)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def parse(ctx: DecideContext, settings: Settings) -> DecideRequest:
    """Step 3: body -> ``DecideRequest``. 400 malformed, 422 envelope schema, 422 too deep."""
    request = parse_body(DecideRequest, ctx.call.body, "request does not match the decide schema")
    if _depth(request.input, settings.max_input_depth) > settings.max_input_depth:
        raise ValidationFailed(
            f"input is nested deeper than {settings.max_input_depth} levels",
            http_status=422,
            details={"problems": [{"path": "/input", "message": "too deeply nested"}]},
        )
    return request


def validate(ctx: DecideContext, deps: Deps) -> tuple[dict[str, Any], ToolFacts]:
    """Step 4: validate ``input`` against the tool contract, or size-check a dynamic tool.

    Returns the normalized input and the tool facts for the policy. Raises ``ValidationFailed``
    (422) with ``details.problems``.
    """
    request = ctx.request
    assert request is not None
    contract = deps.contracts.get(request.tool, request.version)
    ctx.contract = contract
    ctx.sensitive_paths = contract.meta.sensitive_paths if contract else deps.contracts.sensitive_paths(request.tool)
    if contract is None:
        size = len(json.dumps(request.input, separators=(",", ":"), ensure_ascii=False).encode())
        if size > deps.settings.dynamic_tool_max_input_bytes:
            raise ValidationFailed(
                "input of an unregistered tool is too large",
                http_status=422,
                details={"problems": [{"path": "/input", "message": f"larger than {deps.settings.dynamic_tool_max_input_bytes} bytes"}]},
            )
        # An unregistered tool is assumed to change things and to be risky.
        return request.input, ToolFacts(request.tool, request.version, False, True, "high")
    normalized = contract.validate_input(request.input)
    meta = contract.meta
    return normalized, ToolFacts(meta.name, meta.version, True, meta.mutating, meta.risk)


def build_policy_input(
    ctx: DecideContext,
    tool: ToolFacts,
    *,
    history: dict[str, Any] | None = None,
    approval: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The policy input document (DESIGN §3). Identity comes from the verified subject only."""
    assert ctx.subject is not None and ctx.request is not None
    return {
        "subject": {"id": ctx.subject.id, "tenant": ctx.subject.tenant, "roles": list(ctx.subject.roles)},
        "tool": tool.as_input(),
        "call": {"id": ctx.request.tool_call_id, "input": ctx.normalized_input},
        "context": ctx.request.context,
        "history": history or {},
        "approval": approval,
        "request": {"id": ctx.call.request_id, "time": _rfc3339_now()},
    }


def trusted_history(ctx: DecideContext, deps: Deps) -> dict[str, Any]:
    """``input.history`` (DESIGN §3): what the decision log says this verified subject did in
    the caller's conversation (``context.conversation_id``) over the last 24 h — allowed,
    non-replayed calls counted per tool. Without a conversation id the policy gets ``{}``:
    per-conversation rules then see no history, never a caller-supplied one. Raises
    ``DependencyUnavailable`` (503) when the decision log cannot be read."""
    conversation_id = _conversation_id(ctx)
    if conversation_id is None:
        return {}
    assert ctx.subject is not None
    return deps.decision_reader.subject_history(
        ctx.subject.tenant, ctx.subject.id, conversation_id=conversation_id
    ).as_input()


def _rfc3339_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_idempotency(ctx: DecideContext, deps: Deps, tool: ToolFacts) -> PendingCall | None:
    """Step 5 (DESIGN §4), before the policy: the call's idempotency key and its record.

    None when the call has no key (Redis untouched). Raises ``ValidationFailed`` (400: key
    missing for a mutating tool, or malformed), ``Conflict`` (409 in progress or outcome
    unknown, 422 key used with another request), ``DependencyUnavailable`` (503: Redis).
    """
    assert ctx.subject is not None and ctx.normalized_input is not None
    return prepare_idempotency(
        deps.idempotency,
        header_key=ctx.call.idempotency_key,
        subject=ctx.subject,
        tool=tool.name,
        version=tool.version,
        contract=ctx.contract,
        normalized_input=ctx.normalized_input,
    )


def settle_idempotency(ctx: DecideContext, deps: Deps) -> dict[str, Any] | None:
    """After the policy: on ``allow`` for a call with a key, claim the key or replay its
    settled record; returns the response's ``idempotency`` member (None otherwise, so a deny
    never shows a stored result). Raises ``Conflict`` when another call claimed the key
    meanwhile, ``DependencyUnavailable`` (503: Redis)."""
    assert ctx.decision is not None
    if ctx.idempotency is None or ctx.decision.decision != "allow":
        return None
    return deps.idempotency.settle(ctx.idempotency)


def approval_call(ctx: DecideContext, tool: ToolFacts, *, refusal: str) -> CallFacts:
    """The facts of this call that approvals and grants are bound to (DESIGN §5): verified
    tenant and subject, tool, version, tool_call_id and the input fingerprint.

    Raises ``ApprovalRejected`` with the reason ``refusal`` when the input has no RFC 8785 form
    (an integer beyond 2**53, a lone surrogate): such an input can never be bound to a grant.
    """
    assert ctx.subject is not None and ctx.request is not None and ctx.normalized_input is not None
    subject = ctx.subject
    try:
        input_fingerprint = fingerprint(subject.tenant, subject.id, tool.name, tool.version, ctx.normalized_input)
    except ValidationFailed:
        raise ApprovalRejected(refusal, "invalid", "the input has no RFC 8785 canonical form") from None
    return CallFacts(
        tenant=subject.tenant,
        subject=subject.id,
        tool=tool.name,
        version=tool.version,
        tool_call_id=ctx.request.tool_call_id,
        input_fingerprint=input_fingerprint,
    )


def check_approval(ctx: DecideContext, deps: Deps, tool: ToolFacts) -> VerifiedApproval | None:
    """Before the policy: verify the approval presented on this call, if any (DESIGN §5).

    Returns the verified grant (its ``policy_input()`` becomes ``input.approval``), or None when
    nothing was presented. A refused approval sets ``ctx.decision`` to a deny with a stable
    reason ("approval grant invalid", "... expired", "... already used", "... missing", or the
    approver's reason of a denial), logged with the detail; the policy is then not asked.
    A grant already used by this call's idempotency key passes again, so a retry of that
    attempt gets the idempotency answer (409 in flight, or the replay) instead of a deny.
    Raises ``DependencyUnavailable`` (503) when Redis fails: fail closed.
    """
    assert ctx.request is not None
    presented = ctx.request.approval
    if presented is None:
        return None
    ctx.approval_id = presented.approval_id
    try:
        facts = approval_call(ctx, tool, refusal=GRANT_INVALID)
        attempt = ctx.idempotency.scope.key if ctx.idempotency else None
        verified = deps.approvals.verify_presented(presented, facts, idempotency_key=attempt)
    except ApprovalRejected as rejected:
        _refuse_approval(ctx, rejected)
        return None
    ctx.approver_id = verified.claims.approver
    return verified


def _refuse_approval(ctx: DecideContext, rejected: ApprovalRejected) -> None:
    metrics.GRANTS_REJECTED.labels(rejected.kind).inc()
    log.warning(
        "approval refused: %s",
        rejected.detail,
        extra={"event": "approval_refused", "decision_id": ctx.decision_id, "approval_id": ctx.approval_id,
               "kind": rejected.kind, "detail": rejected.detail},
    )
    ctx.decision = PolicyDecision(decision="deny", reasons=(rejected.reason,))


def settle_approval(
    ctx: DecideContext, deps: Deps, tool: ToolFacts, verified: VerifiedApproval | None
) -> dict[str, Any] | None:
    """After the policy: on ``allow`` use up the verified grant (atomic, one time; a lost race
    turns the decision into a deny "approval grant already used"); on ``user-approval`` create the
    pending approval, or find the one pending for this same call, and return the response's
    ``approval`` member ``{approval_id, request_reason, expires_at}``. Raises
    ``DependencyUnavailable`` (503: Redis, fail closed)."""
    decision = ctx.decision
    assert decision is not None
    if decision.decision == "allow" and verified is not None:
        try:
            deps.approvals.consume(verified)
        except ApprovalRejected as rejected:
            _refuse_approval(ctx, rejected)
        return None
    if decision.decision != "user-approval":
        return None
    assert ctx.normalized_input is not None
    display = redact(ctx.normalized_input, ctx.sensitive_paths)[0]
    try:
        facts = approval_call(ctx, tool, refusal=UNBINDABLE_INPUT)
    except ApprovalRejected as rejected:
        _refuse_approval(ctx, rejected)
        return None
    approval = deps.approvals.request(facts, decision, display_input=display, decision_id=ctx.decision_id)
    ctx.approval_id = approval.request.approval_id
    metrics.APPROVALS_CREATED.inc()
    return approval.view(deps.approvals.now_ms()).model_dump(include={"approval_id", "request_reason", "expires_at"})


def ai_sdk_status(ctx: DecideContext, verified: VerifiedApproval | None) -> str:
    """The AI SDK tool-approval status of the final decision: ``approved`` for an allow after a
    verified grant, ``not-applicable`` for any other allow, else ``denied`` / ``user-approval``."""
    assert ctx.decision is not None
    word = ctx.decision.decision
    if word == "allow":
        return "approved" if verified is not None else "not-applicable"
    return "denied" if word == "deny" else "user-approval"


def _recorded_input(ctx: DecideContext, fingerprinted: bool) -> tuple[dict[str, Any] | None, list[str]]:
    """The input as the decision record keeps it, and the JSON Pointers redacted: the normalized
    input with the contract's sensitive paths redacted; for input that failed validation, the
    raw input redacted the same way, or nothing when the contract has sensitive paths (in
    invalid input their values may sit anywhere). ``fingerprinted``: the normalized input was
    canonicalized already, so it (and its redaction) can be stored."""
    if ctx.normalized_input is not None:
        data = ctx.normalized_input
    elif ctx.request is not None and not ctx.sensitive_paths:
        data = ctx.request.input
    else:
        return None, []
    redacted, paths = redact(data, ctx.sensitive_paths)
    storable = (fingerprinted and data is ctx.normalized_input) or is_storable(redacted)
    return (redacted, paths) if storable else (None, paths)


def _input_fingerprint(ctx: DecideContext) -> str | None:
    """The fingerprint of the normalized input, or None without one or when it cannot be
    canonicalized (RFC 8785)."""
    if ctx.idempotency is not None:
        return ctx.idempotency.fingerprint
    subject, request, data = ctx.subject, ctx.request, ctx.normalized_input
    if subject is None or request is None or data is None:
        return None
    try:
        return fingerprint(subject.tenant, subject.id, request.tool, request.version, data)
    except ValidationFailed:
        return None


def _conversation_id(ctx: DecideContext) -> str | None:
    """``context.conversation_id`` when it is 1-128 printable ASCII characters (untrusted)."""
    value = ctx.request.context.get("conversation_id") if ctx.request else None
    ok = isinstance(value, str) and 0 < len(value) <= 128 and value.isascii() and value.isprintable()
    return value if ok else None


def decision_event(
    ctx: DecideContext, deps: Deps, body: dict[str, Any] | None, error: ToolgateError | None
) -> AuditEvent:
    """The ``decide`` record of an authenticated call (DESIGN §6), from what the steps learnt.

    ``body`` is the response (None on error); ``error`` the error returned. Neither means an
    unexpected failure, recorded as ``INTERNAL_ERROR``. ``durations_ms`` holds the phases up
    to the record (the record's own write time is in the request log only).
    """
    call, request, subject = ctx.call, ctx.request, ctx.subject
    assert subject is not None
    response = body or {}
    input_fingerprint = _input_fingerprint(ctx)
    recorded_input, redacted_paths = _recorded_input(ctx, fingerprinted=input_fingerprint is not None)
    key = ctx.idempotency.scope.key if ctx.idempotency else call.idempotency_key
    secret = deps.settings.audit_key_hash_secret.get_secret_value()
    return AuditEvent(
        decision_id=ctx.decision_id,
        event="decide_dry_run" if ctx.request is not None and ctx.request.dry_run else "decide",
        request_id=call.request_id,
        trace_id=call.traceparent.split("-")[1] if call.traceparent else None,
        tenant=subject.tenant,
        subject_id=subject.id,
        roles=subject.roles,
        conversation_id=_conversation_id(ctx),
        tool=request.tool if request else None,
        version=request.version if request else None,
        decision=response.get("decision"),
        ai_sdk_status=response.get("ai_sdk_status"),
        reasons=response.get("reasons", ()),
        policy_revision=response.get("policy_revision"),
        engine=deps.settings.engine,
        engine_decision_id=ctx.decision.engine_decision_id if ctx.decision else None,
        input_fingerprint=input_fingerprint,
        input=recorded_input,
        redacted_paths=redacted_paths,
        idempotency_key_hash=hash_idempotency_key(secret, key) if key else None,
        replayed=(response.get("idempotency") or {}).get("state") == "replayed",
        approval_id=ctx.approval_id,
        approver_id=ctx.approver_id,
        error_code=error.code if error else (None if body is not None else InternalError.code),
        durations_ms=dict(ctx.phases.ms),
    )


def record_decision(
    ctx: DecideContext, deps: Deps, body: dict[str, Any] | None, error: ToolgateError | None
) -> None:
    """Step 7: append the call's decision record before anything is returned (DESIGN §2, §6).

    Raises ``DependencyUnavailable`` (503) when the record cannot be written, whatever the
    call's outcome was: no decision and no error leaves without its record. An idempotency key
    this call reserved is then released, so that the caller's retry is not blocked by a call
    that never got its allow.
    """
    with ctx.phases.measure("log"):
        event = decision_event(ctx, deps, body, error)
        try:
            deps.decision_log.append(event)
            ctx.recorded = True
        except DependencyUnavailable:
            metrics.DECISION_LOG_FAILURES.inc()
            _release_unrecorded(ctx, deps, body)
            raise


def _release_unrecorded(ctx: DecideContext, deps: Deps, body: dict[str, Any] | None) -> None:
    reserved = (body or {}).get("idempotency") or {}
    if reserved.get("state") != "reserved" or ctx.idempotency is None or ctx.subject is None:
        return
    try:
        deps.idempotency.fail(
            ctx.idempotency.scope, ctx.subject.id, retryable=True, reason="decision not recorded",
            token=reserved.get("reservation_token"),
        )
    except ToolgateError as exc:  # the call fails with 503 anyway; the lease will expire
        log.warning(
            "could not release the key of an unrecorded decision",
            extra={"event": "unrecorded_release_failed", "decision_id": ctx.decision_id, "code": exc.code},
        )


def decide(deps: Deps, call: DecideCall, ctx: DecideContext | None = None) -> dict[str, Any]:
    """Run the decide pipeline; returns the ``200`` response body (``DecideResponse`` shape).

    Raises ``ToolgateError`` subclasses: ``Unauthenticated`` (401), ``ValidationFailed``
    (400/413/422), ``Conflict`` (409/422, idempotency), ``DependencyUnavailable`` (503: engine
    or Redis down, timeout, evaluation error; or the decision log cannot record the call).
    Every call that passed authentication is recorded in the decision log, errors included.
    ``ctx`` may be passed in so the caller can log what was learnt even when a step fails.
    """
    ctx = ctx or DecideContext(call)
    with ctx.phases.measure("auth"):
        ctx.subject = deps.verifier.verify(call.authorization)
    body: dict[str, Any] | None = None
    error: ToolgateError | None = None
    try:
        body = _decide_authenticated(deps, ctx)
    except ToolgateError as exc:
        error = exc
        raise
    finally:  # every outcome after authentication is recorded, unexpected failures included
        record_decision(ctx, deps, body, error)
    return body


def _decide_authenticated(deps: Deps, ctx: DecideContext) -> dict[str, Any]:
    """Steps 3-6 for an authenticated caller; returns the response body (see ``decide``)."""
    call = ctx.call
    with ctx.phases.measure("validate"):
        ctx.request = parse(ctx, deps.settings)
        ctx.normalized_input, tool = validate(ctx, deps)
    dry_run = ctx.request.dry_run
    if not dry_run:
        with ctx.phases.measure("idempotency"):
            ctx.idempotency = check_idempotency(ctx, deps, tool)
    approval = None
    with ctx.phases.measure("grant"):
        verified = check_approval(ctx, deps, tool)
    if ctx.decision is None:  # None unless a presented approval was refused
        with ctx.phases.measure("policy"):
            approval_input = verified.policy_input() if verified else None
            policy_input = build_policy_input(ctx, tool, history=trusted_history(ctx, deps), approval=approval_input)
            ctx.decision = deps.engine.evaluate(policy_input, traceparent=call.traceparent)
        if not dry_run:
            with ctx.phases.measure("approval"):
                approval = settle_approval(ctx, deps, tool, verified)
    with ctx.phases.measure("reserve"):
        idempotency = settle_idempotency(ctx, deps)
    decision = ctx.decision
    # Unregistered tools: name and version are caller input, so one fixed label value for both.
    label = (tool.name, tool.version) if tool.registered else ("_dynamic", "_dynamic")
    metrics.DECISIONS.labels(*label, decision.decision).inc()
    body: dict[str, Any] = {
        "decision": decision.decision,
        "reasons": list(decision.reasons),
        "decision_id": ctx.decision_id,
        "request_id": call.request_id,
        "policy_revision": decision.policy_revision or deps.engine.revision(),
        "tool": {"name": tool.name, "version": tool.version},
        "input": redact(ctx.normalized_input, ctx.sensitive_paths)[0],
    }
    if approval is not None:
        body["approval"] = approval
    if idempotency is not None:
        body["idempotency"] = idempotency
    if dry_run:
        body["dry_run"] = True
    body["ai_sdk_status"] = ai_sdk_status(ctx, verified)
    return body
