"""The frozen values one decide call passes through, each the previous one plus what its step
learnt::

    Received(call) -> Authenticated(+subject) -> Parsed(+request, contract, sensitive paths)
    -> Validated(+tool facts, normalized input, fingerprint)
    -> Prepared(+idempotency reservation, presented approval)
    -> Decided(+decision, response, the policy's evaluation and its shadow)

Each step takes the stage it needs and returns the next; nothing is filled in later.
``Progress`` keeps the furthest stage a call reached, so that its decision record (and the
request log) can say what was learnt even when a later step fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, TypeVar

from app.approvals.presented import Granted
from app.audit.records import new_decision_id
from app.contracts.contract import ToolContract
from app.contracts.redaction import redact
from app.idempotency.store import PendingCall
from app.models import (
    ApprovalInfo,
    DecideRequest,
    DecideResponse,
    IdempotencyInfo,
    PolicyDecision,
    ShadowOutcome,
    Subject,
)
from app.session.store import Share
from app.vocabulary import qualified_tool

S = TypeVar("S", bound="Received")


@dataclass(frozen=True)
class ToolAnnotations:
    """MCP tool annotations with the defaults of the MCP specification for absent hints (a tool
    that says nothing is not read-only, destructive, not idempotent and open-world)."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    def as_input(self) -> dict[str, bool]:
        """``input.tool.annotations``: the hints under their MCP names."""
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


@dataclass(frozen=True)
class ToolDefinition:
    """What the server that runs a tool says about it (an MCP upstream's ``tools/list`` entry):
    the JSON Schema of its arguments and its behaviour hints, and the name of the upstream
    (``input.tool.upstream``). Hints are untrusted: the policy sees them
    (``input.tool.annotations``), nothing else relies on them."""

    input_schema: dict[str, Any]
    annotations: ToolAnnotations
    upstream: str | None = None


@dataclass(frozen=True)
class DecideCall:
    """The HTTP facts of one decide request (framework-free). The decision id is made first
    and carried everywhere: logs, the response, the decision record. ``tool_definition``: the
    upstream's definition of the tool when the call comes through the MCP gateway (a tool
    without a contract is then validated against its ``input_schema``)."""

    request_id: str
    authorization: tuple[str, ...]
    body: bytes
    idempotency_key: str | None = None
    #: A valid version-00 W3C ``traceparent``, or None.
    traceparent: str | None = None
    decision_id: str = field(default_factory=new_decision_id)
    tool_definition: ToolDefinition | None = None
    #: The subject a PEP's credential asserts (AuthZEN): the call is decided for that subject of
    #: the caller's tenant, provided the caller holds ``authzen_pep_role``.
    asserted_subject: str | None = None
    #: A dry run whose answer the caller enforces without a later decide (an AuthZEN
    #: evaluation): it spends its rate-limit slots and, allowed, its limit shares.
    enforced: bool = False

    @property
    def trace_id(self) -> str | None:
        """The W3C trace id of ``traceparent``."""
        return self.traceparent.split("-")[1] if self.traceparent else None


@dataclass(frozen=True)
class ToolFacts:
    """What the policy is told about the tool (``input.tool``); ``annotations`` and
    ``upstream`` (the upstream's configured name) only for a tool an MCP upstream defined."""

    name: str
    version: str
    registered: bool
    mutating: bool
    risk: str
    annotations: ToolAnnotations | None = None
    namespace: str = ""
    #: The contract's ``output_labels``: what a result of this tool brings into the session.
    output_labels: tuple[str, ...] = ()
    upstream: str | None = None

    @property
    def qualified(self) -> str:
        """The tool's identity across namespaces (``app.vocabulary.qualified_tool``): what
        fingerprints, grants, idempotency records, decision records and metrics name."""
        return qualified_tool(self.namespace, self.name)

    def as_input(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "namespace": self.namespace,
            "registered": self.registered,
            "mutating": self.mutating,
            "risk": self.risk,
            "output_labels": list(self.output_labels),
        }
        if self.annotations is not None:
            facts["annotations"] = self.annotations.as_input()
        if self.upstream is not None:
            facts["upstream"] = self.upstream
        return facts


@dataclass(frozen=True)
class Refusal:
    """A presented approval that was refused: the stable public ``reason`` (the deny reason)
    and the metric label ``kind`` (invalid, expired, used, missing, denied)."""

    approval_id: str
    reason: str
    kind: str


Presented = Granted | Refusal | None


@dataclass(frozen=True)
class Received:
    call: DecideCall


@dataclass(frozen=True)
class Authenticated(Received):
    subject: Subject


@dataclass(frozen=True)
class Parsed(Authenticated):
    """The envelope parsed; ``contract`` None for a dynamic tool. ``sensitive_paths`` are the
    JSON Pointers redacted wherever the input is shown or stored (the contract's; for a version
    without a contract, those of every version of the tool name)."""

    request: DecideRequest
    contract: ToolContract | None
    sensitive_paths: tuple[str, ...]


@dataclass(frozen=True)
class Validated(Parsed):
    """The input validated against the contract. ``fingerprint``: ``app.fingerprint`` of the
    normalized input, computed once; None when the input has no RFC 8785 form."""

    tool: ToolFacts
    normalized_input: dict[str, Any]
    fingerprint: str | None

    @cached_property
    def display_input(self) -> dict[str, Any]:
        """The normalized input with the sensitive paths redacted."""
        return redact(self.normalized_input, self.sensitive_paths)[0]


@dataclass(frozen=True)
class Prepared(Validated):
    """Checked before the policy: the idempotency record of the call's key (None: no key, or a
    dry run) and the approval it presented."""

    reservation: PendingCall | None
    presented: Presented


@dataclass(frozen=True)
class Evaluation:
    """What the policy was asked and answered: the input ``document``, the policy's own
    ``decision`` (before the approval step) and the ``shadow`` outcome beside it (None: no
    shadow policy for this call)."""

    document: dict[str, Any]
    decision: PolicyDecision
    shadow: ShadowOutcome | None


@dataclass(frozen=True)
class Decided(Prepared):
    """The final decision and the response that carries it; ``noted``: the call's event is in
    the session (not for a dry run), holding ``shares`` of its limits; ``evaluation`` None when
    the policy was not asked (a refused presented approval)."""

    decision: PolicyDecision
    approval: ApprovalInfo | None
    idempotency: IdempotencyInfo | None
    response: DecideResponse
    noted: bool = False
    shares: tuple[Share, ...] = ()
    evaluation: Evaluation | None = None


def advance(stage: Received, cls: type[S], **learnt: Any) -> S:
    """The next stage: every field of ``stage`` plus ``learnt``."""
    return cls(**{f.name: getattr(stage, f.name) for f in fields(stage)}, **learnt)


def conversation_id(request: DecideRequest) -> str | None:
    """``context.conversation_id`` when it is 1-128 printable ASCII characters (untrusted)."""
    value = request.context.get("conversation_id")
    ok = isinstance(value, str) and 0 < len(value) <= 128 and value.isascii() and value.isprintable()
    return value if ok else None


class Progress:
    """The furthest stage one decide call reached, and whether its decision record was written."""

    def __init__(self, call: DecideCall) -> None:
        self.stage: Received = Received(call)
        self.recorded = False

    def reach(self, stage: S) -> S:
        """Remember ``stage`` as the furthest reached and return it."""
        self.stage = stage
        return stage

    def mark_recorded(self) -> None:
        """The call's decision record is committed."""
        self.recorded = True
