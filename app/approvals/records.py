"""What an approval is (DESIGN §5): the request written once at creation, the approvers' votes
and the final answer, the call all of them are bound to, and the standing (scoped) grants an
answer may leave. Times are Unix epoch milliseconds.

Life of one approval (``Approval.state``)::

    pending --vote(approved) x quorum--> approved --consume--> used
       |    \\--vote(denied)----------> denied        (one denial decides)
       \\-- expires_at passes: ``expired`` (stored by the sweeper, shown at once); can no
          longer be answered; a retried call presenting it is denied
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.models import (
    ApprovalAnswerView,
    ApprovalView,
    GrantScopeBody,
    InputChange,
    MatchedRule,
    ScopedGrantView,
    ToolRef,
    VoteView,
)
from app.timefmt import rfc3339_ms
from app.vocabulary import GrantScope

StoredState = Literal["pending", "approved", "denied", "used", "expired"]
STORED_STATES: tuple[str, ...] = ("pending", "approved", "denied", "used", "expired")
#: How an approver authenticated: a bearer token, a step-up token (own audience), a console session.
CredentialKind = Literal["bearer", "step-up", "console"]


def tool_ref(qualified: str, version: str) -> ToolRef:
    """The ``ToolRef`` of a qualified tool name (``namespace/name``, or ``name``)."""
    namespace, _, name = qualified.rpartition("/")
    return ToolRef(name=name, version=version, namespace=namespace or None)


def new_approval_id() -> str:
    """An unguessable approval id: ``ap_`` and 32 base64url characters (192 random bits)."""
    return "ap_" + secrets.token_urlsafe(24)


def new_scoped_grant_id() -> str:
    """An unguessable scoped grant id: ``sg_`` and 32 base64url characters."""
    return "sg_" + secrets.token_urlsafe(24)


def credential_digest(authorization: tuple[str, ...] | list[str] | str) -> str | None:
    """The SHA-256 (hex) of the bearer token of an ``Authorization`` header (or of the only
    value of a header list); None without exactly one. The scheme and spacing are not part of
    it, so ``bearer X`` and ``Bearer  X`` are the same credential."""
    values = [authorization] if isinstance(authorization, str) else list(authorization)
    if len(values) != 1:
        return None
    token = values[0].strip().partition(" ")[2].strip()
    return hashlib.sha256(token.encode("utf-8")).hexdigest() if token else None


def secret_digest(text: str) -> str:
    """The SHA-256 (hex) of a credential other than a bearer token (a console session id)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Credential:
    """How the caller of an approvals endpoint authenticated: ``kind`` and the SHA-256 (hex) of
    the credential itself (the bearer token, or the console session id). Approvals compare it
    with the credential of the request, never the credential itself."""

    kind: CredentialKind
    digest: str


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
    """The immutable part of an approval, written once at creation.

    ``input`` is the display input (sensitive paths redacted); ``call_input`` the normalized
    input the policy saw, kept in Redis only (never shown) so an approver's edit can be
    validated against the contract and fingerprinted; ``reasons`` the policy's approval reasons
    and ``policy_revision`` its revision, both bound in the grant; ``credential_digest`` the
    SHA-256 of the requester's bearer token (an answer with that credential is refused).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    approval_id: str
    tenant: str
    requester: str
    tool: str
    version: str
    tool_call_id: str | None
    input_fingerprint: str
    input: dict[str, Any]
    call_input: dict[str, Any] = Field(default_factory=dict)
    sensitive_paths: tuple[str, ...] = ()
    conversation_id: str | None = None
    request_reason: str
    reasons: tuple[str, ...] = ()
    matched_rules: tuple[MatchedRule, ...] = ()
    policy_revision: str | None = None
    approver_roles: tuple[str, ...]
    quorum: int = 1
    allow_self_approval: bool = False
    requester_only: bool = False
    escalation_roles: tuple[str, ...] = ()
    escalate_at_ms: int | None = None
    grant_scopes: tuple[GrantScope, ...] = ("once",)
    max_grant_ttl_s: int | None = None
    credential_digest: str | None = None
    decision_id: str
    created_at_ms: int
    expires_at_ms: int
    ttl_s: int

    def call(self) -> CallFacts:
        """The call this approval was requested for."""
        return CallFacts(self.tenant, self.requester, self.tool, self.version, self.tool_call_id, self.input_fingerprint)


class ApprovedEdit(BaseModel):
    """The input as the approver narrowed it: the normalized ``input`` (Redis only), its
    ``fingerprint`` and the ``changes`` against the requested input (display form)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: dict[str, Any]
    fingerprint: str
    changes: tuple[InputChange, ...]


class Vote(BaseModel):
    """One approver's vote (an approval counts towards the quorum; a denial decides)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approver: str
    approver_roles: tuple[str, ...]
    approved: bool
    reason: str
    credential: CredentialKind
    at_ms: int
    #: The fingerprint of the input this vote approves (the requested one unless edited).
    approved_fingerprint: str
    #: What an approval approves, input and scope as one digest ('' for a denial): every
    #: approval of one quorum approves the same.
    proposal: str = ""
    edit: ApprovedEdit | None = None
    scope: GrantScopeBody | None = None


class ApprovalAnswer(BaseModel):
    """The final answer: the vote that decided (its approver, reason, decision id) and, for an
    approval, the grant's expiry, the approved edit and the scope chosen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approved: bool
    reason: str
    approver: str
    approver_roles: tuple[str, ...]
    decision_id: str
    answered_at_ms: int
    grant_expires_at_ms: int | None = None
    edit: ApprovedEdit | None = None
    scope: GrantScope = "once"
    scoped_grant_id: str | None = None


