"""The approvals service (DESIGN §5): open a pending approval for a ``user-approval`` decision,
list and show approvals to approvers, record an answer, and check a grant presented on a
repeated decide call.

Errors: ``NotFound`` (404: unknown id, or another tenant's), ``Forbidden`` (403: no approver
role, four-eyes), ``Conflict`` (409: already answered or expired), ``DependencyUnavailable``
(503: Redis, or no grant signing key), ``ApprovalRejected`` (a presented approval is refused).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.approvals.grants import GrantClaims, GrantExpired, GrantInvalid, GrantSigner
from app.approvals.presented import (
    DENIED_WITHOUT_REASON,
    GRANT_EXPIRED,
    GRANT_INVALID,
    GRANT_MISSING,
    GRANT_USED,
    ApprovalRejected,
    VerifiedApproval,
    attempt_hash,
    differing,
    same_binding,
)
from app.approvals.records import Approval, ApprovalAnswer, ApprovalRequest, CallFacts, new_approval_id
from app.approvals.store import ApprovalStore
from app.errors import Conflict, DependencyUnavailable, Forbidden, NotFound
from app.models import ApprovalPresentation, PolicyDecision, Subject
from app.redis_client import RedisConnection
from app.settings import ApprovalSettings


class ApprovalService:
    """Pending approvals of every tenant: request, list, show, answer, and grant checks.

    ``redis`` is the process's ``RedisConnection``; ``signer`` signs and verifies grants;
    ``clock`` returns Unix time in seconds (tests may pass their own).
    """

    def __init__(
        self,
        redis: RedisConnection,
        signer: GrantSigner,
        *,
        default_ttl_s: int,
        default_approver_roles: list[str] | tuple[str, ...],
        self_approve_roles: list[str] | tuple[str, ...] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = ApprovalStore(redis)
        self._signer = signer
        self._default_ttl_s = default_ttl_s
        self._default_roles = tuple(default_approver_roles)
        self._self_approve_roles = frozenset(self_approve_roles)
        self._clock = clock

    @classmethod
    def from_settings(cls, redis: RedisConnection, settings: ApprovalSettings) -> ApprovalService:
        """The service with the ``approval_*`` settings."""
        return cls(
            redis,
            GrantSigner(settings.approval_signing_keys),
            default_ttl_s=settings.approval_default_ttl_s,
            default_approver_roles=settings.approval_default_approver_roles,
            self_approve_roles=settings.approval_self_approve_roles,
        )

    def now_ms(self) -> int:
        """The current Unix time in milliseconds."""
        return int(self._clock() * 1000)

    def _find(self, caller: Subject, approval_id: str) -> Approval:
        approval = self._store.load(caller.tenant, approval_id)
        if approval is None:
            raise NotFound("no such approval")
        return approval

    @staticmethod
    def _is_approver(caller: Subject, approval: Approval) -> bool:
        return bool(set(caller.roles) & set(approval.request.approver_roles))

    # --- creating --------------------------------------------------------------------------

    def request(
        self, call: CallFacts, decision: PolicyDecision, *, display_input: dict[str, object], decision_id: str
    ) -> Approval:
        """The pending approval for a ``user-approval`` decision: a new one, or the one already
        pending for the same call (requester, tool, version, tool_call_id, input fingerprint).

        ``display_input`` is the normalized input with sensitive paths redacted; ``decision_id``
        is the decide call's. Approver roles and TTL come from the policy's ``approval`` object,
        else the settings. Raises ``DependencyUnavailable`` (503).
        """
        now = self.now_ms()
        ttl_s = decision.approval_ttl_s or self._default_ttl_s
        request = ApprovalRequest(
            approval_id=new_approval_id(),
            tenant=call.tenant,
            requester=call.subject,
            tool=call.tool,
            version=call.version,
            tool_call_id=call.tool_call_id,
            input_fingerprint=call.input_fingerprint,
            input=display_input,
            request_reason=decision.approval_reason or "; ".join(decision.reasons) or "this call needs approval",
            approver_roles=tuple(decision.approver_roles or self._default_roles),
            decision_id=decision_id,
            created_at_ms=now,
            expires_at_ms=now + ttl_s * 1000,
            ttl_s=ttl_s,
        )
        approval_id = self._store.create(request)
        if approval_id == request.approval_id:
            return Approval(request=request, state="pending", answer=None)
        existing = self._store.load(call.tenant, approval_id)
        if existing is None:
            raise DependencyUnavailable(log_detail=f"pending approval {approval_id} has no record")
        return existing

    # --- the approver's side ----------------------------------------------------------------

    def list_pending(self, caller: Subject, *, limit: int = 100) -> list[Approval]:
        """Pending approvals of the caller's tenant that the caller may answer, soonest expiry
        first, at most ``limit``. Raises ``Forbidden`` (403) when the caller holds no approver
        role (none of the default approver roles and none named by a pending approval) and
        ``DependencyUnavailable`` (503)."""
        pending = self._store.pending(caller.tenant, self.now_ms())
        mine = [a for a in pending if self._is_approver(caller, a)]
        if not mine and not set(caller.roles) & set(self._default_roles):
            raise Forbidden("listing approvals needs an approver role")
        return mine[:limit]

    def show(self, caller: Subject, approval_id: str) -> tuple[Approval, str | None]:
        """One approval of the caller's tenant, for its requester or a caller holding one of its
        approver roles; with the grant when the caller is the requester and the approval is
        approved, unused and unexpired. Raises ``NotFound`` (404), ``Forbidden`` (403),
        ``DependencyUnavailable`` (503)."""
        approval = self._find(caller, approval_id)
        is_requester = caller.id == approval.request.requester
        if not is_requester and not self._is_approver(caller, approval):
            raise Forbidden("only the requester or an approver may see this approval")
        grant = None
        if is_requester and approval.state_at(self.now_ms()) == "approved":
            grant = self._signer.sign(self._claims(approval))
        return approval, grant

    def answer(
        self, caller: Subject, approval_id: str, *, approved: bool, reason: str, decision_id: str
    ) -> tuple[Approval, str | None]:
        """Record the caller's answer; return the answered approval and, for an approval, the
        grant. ``decision_id`` identifies this answer (it is bound in the grant).

        Checks in order: 404 unknown or another tenant's id; 403 without one of the approval's
        approver roles; 403 when the caller is the requester (unless they hold a self-approve
        role); 409 when already answered or expired; 503 when Redis fails or no signing key is
        configured (checked before anything is written).
        """
        approval = self._find(caller, approval_id)
        request = approval.request
        if not self._is_approver(caller, approval):
            raise Forbidden("answering this approval needs one of the roles " + ", ".join(request.approver_roles))
        if caller.id == request.requester and not set(caller.roles) & self._self_approve_roles:
            raise Forbidden("an approval cannot be answered by its requester")
        now = self.now_ms()
        if approval.state_at(now) != "pending":
            raise Conflict("this approval was already answered or has expired")
        answer = ApprovalAnswer(
            approved=approved,
            reason=reason,
            approver=caller.id,
            approver_roles=caller.roles,
            decision_id=decision_id,
            answered_at_ms=now,
            grant_expires_at_ms=now + request.ttl_s * 1000 if approved else None,
        )
        answered = Approval(request=request, state="approved" if approved else "denied", answer=answer)
        grant = self._signer.sign(self._claims(answered)) if approved else None
        outcome = self._store.write_answer(answered, now)
        if outcome == "missing":
            raise NotFound("no such approval")
        if outcome != "ok":
            raise Conflict("this approval was already answered or has expired")
        return answered, grant

    def _claims(self, approval: Approval) -> GrantClaims:
        request, answer = approval.request, approval.answer
        assert answer is not None and answer.grant_expires_at_ms is not None
        return GrantClaims(
            approval_id=request.approval_id,
            tenant=request.tenant,
            subject=request.requester,
            tool=request.tool,
            version=request.version,
            tool_call_id=request.tool_call_id,
            input_fingerprint=request.input_fingerprint,
            approver=answer.approver,
            approver_roles=answer.approver_roles,
            decision_id=answer.decision_id,
            issued_at_ms=answer.answered_at_ms,
            expires_at_ms=answer.grant_expires_at_ms,
        )

    # --- the tool service's side -------------------------------------------------------------

    def verify_presented(
        self, presented: ApprovalPresentation, call: CallFacts, *, idempotency_key: str | None = None
    ) -> VerifiedApproval:
        """Check an approval presented on a decide call against that call.

        With a grant: signature (constant time) and form, binding to ``call`` and the presented
        approval id (constant time), expiry, and that the approval is approved and not used yet
        (or used by this same attempt: the same ``idempotency_key``). Without one: a denied
        approval of this very call yields its approver's reason; anything else is
        ``GRANT_MISSING``. Raises ``ApprovalRejected`` (-> deny) or ``DependencyUnavailable``
        (503, Redis down: fail closed). The grant is not used up here; ``consume`` does that
        once the policy allowed the call.
        """
        if presented.grant is None:
            raise self._without_grant(presented.approval_id, call)
        try:
            claims = self._signer.verify(presented.grant, now_ms=self.now_ms())
        except GrantExpired as exc:
            raise ApprovalRejected(GRANT_EXPIRED, "expired", str(exc)) from None
        except GrantInvalid as exc:
            raise ApprovalRejected(GRANT_INVALID, "invalid", str(exc)) from None
        expected = call.binding(presented.approval_id)
        if not same_binding(claims.binding(), expected):
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"grant is bound to another {differing(claims.binding(), expected)}")
        state, answer_id, used_by = self._store.grant_state(call.tenant, claims.approval_id)
        attempt = attempt_hash(idempotency_key)
        if answer_id != claims.decision_id or state not in ("approved", "used"):
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"approval record is {state or 'missing'} or answered otherwise")
        if state == "used" and not (attempt and used_by == attempt):
            raise ApprovalRejected(GRANT_USED, "used", "grant was used before")
        return VerifiedApproval(claims, attempt)

    def _without_grant(self, approval_id: str, call: CallFacts) -> ApprovalRejected:
        approval = self._store.load(call.tenant, approval_id)
        if approval is None:
            return ApprovalRejected(GRANT_MISSING, "missing", "no grant, and no such approval")
        if approval.state != "denied" or approval.answer is None:
            return ApprovalRejected(GRANT_MISSING, "missing", f"no grant for an approval in state {approval.state}")
        requested = approval.request.call().binding(approval_id)
        if not same_binding(requested, call.binding(approval_id)):
            return ApprovalRejected(
                GRANT_INVALID, "invalid", f"denied approval is for another {differing(requested, call.binding(approval_id))}"
            )
        return ApprovalRejected(approval.answer.reason or DENIED_WITHOUT_REASON, "denied", "the approver denied this call")

    def consume(self, verified: VerifiedApproval) -> None:
        """Mark the approval's grant used by this attempt, atomically: of concurrent calls with
        different (or no) idempotency keys exactly one returns; calls of the attempt that used it
        return too. The others raise ``ApprovalRejected`` (``GRANT_USED``, or ``GRANT_INVALID``
        when the record changed). Raises ``DependencyUnavailable`` (503)."""
        claims = verified.claims
        outcome = self._store.mark_used(claims.tenant, claims.approval_id, claims.decision_id, self.now_ms(), verified.attempt)
        if outcome == "used":
            raise ApprovalRejected(GRANT_USED, "used", "grant was used by a concurrent call")
        if outcome != "ok":
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"approval record is {outcome} at use")
