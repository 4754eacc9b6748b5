"""Pending approvals in Redis, the approver's answer, and the checks of a presented grant (DESIGN §5).

Life of one approval (the ``state`` of its record)::

    pending --answer(approved)--> approved --consume--> used
       |    \\--answer(denied)---> denied
       \\-- expires_at passes: shown as ``expired``; can no longer be answered

Redis layout. Every key of one tenant carries the same hash tag, so each script touches one
Cluster slot; the tenant is base64url-encoded inside the tag, so no tenant text can close the tag
or reach another tenant's keys::

    tg:{ap:<tenant b64url>}:rec:<approval_id>   hash    state, expires_at_ms, request (JSON),
                                                        answer (JSON), answer_id, used_at_ms,
                                                        used_by (SHA-256 of the idempotency key)
    tg:{ap:<tenant b64url>}:pending             zset    approval_id scored by expires_at_ms
    tg:{ap:<tenant b64url>}:call:<sha256 hex>   string  approval_id of the pending approval of one
                                                        (requester, tool, version, tool_call_id,
                                                        input fingerprint), until it is answered

Creating (or finding) a pending approval, answering it and marking its grant used are each one
Lua script, so two racing answers or twenty racing uses of one grant have exactly one winner.
A grant is used by one *attempt*: a retry of that attempt with the same idempotency key may
present it again, so the idempotency layer can answer it (409 in flight, or the replay); any
other call gets "approval grant already used".
Records outlive their expiry by ``RECORD_GRACE_S`` so late readers see ``expired``/``used``.

Errors: ``NotFound`` (404: unknown id, or another tenant's), ``Forbidden`` (403: no approver
role, four-eyes), ``Conflict`` (409: already answered or expired), ``DependencyUnavailable``
(503: Redis, or no grant signing key). A presented approval that fails any check raises
``ApprovalRejected`` carrying a stable public reason; the pipeline turns it into a deny.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from app.errors import Conflict, DependencyUnavailable, Forbidden, NotFound
from app.fingerprint import canonical_json
from app.grants import GrantClaims, GrantExpired, GrantInvalid, GrantSigner
from app.models import (
    ApprovalAnswerView,
    ApprovalPresentation,
    ApprovalView,
    PolicyDecision,
    Subject,
    ToolRef,
)
from app.redis_client import LuaScript, RedisConnection

#: Stable reasons of a refused presented approval (the decide response's ``reasons``).
GRANT_INVALID = "approval grant invalid"
GRANT_EXPIRED = "approval grant expired"
GRANT_USED = "approval grant already used"
GRANT_MISSING = "approval grant missing"
#: The deny reason when a call needs approval but its input has no canonical form to bind.
UNBINDABLE_INPUT = "this input cannot be bound to an approval"
#: The reason of a denied approval whose approver gave none.
DENIED_WITHOUT_REASON = "the approver rejected this call"

#: How long a record stays readable after its approval (or grant) expired, in seconds.
RECORD_GRACE_S = 3600
#: At most this many pending approvals are read per listing.
LIST_SCAN_MAX = 1000
APPROVAL_ID_PATTERN = r"^ap_[A-Za-z0-9_-]{32}$"
_APPROVAL_ID = re.compile(APPROVAL_ID_PATTERN)

StoredState = Literal["pending", "approved", "denied", "used"]

_CREATE = LuaScript(
    """
-- KEYS: 1 call pointer, 2 record, 3 pending index
-- ARGV: 1 approval_id, 2 request JSON, 3 expires_at_ms, 4 pointer ttl ms, 5 record ttl ms
local current = redis.call('GET', KEYS[1])
if current then return current end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
redis.call('HSET', KEYS[2], 'state', 'pending', 'expires_at_ms', ARGV[3], 'request', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[3], ARGV[5]) end
return ARGV[1]
"""
)

_ANSWER = LuaScript(
    """
-- KEYS: 1 record, 2 pending index, 3 call pointer
-- ARGV: 1 now_ms, 2 new state, 3 answer JSON, 4 answer id, 5 record ttl ms, 6 approval_id
local current = redis.call('HMGET', KEYS[1], 'state', 'expires_at_ms')
if not current[1] then return 'missing' end
if current[1] ~= 'pending' then return 'answered' end
if tonumber(current[2]) <= tonumber(ARGV[1]) then return 'expired' end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'answer', ARGV[3], 'answer_id', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZREM', KEYS[2], ARGV[6])
if redis.call('GET', KEYS[3]) == ARGV[6] then redis.call('DEL', KEYS[3]) end
return 'ok'
"""
)

_CONSUME = LuaScript(
    """
-- KEYS: 1 record; ARGV: 1 answer id bound in the grant, 2 now_ms, 3 attempt hash ('' if none)
local current = redis.call('HMGET', KEYS[1], 'state', 'answer_id', 'used_by')
if not current[1] then return 'missing' end
if current[2] ~= ARGV[1] then return 'mismatch' end
if current[1] == 'used' then
  if ARGV[3] ~= '' and current[3] == ARGV[3] then return 'ok' end
  return 'used'
