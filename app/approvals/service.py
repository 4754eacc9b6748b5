"""The approvals service (DESIGN §5): open a pending approval for a ``user-approval`` decision,
list and show approvals to approvers, cast votes (quorum, edits, scopes), check a grant
presented on a repeated decide call against its signature *and* the stored record, use standing
scoped grants, expire and escalate unanswered approvals, and notify webhooks.

Who may answer (``answer``), in order: the approval's tenant (else 404); one of the approval's
approver roles, or an escalation role once escalated (403); never with the credential that made
the request (403); the requester only when the policy's approval allows self-approval
and only with a step-up credential (403); each approver once (409); before expiry (409).

Errors: ``NotFound`` (404: unknown id, or another tenant's), ``Forbidden`` (403),
``Conflict`` (409: already answered, expired, voted, another input), ``ValidationFailed`` (422:
a scope the policy does not offer), ``RateLimited`` (429: the requester holds too many pending
approvals), ``DependencyUnavailable`` (503: Redis, or no grant signing key),
``ApprovalRejected`` (a presented approval is refused).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app import metrics
from app.approvals.grants import GrantClaims, GrantExpired, GrantInvalid, GrantSigner
from app.approvals.presented import (
    APPROVAL_EXPIRED,
    DENIED_WITHOUT_REASON,
    GRANT_EXPIRED,
    GRANT_INVALID,
    GRANT_MISSING,
    GRANT_USED,
    ApprovalRejected,
    StandingApproval,
    VerifiedApproval,
    attempt_hash,
    differing,
    same_binding,
)
from app.approvals.records import (
    Approval,
    ApprovalAnswer,
    ApprovalRequest,
    ApprovedEdit,
    CallFacts,
    Credential,
    ScopedGrant,
    StoredScopedGrant,
    Vote,
    new_approval_id,
    new_scoped_grant_id,
)
from app.approvals.scoped import constraints_hold, resolves
from app.approvals.store import ApprovalStore, VoteWrite
from app.approvals.webhooks import WebhookNotifier
from app.errors import Conflict, DependencyUnavailable, Forbidden, NotFound, RateLimited, ValidationFailed
from app.fingerprint import canonical_json
from app.models import ApprovalPresentation, Constraint, GrantScopeBody, PolicyDecision, Subject
from app.redis_client import RedisConnection
from app.settings import ApprovalSettings, Settings

log = logging.getLogger(__name__)

#: ``<created_at_ms>.<approval_id>`` of the last approval of the previous page.
CURSOR_PATTERN = r"^[0-9]{1,15}\.ap_[A-Za-z0-9_-]{32}$"
_CURSOR = re.compile(CURSOR_PATTERN)
#: How often a long-poll looks at the record, in seconds.
WAIT_POLL_S = 0.2


@dataclass(frozen=True)
class OpenedApproval:
    """What a decide call needs to open an approval: the call's facts, its display input (sensitive
    paths redacted), the normalized input, the sensitive paths, the conversation id, the SHA-256
    of the requester's credential, the decide call's decision id and the policy revision."""

    call: CallFacts
    display_input: dict[str, Any]
    call_input: dict[str, Any]
    sensitive_paths: tuple[str, ...]
    conversation_id: str | None
    credential_digest: str | None
    decision_id: str
    policy_revision: str | None


@dataclass(frozen=True)
class Requirement:
    """What the policy asks of an approval now (a ``user-approval`` decision): its reasons, the
    roles that may approve and the quorum."""

    reasons: tuple[str, ...]
    approver_roles: tuple[str, ...]
    quorum: int


def encode_cursor(created_at_ms: int, approval_id: str) -> str:
    return f"{created_at_ms}.{approval_id}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(created_at_ms, approval_id)``; raises ``ValidationFailed`` (400) for a bad cursor."""
    if not _CURSOR.match(cursor):
        raise ValidationFailed("cursor is not valid", http_status=400)
    created, approval_id = cursor.split(".", 1)
    return int(created), approval_id