@dataclass(frozen=True)
class Approval:
    """One approval as read from Redis. ``votes`` are in the order they were cast;
    ``used_by`` is the hashed idempotency key of the attempt that used the grant."""

    request: ApprovalRequest
    state: StoredState
    answer: ApprovalAnswer | None
    votes: tuple[Vote, ...] = ()
    escalated: bool = False
    used_by: str | None = None

    def state_at(self, now_ms: int) -> str:
        """The state to show: the stored one, or ``expired`` for a pending approval past its
        expiry and an approved one whose grant expired unused."""
        if self.state == "pending" and now_ms >= self.request.expires_at_ms:
            return "expired"
        if self.state == "approved" and self.answer and now_ms >= (self.answer.grant_expires_at_ms or 0):
            return "expired"
        return self.state

    @property
    def approvers(self) -> tuple[str, ...]:
        """Who approved, in order (the votes that approved)."""
        return tuple(v.approver for v in self.votes if v.approved)

    def answer_roles(self) -> tuple[str, ...]:
        """The roles that may answer now: the approver roles, plus the escalation roles once
        the approval was escalated."""
        extra = self.request.escalation_roles if self.escalated else ()
        return tuple(dict.fromkeys(self.request.approver_roles + extra))

    def view(self, now_ms: int) -> ApprovalView:
        """The wire form (``ApprovalView``) at ``now_ms``; the input is already redacted."""
        req, answer = self.request, self.answer
        return ApprovalView(
            approval_id=req.approval_id,
            state=self.state_at(now_ms),  # type: ignore[arg-type]
            tool=tool_ref(req.tool, req.version),
            tool_call_id=req.tool_call_id,
            requester=req.requester,
            conversation_id=req.conversation_id,
            input=req.input,
            input_fingerprint=req.input_fingerprint,
            request_reason=req.request_reason,
            reasons=list(req.reasons),
            matched_rules=list(req.matched_rules),
            policy_revision=req.policy_revision,
            approver_roles=list(req.approver_roles),
            quorum=req.quorum,
            votes=[
                VoteView(approver=v.approver, approved=v.approved, reason=v.reason, at=rfc3339_ms(v.at_ms),
                         credential=v.credential, changes=list(v.edit.changes) if v.edit else [],
                         scope=v.scope.kind if v.scope else None)
                for v in self.votes
            ],
            allow_self_approval=req.allow_self_approval,
            requester_only=req.requester_only,
            grant_scopes=list(req.grant_scopes),
            escalation_roles=list(req.escalation_roles),
            escalate_at=rfc3339_ms(req.escalate_at_ms) if req.escalate_at_ms else None,
            escalated=self.escalated,
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
                approvers=list(self.approvers),
                changes=list(answer.edit.changes) if answer.edit else [],
                scope=answer.scope,
                scoped_grant_id=answer.scoped_grant_id,
            ),
        )


class ScopedGrant(BaseModel):
    """A standing grant left by an approval with a scope other than ``once``: the requester may
    use ``tool``/``version`` within ``constraints`` (JSON Pointer -> constraint, see
    ``app.approvals.scoped``) until ``expires_at_ms``, in ``conversation_id`` when set. Each
    use is re-evaluated by the policy; the grant holds only while the policy's approval reasons
    stay within ``reasons``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grant_id: str
    approval_id: str
    scope: GrantScope
    tenant: str
    requester: str
    tool: str
    version: str
    conversation_id: str | None
    constraints: dict[str, dict[str, Any]]
    reasons: tuple[str, ...]
    quorum: int
    #: The approver whose vote decided, and her roles (``input.approval.approver`` on use).
    approver: str
    approver_roles: tuple[str, ...]
    answer_id: str
    created_at_ms: int
    expires_at_ms: int

    def view(self, *, uses: int, revoked: bool, approvers: tuple[str, ...]) -> ScopedGrantView:
        return ScopedGrantView(
            grant_id=self.grant_id,
            approval_id=self.approval_id,
            scope=self.scope,
            requester=self.requester,
            tool=tool_ref(self.tool, self.version),
            conversation_id=self.conversation_id,
            constraints=self.constraints,
            reasons=list(self.reasons),
            approvers=list(approvers or (self.approver,)),
            created_at=rfc3339_ms(self.created_at_ms),
            expires_at=rfc3339_ms(self.expires_at_ms),
            uses=uses,
            revoked=revoked,
        )


@dataclass(frozen=True)
class StoredScopedGrant:
    """A scoped grant as read from Redis, with its use count, revocation and every approver of
    its quorum."""

    grant: ScopedGrant
    uses: int = 0
    revoked: bool = False
    revoked_by: str | None = None
    approvers: tuple[str, ...] = ()

    def view(self) -> ScopedGrantView:
        return self.grant.view(uses=self.uses, revoked=self.revoked, approvers=self.approvers)