end
if current[1] ~= 'approved' then return 'mismatch' end
redis.call('HSET', KEYS[1], 'state', 'used', 'used_at_ms', ARGV[2], 'used_by', ARGV[3])
return 'ok'
"""
)


class ApprovalRejected(Exception):
    """A presented approval is refused. ``reason`` is the stable public text (one of the
    ``GRANT_*`` constants, or the approver's reason of a denial); ``kind`` is a metric label
    (invalid, expired, used, missing, denied); ``detail`` is for the log only."""

    def __init__(self, reason: str, kind: str, detail: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.detail = detail


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


@dataclass(frozen=True)
class VerifiedApproval:
    """A grant that passed every check except the final one-time use (``consume``).
    ``attempt`` is the hashed idempotency key of the call that presented it (or None)."""

    claims: GrantClaims
    attempt: str | None = None

    def policy_input(self) -> dict[str, Any]:
        """``input.approval`` of the policy input (DESIGN §3)."""
        return {
            "approval_id": self.claims.approval_id,
            "approved": True,
            "approver": {"id": self.claims.approver, "roles": list(self.claims.approver_roles)},
        }


class ApprovalRequest(BaseModel):
    """The immutable part of an approval, written once at creation. Times in epoch ms."""

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
            state=self.state_at(now_ms),
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


def rfc3339_ms(epoch_ms: int) -> str:
    """``2025-01-02T03:04:05.678Z`` for Unix epoch milliseconds."""
    seconds, ms = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def new_approval_id() -> str:
    """An unguessable approval id: ``ap_`` and 32 base64url characters (192 random bits)."""
    return "ap_" + secrets.token_urlsafe(24)


def attempt_hash(idempotency_key: str | None) -> str | None:
    """The stored form of the idempotency key of the call that uses a grant (SHA-256 hex)."""
    return hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest() if idempotency_key else None


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Constant-time equality of two bindings via their canonical JSON."""
    return hmac.compare_digest(canonical_json(a), canonical_json(b))


def _differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in a if a.get(k) != b.get(k))


class ApprovalKeys:
    """Redis key names of one tenant (one hash tag per tenant)."""

    def __init__(self, tenant: str) -> None:
        tag = base64.urlsafe_b64encode(tenant.encode("utf-8")).rstrip(b"=").decode("ascii")
        self._prefix = "tg:{ap:" + tag + "}:"

    def record(self, approval_id: str) -> str:
        return f"{self._prefix}rec:{approval_id}"

    @property
    def pending(self) -> str:
        return f"{self._prefix}pending"

    def call(self, call: CallFacts) -> str:
        digest = hashlib.sha256(canonical_json(call.binding(""))).hexdigest()
        return f"{self._prefix}call:{digest}"


