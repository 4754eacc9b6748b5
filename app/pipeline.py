"""The decide pipeline (DESIGN §2): the ordered steps of ``POST /v1/decide``, each a small function.

    decision id -> authenticate -> parse -> validate (contract) -> idempotency -> policy -> record

No Flask here: the web layer hands over the request facts (``DecideCall``) and renders what
comes back. Every step may end the call with a ``ToolgateError``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from pydantic import ValidationError
from ulid import ULID

from app import metrics
from app.auth import TokenVerifier
from app.contracts import ContractRegistry, ToolContract
from app.engine import PolicyEngine
from app.errors import ValidationFailed
from app.models import DecideRequest, PolicyDecision, Subject
from app.settings import Settings


@dataclass
class Deps:
    """Everything the pipeline talks to, built once per worker by ``create_app``."""

    settings: Settings
    verifier: TokenVerifier
    contracts: ContractRegistry
    engine: PolicyEngine

    def readiness_checks(self) -> dict[str, Callable[[], None]]:
        """Named probes for ``/readyz``; each raises ``ToolgateError`` when not ready."""
        return {"policy_engine": self.engine.probe}


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

    @contextmanager
    def measure(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.ms[phase] = round(elapsed * 1000, 3)
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
    normalized_input: dict[str, Any] | None = None
    decision: PolicyDecision | None = None


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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate object key")
    return obj


def parse_json_object(body: bytes) -> dict[str, Any]:
    """Parse a request body as one JSON object (RFC 8259): UTF-8, no NaN/Infinity, no duplicate
    keys, finite numbers. Raises ``ValidationFailed`` (400) with a safe message."""
    try:
        data = json.loads(
            body.decode("utf-8"),
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_no_duplicate_keys,
        )
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValidationFailed("request body is not valid JSON", http_status=400) from None
    if not isinstance(data, dict):
        raise ValidationFailed("request body must be a JSON object", http_status=400)
    return data


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
    data = parse_json_object(ctx.call.body)
    try:
        request = DecideRequest.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"path": "/" + "/".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in exc.errors(include_input=False, include_url=False)
        ]
        raise ValidationFailed(
            "request does not match the decide schema", http_status=422, details={"problems": problems[:50]}
        ) from None
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


def _rfc3339_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def decide(deps: Deps, call: DecideCall, ctx: DecideContext | None = None) -> dict[str, Any]:
    """Run the decide pipeline; returns the ``200`` response body (``DecideResponse`` shape).

    Raises ``ToolgateError`` subclasses: ``Unauthenticated`` (401), ``ValidationFailed``
    (400/413/422), ``DependencyUnavailable`` (503: engine down, timeout, evaluation error).
    ``ctx`` may be passed in so the caller can log what was learnt even when a step fails.
    """
    ctx = ctx or DecideContext(call)
    with ctx.phases.measure("auth"):
        ctx.subject = deps.verifier.verify(call.authorization)
    with ctx.phases.measure("validate"):
        ctx.request = parse(ctx, deps.settings)
        ctx.normalized_input, tool = validate(ctx, deps)
    with ctx.phases.measure("policy"):
        policy_input = build_policy_input(ctx, tool)
        ctx.decision = deps.engine.evaluate(policy_input, traceparent=call.traceparent)
    decision = ctx.decision
    metrics.DECISIONS.labels(tool.name if tool.registered else "_dynamic", tool.version, decision.decision).inc()
    body: dict[str, Any] = {
        "decision": decision.decision,
        "reasons": list(decision.reasons),
        "decision_id": ctx.decision_id,
        "request_id": call.request_id,
        "policy_revision": deps.engine.revision(),
        "tool": {"name": tool.name, "version": tool.version},
        "input": ctx.contract.redact(ctx.normalized_input)[0] if ctx.contract else ctx.normalized_input,
    }
    return body