class ApprovalService:
    """Pending approvals of every tenant. ``store`` holds them in Redis; ``signer`` signs and
    verifies grants; ``notifier`` (optional) sends webhooks; ``clock``
    returns Unix time in seconds (tests may pass their own)."""

    def __init__(
        self,
        store: ApprovalStore,
        signer: GrantSigner,
        *,
        default_ttl_s: int,
        default_approver_roles: list[str] | tuple[str, ...],
        max_pending_per_requester: int = 0,
        max_pending_per_tenant: int = 0,
        notifier: WebhookNotifier | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._signer = signer
        self._default_ttl_s = default_ttl_s
        self._default_roles = tuple(default_approver_roles)
        self._max_pending = max_pending_per_requester
        self._max_pending_per_tenant = max_pending_per_tenant
        self.notifier = notifier
        self._clock = clock
        self._sleep = sleep

    @classmethod
    def from_settings(cls, redis: RedisConnection, settings: ApprovalSettings | Settings) -> ApprovalService:
        """The service with the ``approval_*`` (and ``webhook_*``) settings."""
        notifier = None
        if isinstance(settings, Settings) and settings.webhook_url:
            notifier = WebhookNotifier(settings)
        return cls(
            ApprovalStore(redis),
            GrantSigner(settings.approval_signing_keys, production=settings.env == "production"),
            default_ttl_s=settings.approval_default_ttl_s,
            default_approver_roles=settings.approval_default_approver_roles,
            max_pending_per_requester=settings.approval_max_pending_per_subject,
            max_pending_per_tenant=settings.approval_max_pending_per_tenant,
            notifier=notifier,
        )

    @property
    def default_approver_roles(self) -> tuple[str, ...]:
        """Who may answer when the policy names no approver roles."""
        return self._default_roles

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
        """Whether ``caller`` holds a role that answers ``approval`` (and, for an approval only
        its requester may answer, is its requester)."""
        if approval.request.requester_only and caller.id != approval.request.requester:
            return False
        return bool(set(caller.roles) & set(approval.answer_roles()))

    def _notify(self, event_type: str, approval: Approval) -> None:
        if self.notifier is not None:
            view = approval.view(self.now_ms()).model_dump(mode="json")
            self.notifier.notify(event_type, approval.request.tenant, view)

    # --- creating --------------------------------------------------------------------------

    def request(self, opened: OpenedApproval, decision: PolicyDecision) -> Approval:
        """The pending approval for a ``user-approval`` decision: a new one, or the one already
        pending for the same call (requester, tool, version, tool_call_id, input fingerprint).

        Roles, TTL, quorum, self-approval, escalation and grant scopes come from the policy's
        ``approval`` object, else the settings. Raises ``RateLimited`` (429, ``Retry-After`` the
        seconds until the requester's soonest pending approval expires) when the requester holds
        ``max_pending_per_requester`` pending approvals, and ``DependencyUnavailable`` (503).
        """
        now = self.now_ms()
        ttl_s = decision.approval_ttl_s or self._default_ttl_s
        escalation = decision.approval_escalation
        call = opened.call
        request = ApprovalRequest(
            approval_id=new_approval_id(),
            tenant=call.tenant,
            requester=call.subject,
            tool=call.tool,
            version=call.version,
            tool_call_id=call.tool_call_id,
            input_fingerprint=call.input_fingerprint,
            input=opened.display_input,
            call_input=opened.call_input,
            sensitive_paths=opened.sensitive_paths,
            conversation_id=opened.conversation_id,
            request_reason=decision.approval_reason or "; ".join(decision.reasons) or "this call needs approval",
            reasons=tuple(sorted(set(decision.reasons))),
            matched_rules=tuple(r for r in decision.matched_rules if r.effect == "approval"),
            policy_revision=opened.policy_revision,
            approver_roles=tuple(decision.approver_roles or self._default_roles),
            quorum=decision.approval_quorum or 1,
            allow_self_approval=decision.approval_self_approval,
            requester_only=decision.approval_requester_only,
            escalation_roles=escalation.roles if escalation else (),
            escalate_at_ms=now + escalation.after_s * 1000 if escalation and escalation.after_s < ttl_s else None,
            grant_scopes=decision.approval_grant_scopes or ("once",),  # type: ignore[arg-type]
            max_grant_ttl_s=decision.approval_max_grant_ttl_s,
            credential_digest=opened.credential_digest,
            decision_id=opened.decision_id,
            created_at_ms=now,
            expires_at_ms=now + ttl_s * 1000,
            ttl_s=ttl_s,
        )
        created = self._store.create(request, max_pending_per_requester=self._max_pending, now_ms=now,
                                     max_pending_per_tenant=self._max_pending_per_tenant)
        if created.outcome in ("capped", "tenant_capped"):
            wait_s = max(1, -(-((created.retry_at_ms or now) - now) // 1000))
            whose, held = ("caller", self._max_pending) if created.outcome == "capped" else ("tenant", self._max_pending_per_tenant)
            raise RateLimited(
                f"too many pending approvals for this {whose}", retry_after_s=wait_s,
                log_detail=f"{whose} {call.subject if whose == 'caller' else call.tenant} holds {held} pending approvals",
            )
        if created.approval_id == request.approval_id:
            approval = Approval(request=request, state="pending", answer=None)
            metrics.APPROVALS_CREATED.inc()
            self._notify("approval.requested", approval)
            return approval
        existing = self._store.load(call.tenant, created.approval_id or "")
        if existing is None:
            raise DependencyUnavailable(log_detail=f"pending approval {created.approval_id} has no record")
        return existing

    # --- the approver's side ----------------------------------------------------------------

    def list_pending(self, caller: Subject, *, limit: int = 100, cursor: str | None = None) -> tuple[list[Approval], str | None]:
        """Pending approvals of the caller's tenant that the caller may answer, oldest first, at
        most ``limit``, after ``cursor``; and the cursor of the next page (None: last page).
        Raises ``Forbidden`` (403) when the caller holds no approver role (none of the default
        approver roles and none that a pending approval names), ``ValidationFailed`` (400: bad
        cursor) and ``DependencyUnavailable`` (503)."""
        after = decode_cursor(cursor) if cursor else None
        now = self.now_ms()
        mine: list[Approval] = []
        while True:
            page, more = self._store.pending_page(caller.tenant, after=after)
            mine.extend(a for a in page if a.state_at(now) == "pending" and self._is_approver(caller, a))
            if len(mine) > limit or not more or not page:
                break
            last = page[-1].request
            after = (last.created_at_ms, last.approval_id)
        if not mine and not set(caller.roles) & set(self._default_roles):
            raise Forbidden("listing approvals needs an approver role")
        shown = mine[:limit]
        next_cursor = encode_cursor(shown[-1].request.created_at_ms, shown[-1].request.approval_id) if len(mine) > limit else None
        return shown, next_cursor

    def show(self, caller: Subject, approval_id: str) -> tuple[Approval, str | None]:
        """One approval of the caller's tenant, for its requester or a caller who may answer it;
        with the grant when the caller is the requester and the approval is approved, unused
        and unexpired. Raises ``NotFound`` (404), ``Forbidden`` (403), ``DependencyUnavailable``
        (503)."""
        approval = self._find(caller, approval_id)
        is_requester = caller.id == approval.request.requester
        if not is_requester and not self._is_approver(caller, approval):
            raise Forbidden("only the requester or an approver may see this approval")
        grant = None
        if is_requester and approval.state_at(self.now_ms()) == "approved":
            grant = self._signer.sign(self._claims(approval))
        return approval, grant

    def wait(self, caller: Subject, approval_id: str, wait_s: float) -> tuple[Approval, str | None]:
        """``show``, after waiting up to ``wait_s`` seconds for a pending approval to be answered
        or to expire (a long poll: the requester does not spin). Same errors as ``show``."""
        deadline = time.monotonic() + wait_s
        approval, grant = self.show(caller, approval_id)
        while approval.state_at(self.now_ms()) == "pending" and time.monotonic() < deadline:
            self._sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
            approval, grant = self.show(caller, approval_id)
        return approval, grant

    def find(self, caller: Subject, approval_id: str) -> Approval:
        """The approval, unchecked beyond the tenant (404 otherwise): for the decide side of an
        answer, which checks the caller in ``answer``."""
        return self._find(caller, approval_id)

    def answer(
        self,
        caller: Subject,
        credential: Credential,
        approval_id: str,
        *,
        approved: bool,
        reason: str,
        decision_id: str,
        edit: ApprovedEdit | None = None,
        scope: GrantScopeBody | None = None,
    ) -> tuple[Approval, str | None]:
        """Cast the caller's vote; return the approval as it now stands and, when this vote
        approved it (the quorum reached), the one-time grant. ``decision_id`` identifies this
        answer (it is bound in the grant). ``edit`` is the input as the approver narrowed it
        (validated against the contract by the caller of this method); ``scope`` how far the
        grant reaches. With a quorum, every approval approves the same input and scope: a
        later approver who sends neither adopts the first one's.

        Raises ``NotFound``, ``Forbidden``, ``Conflict``, ``ValidationFailed`` (422: scope) and
        ``DependencyUnavailable`` (see the module docstring), each before anything is written.
        """
        approval = self._find(caller, approval_id)
        request = approval.request
        self._check_answerer(caller, credential, approval)
        now = self.now_ms()
        if approval.state_at(now) != "pending":
            raise Conflict("this approval was already answered or has expired")
        if any(v.approver == caller.id for v in approval.votes):
            raise Conflict("you have already answered this approval")
        if approved and edit is None and scope is None:
            first = next((v for v in approval.votes if v.approved), None)
            edit, scope = (first.edit, first.scope) if first else (None, None)
        if scope is None or scope.kind == "once":
            scope = GrantScopeBody()  # a one-time grant: ttl_s and constraints do not apply
        fingerprint = edit.fingerprint if edit else request.input_fingerprint
        if approved:
            self._check_scope(request, scope, edit.input if edit else request.call_input)
            self._signer.require_signing_key()
        vote = Vote(
            approver=caller.id, approver_roles=caller.roles, approved=approved, reason=reason, credential=credential.kind,
            at_ms=now, approved_fingerprint=fingerprint, proposal=_proposal(fingerprint, scope) if approved else "",
            edit=edit if approved else None, scope=scope if approved else None,
        )
        scoped = self._scoped_grant(request, caller, scope, decision_id, now) if approved and scope.kind != "once" else None
        answer = ApprovalAnswer(
            approved=approved,
            reason=reason,
            approver=caller.id,
            approver_roles=caller.roles,
            decision_id=decision_id,
            answered_at_ms=now,
            grant_expires_at_ms=now + request.ttl_s * 1000 if approved else None,
            edit=edit if approved else None,
            scope=scope.kind,
            scoped_grant_id=scoped.grant_id if scoped else None,
        )
        outcome = self._store.vote(request, VoteWrite(vote=vote, quorum=request.quorum, answer=answer, scoped=scoped), now)
        if outcome == "missing":
            raise NotFound("no such approval")
        if outcome == "voted":
            raise Conflict("you have already answered this approval")
        if outcome == "other_input":
            raise Conflict("this approval is collecting a quorum for another input or scope")
        if outcome not in ("counted", "decided"):
            raise Conflict("this approval was already answered or has expired")
        current = self._store.load(request.tenant, approval_id)
        if current is None:
            raise DependencyUnavailable(log_detail=f"approval {approval_id} vanished after a vote")
        if outcome == "decided":
            metrics.APPROVALS_ANSWERED.labels("approved" if approved else "rejected").inc()
            if scoped is not None:
                self._store.set_scoped_approvers(scoped, current.approvers)
            self._notify("approval.answered", current)
        grant = self._signer.sign(self._claims(current)) if outcome == "decided" and approved else None
        return current, grant

    def _check_answerer(self, caller: Subject, credential: Credential, approval: Approval) -> None:
        request = approval.request
        if not self._is_approver(caller, approval):
            raise Forbidden("answering this approval needs one of the roles " + ", ".join(approval.answer_roles()))
        if request.credential_digest is not None and credential.digest == request.credential_digest:
            raise Forbidden("an approval cannot be given with the credential that made the request")
        if caller.id == request.requester:
            if not request.allow_self_approval:
                raise Forbidden("an approval cannot be answered by its requester")
            if credential.kind != "step-up":
                raise Forbidden("the requester may confirm her own call with a step-up credential only")

    def _check_scope(self, request: ApprovalRequest, scope: GrantScopeBody, approved_input: dict[str, Any]) -> None:
        if scope.kind not in request.grant_scopes:
            raise ValidationFailed(
                f"this approval offers the grant scopes {', '.join(request.grant_scopes)}", http_status=422,
                details={"problems": [{"path": "/scope/kind", "message": "not offered by the policy"}]},
            )
        if scope.kind == "once":
            return
        longest = request.max_grant_ttl_s or request.ttl_s
        problems = []
        if scope.ttl_s is not None and scope.ttl_s > longest:
            problems.append({"path": "/scope/ttl_s", "message": f"at most {longest} seconds"})
        if scope.kind == "conversation" and request.conversation_id is None:
            problems.append({"path": "/scope/kind", "message": "the call names no conversation"})
        for pointer in scope.constraints:
            if any(pointer == p or pointer.startswith(p + "/") for p in request.sensitive_paths):
                problems.append({"path": "/scope/constraints", "message": f"{pointer} is a sensitive member"})
            elif not resolves(approved_input, pointer):
                problems.append({"path": "/scope/constraints", "message": f"{pointer} is not in the input"})
        if not problems and not constraints_hold(scope.constraints, approved_input):
            problems.append({"path": "/scope/constraints", "message": "the approved input does not meet them"})
        if problems:
            raise ValidationFailed("the grant scope is not valid", http_status=422, details={"problems": problems})

    @staticmethod
    def _scoped_grant(request: ApprovalRequest, caller: Subject, scope: GrantScopeBody, decision_id: str, now: int) -> ScopedGrant:
        ttl_s = scope.ttl_s or request.max_grant_ttl_s or request.ttl_s
        return ScopedGrant(
            grant_id=new_scoped_grant_id(),
            approval_id=request.approval_id,
            scope=scope.kind,
            tenant=request.tenant,
            requester=request.requester,
            tool=request.tool,
            version=request.version,
            conversation_id=request.conversation_id if scope.kind == "conversation" else None,
            constraints={k: _constraint(v) for k, v in scope.constraints.items()},
            reasons=request.reasons,
            quorum=request.quorum,
            approver=caller.id,
            approver_roles=caller.roles,
            answer_id=decision_id,
            created_at_ms=now,
            expires_at_ms=now + ttl_s * 1000,
        )

    def _claims(self, approval: Approval) -> GrantClaims:
        """The claims of the grant of an approved record: what a presented grant must equal."""
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
            approvers=approval.approvers,
            quorum=request.quorum,
            reasons=request.reasons,
            policy_revision=request.policy_revision,
            approved_input_fingerprint=answer.edit.fingerprint if answer.edit else None,
            decision_id=answer.decision_id,
            issued_at_ms=answer.answered_at_ms,
            expires_at_ms=answer.grant_expires_at_ms,
        )

    # --- the tool service's side -------------------------------------------------------------

    def verify_presented(
        self, presented: ApprovalPresentation, call: CallFacts, *, idempotency_key: str | None = None
    ) -> VerifiedApproval:
        """Check an approval presented on a decide call against that call and the stored record.

        With a grant: signature (constant time) and form; binding to ``call`` and the presented
        approval id (constant time; the call's input may be the requested or the approved one);
        expiry; the record approved and not used yet (or used by this same attempt: the same
        ``idempotency_key``); and every claim equal to the claims the stored record yields
        (approvers, quorum, reasons, revision, edit, answer id, times). Without a grant: a
        denied approval of this very call yields its approver's reason, an expired one
        ``APPROVAL_EXPIRED``, anything else ``GRANT_MISSING``. Raises ``ApprovalRejected``
        (-> deny) or ``DependencyUnavailable`` (503, Redis down: fail closed). The grant is not
        used up here; ``consume`` does that once the policy allowed the call.
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
        bound = claims.binding()
        as_approved = {**bound, "input_fingerprint": claims.approved_input_fingerprint}
        presents_approved = claims.approved_input_fingerprint is not None and same_binding(as_approved, expected)
        if not presents_approved and not same_binding(bound, expected):
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"grant is bound to another {differing(bound, expected)}")
        stored = self._store.load(call.tenant, claims.approval_id)
        if stored is None or stored.answer is None or stored.state not in ("approved", "used"):
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"approval record is {stored.state if stored else 'missing'}")
        if not same_binding(self._claims(stored).model_dump(mode="json"), claims.model_dump(mode="json")):
            raise ApprovalRejected(GRANT_INVALID, "invalid", "grant claims differ from the stored approval record")
        attempt = attempt_hash(idempotency_key)
        if stored.state == "used" and not (attempt and stored.used_by == attempt):
            raise ApprovalRejected(GRANT_USED, "used", "grant was used before")
        edit = stored.answer.edit
        if edit is None:
            return VerifiedApproval.of(claims, attempt=attempt)
        return VerifiedApproval.of(
            claims, attempt=attempt, approved_input=None if presents_approved else edit.input, changes=edit.changes
        )

    def _without_grant(self, approval_id: str, call: CallFacts) -> ApprovalRejected:
        approval = self._store.load(call.tenant, approval_id)
        if approval is None:
            return ApprovalRejected(GRANT_MISSING, "missing", "no grant, and no such approval")
        requested = approval.request.call().binding(approval_id)
        if not same_binding(requested, call.binding(approval_id)):
            return ApprovalRejected(GRANT_INVALID, "invalid", f"approval is for another {differing(requested, call.binding(approval_id))}")
        state = approval.state_at(self.now_ms())
        if state == "expired" and approval.answer is None:
            return ApprovalRejected(APPROVAL_EXPIRED, "expired", "the approval expired unanswered")
        if state != "denied" or approval.answer is None:
            return ApprovalRejected(GRANT_MISSING, "missing", f"no grant for an approval in state {state}")
        return ApprovalRejected(approval.answer.reason or DENIED_WITHOUT_REASON, "denied", "the approver denied this call")

    @staticmethod
    def covers(claims_reasons: tuple[str, ...], claims_quorum: int, needed: Requirement) -> bool:
        """Whether an approval given for ``claims_reasons`` at ``claims_quorum`` still covers
        what the policy asks now: every reason it gives was approved, at no smaller quorum."""
        return set(needed.reasons) <= set(claims_reasons) and needed.quorum <= claims_quorum

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

    # --- scoped grants -------------------------------------------------------------------------

    def standing_grant(
        self, call: CallFacts, call_input: dict[str, Any], conversation_id: str | None, needed: Requirement
    ) -> StandingApproval | None:
        """A standing scoped grant of this requester that covers this call (tool and version,
        conversation, constraints on ``call_input``, reasons and quorum, an approver role the
        policy names), counted as used (atomic: a grant revoked meanwhile does not count).
        None when there is none. Raises ``DependencyUnavailable`` (503)."""
        now = self.now_ms()
        for stored in self._store.scoped_grants(call.tenant, now):
            grant = stored.grant
            if stored.revoked or grant.requester != call.subject or (grant.tool, grant.version) != (call.tool, call.version):
                continue
            if grant.conversation_id is not None and grant.conversation_id != conversation_id:
                continue
            if not self.covers(grant.reasons, grant.quorum, needed) or not set(grant.approver_roles) & set(needed.approver_roles):
                continue
            if not constraints_hold(grant.constraints, call_input):
                continue
            if self._store.use_scoped(grant, now) != "ok":
                continue
            metrics.SCOPED_GRANT_USES.inc()
            return StandingApproval(
                approval_id=grant.approval_id, approver=grant.approver, grant_id=grant.grant_id,
                approver_roles=grant.approver_roles, approvers=stored.approvers or (grant.approver,),
            )
        return None

    def scoped_grants(self, caller: Subject) -> list[StoredScopedGrant]:
        """The caller's tenant's standing grants (approvers: all; others: their own). Raises
        ``DependencyUnavailable`` (503)."""
        grants = self._store.scoped_grants(caller.tenant, self.now_ms())
        if set(caller.roles) & set(self._default_roles):
            return grants
        return [g for g in grants if g.grant.requester == caller.id or set(caller.roles) & set(g.grant.approver_roles)]

    def revoke(self, caller: Subject, grant_id: str) -> StoredScopedGrant:
        """Revoke a standing grant of the caller's tenant: its requester, or a holder of an
        approver role (the default ones or the grant's). Raises ``NotFound`` (404),
        ``Forbidden`` (403), ``Conflict`` (409: revoked before), ``DependencyUnavailable``."""
        stored = self._store.scoped_grant(caller.tenant, grant_id)
        if stored is None:
            raise NotFound("no such grant")
        grant = stored.grant
        roles = set(caller.roles)
        if caller.id != grant.requester and not roles & (set(self._default_roles) | set(grant.approver_roles)):
            raise Forbidden("only the requester or an approver may revoke this grant")
        outcome = self._store.revoke_scoped(caller.tenant, grant_id, caller.id)
        if outcome == "missing":
            raise NotFound("no such grant")
        if outcome == "revoked":
            raise Conflict("this grant was already revoked")
        revoked = self._store.scoped_grant(caller.tenant, grant_id)
        if revoked is None:
            raise NotFound("no such grant")
        return revoked

    # --- expiry and escalation ------------------------------------------------------------------

    def sweep(self) -> tuple[int, int]:
        """Expire the approvals past their expiry (stored ``expired``: a retried call is denied
        and an answer refused) and escalate those past their escalation time, in every tenant;
        each one once across all workers (atomic), with its webhook. Returns (expired,
        escalated). Raises ``DependencyUnavailable`` (503)."""
        now = self.now_ms()
        expired = escalated = 0
        for tenant in self._store.tenants():
            for approval_id in self._store.due(tenant, "escalate", now):
                approval = self._store.load(tenant, approval_id)
                if approval is None:
                    self._store.drop_from_indexes(tenant, approval_id)
                elif self._store.escalate(tenant, approval_id, now):
                    escalated += 1
                    metrics.APPROVALS_ESCALATED.inc()
                    self._notify("approval.escalated", Approval(approval.request, approval.state, approval.answer,
                                                                 approval.votes, escalated=True))
            for approval_id in self._store.due(tenant, "expiry", now):
                approval = self._store.load(tenant, approval_id)
                if approval is None:
                    self._store.drop_from_indexes(tenant, approval_id)
                elif self._store.expire(approval, now):
                    expired += 1
                    metrics.APPROVALS_EXPIRED.inc()
                    self._notify("approval.expired", Approval(approval.request, "expired", None, approval.votes,
                                                               escalated=approval.escalated))
        return expired, escalated


def _proposal(fingerprint: str, scope: GrantScopeBody) -> str:
    """What an approval approves: the input (by fingerprint) and the scope, as one digest."""
    return hashlib.sha256(canonical_json({"input": fingerprint, "scope": scope.model_dump(mode="json")})).hexdigest()


def _constraint(constraint: Constraint) -> dict[str, Any]:
    """A constraint as stored: its one member."""
    return constraint.model_dump(mode="json")