def _parse(tenant: str, approval_id: str, fields: dict[str, str]) -> Approval | None:
    """An ``Approval`` from a record hash (None when the hash is empty). A record that cannot be
    read is a store fault: ``DependencyUnavailable`` (503), never a guess."""
    if not fields:
        return None
    try:
        request = ApprovalRequest.model_validate_json(fields["request"])
        answer = ApprovalAnswer.model_validate_json(fields["answer"]) if "answer" in fields else None
    except (KeyError, ValidationError) as exc:
        raise DependencyUnavailable(log_detail=f"approval record {approval_id} is unreadable: {type(exc).__name__}") from None
    state = fields.get("state")
    if state not in ("pending", "approved", "denied", "used") or request.tenant != tenant:
        raise DependencyUnavailable(log_detail=f"approval record {approval_id} has state {state!r}")
    return Approval(request=request, state=state, answer=answer)


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
        self._redis = redis
        self._signer = signer
        self._default_ttl_s = default_ttl_s
        self._default_roles = tuple(default_approver_roles)
        self._self_approve_roles = frozenset(self_approve_roles)
        self._clock = clock

    def now_ms(self) -> int:
        """The current Unix time in milliseconds."""
        return int(self._clock() * 1000)

    # --- reading ---------------------------------------------------------------------------

    def _load(self, tenant: str, approval_id: str) -> Approval | None:
        if not _APPROVAL_ID.match(approval_id):
            return None
        key = ApprovalKeys(tenant).record(approval_id)
        return _parse(tenant, approval_id, self._redis.run("approval get", lambda client: client.hgetall(key)))

    def _load_many(self, tenant: str, approval_ids: list[str]) -> list[Approval]:
        keys = ApprovalKeys(tenant)

        def read(client: Any) -> list[dict[str, str]]:
            pipe = client.pipeline(transaction=False)
            for approval_id in approval_ids:
                pipe.hgetall(keys.record(approval_id))
            return pipe.execute()

        found = self._redis.run("approval list", read) if approval_ids else []
        return [a for a in (_parse(tenant, i, f) for i, f in zip(approval_ids, found)) if a is not None]

    def _find(self, caller: Subject, approval_id: str) -> Approval:
        approval = self._load(caller.tenant, approval_id)
        if approval is None:
            raise NotFound("no such approval")
        return approval

    def _is_approver(self, caller: Subject, approval: Approval) -> bool:
        return bool(set(caller.roles) & set(approval.request.approver_roles))

    # --- creating --------------------------------------------------------------------------

    def request(
        self, call: CallFacts, decision: PolicyDecision, *, display_input: dict[str, Any], decision_id: str
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
        keys = ApprovalKeys(call.tenant)
        approval_id = self._redis.eval(
            "approval create",
            _CREATE,
            [keys.call(call), keys.record(request.approval_id), keys.pending],
            [request.approval_id, request.model_dump_json(), request.expires_at_ms, ttl_s * 1000,
             (ttl_s + RECORD_GRACE_S) * 1000],
        )
        if approval_id == request.approval_id:
            return Approval(request=request, state="pending", answer=None)
        existing = self._load(call.tenant, approval_id)
        if existing is None:
            raise DependencyUnavailable(log_detail=f"pending approval {approval_id} has no record")
        return existing

    # --- the approver's side ----------------------------------------------------------------

    def list_pending(self, caller: Subject, *, limit: int = 100) -> list[Approval]:
        """Pending approvals of the caller's tenant that the caller may answer, soonest expiry
        first, at most ``limit``. Raises ``Forbidden`` (403) when the caller holds no approver
        role (none of the default approver roles and none named by a pending approval) and
        ``DependencyUnavailable`` (503)."""
        keys = ApprovalKeys(caller.tenant)
        now = self.now_ms()

        def read(client: Any) -> list[str]:
            client.zremrangebyscore(keys.pending, "-inf", now)
            return client.zrangebyscore(keys.pending, now, "+inf", start=0, num=LIST_SCAN_MAX)

        pending = self._load_many(caller.tenant, self._redis.run("approval list", read))
        pending = [a for a in pending if a.state_at(now) == "pending"]
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
        keys = ApprovalKeys(caller.tenant)
        outcome = self._redis.eval(
            "approval answer",
            _ANSWER,
            [keys.record(approval_id), keys.pending, keys.call(request.call())],
            [now, answered.state, answer.model_dump_json(), decision_id,
             (request.ttl_s + RECORD_GRACE_S) * 1000, approval_id],
        )
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
        if not _same(claims.binding(), expected):
            fields = ", ".join(_differing(claims.binding(), expected))
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"grant is bound to another {fields}")
        key = ApprovalKeys(call.tenant).record(claims.approval_id)
        state, answer_id, used_by = self._redis.run(
            "approval check", lambda client: client.hmget(key, "state", "answer_id", "used_by")
        )
        attempt = attempt_hash(idempotency_key)
        if answer_id != claims.decision_id or state not in ("approved", "used"):
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"approval record is {state or 'missing'} or answered otherwise")
        if state == "used" and not (attempt and used_by == attempt):
            raise ApprovalRejected(GRANT_USED, "used", "grant was used before")
        return VerifiedApproval(claims, attempt)

    def _without_grant(self, approval_id: str, call: CallFacts) -> ApprovalRejected:
        approval = self._load(call.tenant, approval_id)
        if approval is None:
            return ApprovalRejected(GRANT_MISSING, "missing", "no grant, and no such approval")
        if approval.state != "denied" or approval.answer is None:
            return ApprovalRejected(GRANT_MISSING, "missing", f"no grant for an approval in state {approval.state}")
        if not _same(approval.request.call().binding(approval_id), call.binding(approval_id)):
            fields = ", ".join(_differing(approval.request.call().binding(approval_id), call.binding(approval_id)))
            return ApprovalRejected(GRANT_INVALID, "invalid", f"denied approval is for another {fields}")
        return ApprovalRejected(approval.answer.reason or DENIED_WITHOUT_REASON, "denied", "the approver denied this call")

    def consume(self, verified: VerifiedApproval) -> None:
        """Mark the approval's grant used by this attempt, atomically: of concurrent calls with
        different (or no) idempotency keys exactly one returns; calls of the attempt that used it
        return too. The others raise ``ApprovalRejected`` (``GRANT_USED``, or ``GRANT_INVALID``
        when the record changed). Raises ``DependencyUnavailable`` (503)."""
        claims = verified.claims
        key = ApprovalKeys(claims.tenant).record(claims.approval_id)
        args = [claims.decision_id, self.now_ms(), verified.attempt or ""]
        outcome = self._redis.eval("approval consume", _CONSUME, [key], args)
        if outcome == "used":
            raise ApprovalRejected(GRANT_USED, "used", "grant was used by a concurrent call")
        if outcome != "ok":
            raise ApprovalRejected(GRANT_INVALID, "invalid", f"approval record is {outcome} at use")
