"""Approvals in Redis: the key layout, the Lua scripts and the reads (DESIGN §5).

Every key of one tenant carries the same hash tag, so each script touches one Cluster slot; the
tenant is base64url-encoded inside the tag, so no tenant text can close the tag or reach another
tenant's keys::

    tg:{ap:<tenant b64url>}:rec:<approval_id>   hash    state, expires_at_ms, request (JSON),
                                                        vote:<approver> (JSON) per vote,
                                                        approvals (count), proposal (what
                                                        the quorum approves: input + scope),
                                                        answer (JSON), answer_id, escalated,
                                                        used_at_ms, used_by (SHA-256 of the
                                                        idempotency key)
    tg:{ap:<tenant b64url>}:pending             zset    pending approval ids by created_at_ms
                                                        (the inbox order, oldest first)
    tg:{ap:<tenant b64url>}:expiry              zset    pending approval ids by expires_at_ms
    tg:{ap:<tenant b64url>}:escalate            zset    pending approval ids by escalate_at_ms
    tg:{ap:<tenant b64url>}:req:<sha256 hex>    zset    one requester's pending ids by expiry
                                                        (the per-subject cap)
    tg:{ap:<tenant b64url>}:call:<sha256 hex>   string  approval_id of the pending approval of one
                                                        (requester, tool, version, tool_call_id,
                                                        input fingerprint), until it is answered
    tg:{ap:<tenant b64url>}:sg:<grant_id>       hash    grant (JSON), uses, revoked, revoked_by,
                                                        approvers (JSON list)
    tg:{ap:<tenant b64url>}:sgidx               zset    scoped grant ids by expires_at_ms
    tg:{ap-tenants}                             set     tenants that opened approvals (the sweeper's list)

Creating (or finding) a pending approval, casting a vote (the quorum is counted inside it),
expiring, escalating, marking a grant used and using or revoking a scoped grant are each one Lua
script, so racing answers, racing votes towards a quorum or twenty racing uses of one grant
have exactly one outcome. Records outlive their expiry by ``RECORD_GRACE_S`` so late readers see
``expired``/``used``. Every method raises ``DependencyUnavailable`` (503) when Redis fails, and
for a record it cannot read (a store fault, never a guess).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from app.approvals.records import (
    STORED_STATES,
    Approval,
    ApprovalAnswer,
    ApprovalRequest,
    CallFacts,
    ScopedGrant,
    StoredScopedGrant,
    Vote,
)
from app.errors import DependencyUnavailable
from app.fingerprint import canonical_json
from app.redis_client import LuaScript, RedisConnection
from app.vocabulary import APPROVAL_ID_PATTERN, SCOPED_GRANT_ID_PATTERN

#: How long a record stays readable after its approval (or grant) expired, in seconds.
RECORD_GRACE_S = 3600
#: At most this many approval ids are read per listing page or sweep.
LIST_SCAN_MAX = 1000
TENANTS_KEY = "tg:{ap-tenants}"
_APPROVAL_ID = re.compile(APPROVAL_ID_PATTERN)
_GRANT_ID = re.compile(SCOPED_GRANT_ID_PATTERN)

_CREATE = LuaScript(
    """
-- KEYS: 1 call pointer, 2 record, 3 pending, 4 expiry, 5 escalate, 6 requester's pending
-- ARGV: 1 approval_id, 2 request JSON, 3 expires_at_ms, 4 pointer ttl ms, 5 record ttl ms,
--       6 created_at_ms, 7 escalate_at_ms ('' for none), 8 requester's cap (0: none), 9 now_ms,
--       10 tenant's cap (0: none)
-- Capped: {'capped' | 'tenant_capped', the expiry (ms) of the oldest pending approval counted}.
local current = redis.call('GET', KEYS[1])
if current then return {'found', current} end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', ARGV[9])
local cap = tonumber(ARGV[8])
if cap > 0 and redis.call('ZCARD', KEYS[6]) >= cap then
  local first = redis.call('ZRANGE', KEYS[6], 0, 0, 'WITHSCORES')
  return {'capped', first[2]}
end
local tenant_cap = tonumber(ARGV[10])
if tenant_cap > 0 and redis.call('ZCOUNT', KEYS[4], '(' .. ARGV[9], '+inf') >= tenant_cap then
  local first = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. ARGV[9], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  return {'tenant_capped', first[2]}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
redis.call('HSET', KEYS[2], 'state', 'pending', 'expires_at_ms', ARGV[3], 'request', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[6], ARGV[3], ARGV[1])
if ARGV[7] ~= '' then redis.call('ZADD', KEYS[5], ARGV[7], ARGV[1]) end
for i = 3, 6 do
  if redis.call('EXISTS', KEYS[i]) == 1 and redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[5])
  end
end
return {'created', ARGV[1]}
"""
)

_CLEANUP = """
local function leave_pending(k, approval_id)
  redis.call('ZREM', k[2], approval_id)
  redis.call('ZREM', k[3], approval_id)
  redis.call('ZREM', k[4], approval_id)
  redis.call('ZREM', k[5], approval_id)
  if redis.call('GET', k[6]) == approval_id then redis.call('DEL', k[6]) end
end
"""

_VOTE = LuaScript(
    _CLEANUP
    + """
-- KEYS: 1 record, 2 pending, 3 expiry, 4 escalate, 5 requester's pending, 6 call pointer,
--       7 scoped grant (unused unless ARGV[11] ~= ''), 8 scoped grant index
-- ARGV: 1 now_ms, 2 approver, 3 vote JSON, 4 '1' approve | '0' deny, 5 proposal digest,
--       6 quorum, 7 final answer JSON, 8 answer id, 9 record ttl ms, 10 approval_id,
--       11 scoped grant JSON ('' for none), 12 scoped grant expires_at_ms, 13 scoped grant ttl ms,
--       14 scoped grant id
local current = redis.call('HMGET', KEYS[1], 'state', 'expires_at_ms', 'proposal')
if not current[1] then return 'missing' end
if current[1] ~= 'pending' then return 'answered' end
if tonumber(current[2]) <= tonumber(ARGV[1]) then return 'expired' end
if redis.call('HEXISTS', KEYS[1], 'vote:' .. ARGV[2]) == 1 then return 'voted' end
if ARGV[4] == '1' and current[3] and current[3] ~= ARGV[5] then return 'other_input' end
redis.call('HSET', KEYS[1], 'vote:' .. ARGV[2], ARGV[3])
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], 'proposal', ARGV[5])
  local count = redis.call('HINCRBY', KEYS[1], 'approvals', 1)
  if count < tonumber(ARGV[6]) then return 'counted' end
  redis.call('HSET', KEYS[1], 'state', 'approved', 'answer', ARGV[7], 'answer_id', ARGV[8])
  if ARGV[11] ~= '' then
    redis.call('HSET', KEYS[7], 'grant', ARGV[11], 'uses', 0, 'revoked', 0)
    redis.call('PEXPIRE', KEYS[7], ARGV[13])
    redis.call('ZADD', KEYS[8], ARGV[12], ARGV[14])
    if redis.call('PTTL', KEYS[8]) < tonumber(ARGV[13]) then redis.call('PEXPIRE', KEYS[8], ARGV[13]) end
  end
else
  redis.call('HSET', KEYS[1], 'state', 'denied', 'answer', ARGV[7], 'answer_id', ARGV[8])
end
redis.call('PEXPIRE', KEYS[1], ARGV[9])
leave_pending(KEYS, ARGV[10])
return 'decided'
"""
)

_EXPIRE = LuaScript(
    _CLEANUP
    + """
-- KEYS: 1 record, 2 pending, 3 expiry, 4 escalate, 5 requester's pending, 6 call pointer
-- ARGV: 1 now_ms, 2 approval_id
local current = redis.call('HMGET', KEYS[1], 'state', 'expires_at_ms')
if not current[1] then
  redis.call('ZREM', KEYS[2], ARGV[2]); redis.call('ZREM', KEYS[3], ARGV[2]); redis.call('ZREM', KEYS[4], ARGV[2])
  return 'missing'
end
if current[1] ~= 'pending' then leave_pending(KEYS, ARGV[2]); return 'answered' end
if tonumber(current[2]) > tonumber(ARGV[1]) then return 'not_due' end
redis.call('HSET', KEYS[1], 'state', 'expired')
leave_pending(KEYS, ARGV[2])
return 'expired'
"""
)

_ESCALATE = LuaScript(
    """
-- KEYS: 1 record, 2 escalate; ARGV: 1 now_ms, 2 approval_id
redis.call('ZREM', KEYS[2], ARGV[2])
local current = redis.call('HMGET', KEYS[1], 'state', 'expires_at_ms', 'escalated')
if current[1] ~= 'pending' or tonumber(current[2]) <= tonumber(ARGV[1]) or current[3] then return 'skip' end
redis.call('HSET', KEYS[1], 'escalated', ARGV[1])
return 'escalated'
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

_USE_SCOPED = LuaScript(
    """
-- KEYS: 1 scoped grant; ARGV: 1 now_ms, 2 expires_at_ms of the grant as read
local current = redis.call('HMGET', KEYS[1], 'grant', 'revoked')
if not current[1] then return 'missing' end
if current[2] == '1' then return 'revoked' end
if tonumber(ARGV[2]) <= tonumber(ARGV[1]) then return 'expired' end
redis.call('HINCRBY', KEYS[1], 'uses', 1)
return 'ok'
"""
)

_REVOKE_SCOPED = LuaScript(
    """
-- KEYS: 1 scoped grant; ARGV: 1 revoked by
if redis.call('HEXISTS', KEYS[1], 'grant') == 0 then return 'missing' end
if redis.call('HGET', KEYS[1], 'revoked') == '1' then return 'revoked' end
redis.call('HSET', KEYS[1], 'revoked', '1', 'revoked_by', ARGV[1])
return 'ok'
"""
)


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

    @property
    def expiry(self) -> str:
        return f"{self._prefix}expiry"

    @property
    def escalate(self) -> str:
        return f"{self._prefix}escalate"

    def requester(self, requester: str) -> str:
        return f"{self._prefix}req:{hashlib.sha256(requester.encode('utf-8')).hexdigest()}"

    def call(self, call: CallFacts) -> str:
        digest = hashlib.sha256(canonical_json(call.binding(""))).hexdigest()
        return f"{self._prefix}call:{digest}"

    def scoped(self, grant_id: str) -> str:
        return f"{self._prefix}sg:{grant_id}"

    @property
    def scoped_index(self) -> str:
        return f"{self._prefix}sgidx"

    def lifecycle(self, request: ApprovalRequest) -> list[str]:
        """The keys a vote or an expiry touches, in the scripts' order (KEYS 1-6)."""
        return [self.record(request.approval_id), self.pending, self.expiry, self.escalate,
                self.requester(request.requester), self.call(request.call())]


def _unreadable(what: str, exc: Exception | None = None) -> DependencyUnavailable:
    detail = f"{what} is unreadable" + (f": {type(exc).__name__}" if exc else "")
    return DependencyUnavailable(log_detail=detail)


def _parse(tenant: str, approval_id: str, fields: dict[str, str]) -> Approval | None:
    """An ``Approval`` from a record hash (None when the hash is empty)."""
    if not fields:
        return None
    try:
        request = ApprovalRequest.model_validate_json(fields["request"])
        answer = ApprovalAnswer.model_validate_json(fields["answer"]) if "answer" in fields else None
        votes = [Vote.model_validate_json(v) for k, v in fields.items() if k.startswith("vote:")]
    except (KeyError, ValidationError) as exc:
        raise _unreadable(f"approval record {approval_id}", exc) from None
    state = fields.get("state")
    if state not in STORED_STATES or request.tenant != tenant or request.approval_id != approval_id:
        raise _unreadable(f"approval record {approval_id} (state {state!r})")
    votes.sort(key=lambda v: (v.at_ms, v.approver))
    return Approval(
        request=request, state=state, answer=answer, votes=tuple(votes),  # type: ignore[arg-type]
        escalated="escalated" in fields, used_by=fields.get("used_by") or None,
    )


@dataclass(frozen=True)
class Created:
    """The outcome of ``ApprovalStore.create``: ``outcome`` is ``created``, ``found`` (one was
    pending for the same call: ``approval_id``), ``capped`` (the requester holds the most
    pending approvals allowed; ``retry_at_ms``: when her soonest one expires) or
    ``tenant_capped`` (the tenant does; ``retry_at_ms``: when its soonest one expires)."""

    outcome: str
    approval_id: str | None = None
    retry_at_ms: int | None = None


@dataclass(frozen=True)
class VoteWrite:
    """One vote to store: the vote, the approved fingerprint, the quorum, the final answer
    (stored when this vote decides) and the scoped grant it leaves (approvals only)."""

    vote: Vote
    quorum: int
    answer: ApprovalAnswer
    scoped: ScopedGrant | None = None


class ApprovalStore:
    """Approvals of every tenant in the process's ``RedisConnection``."""

    def __init__(self, redis: RedisConnection) -> None:
        self._redis = redis

    # --- approvals -----------------------------------------------------------------------

    def create(self, request: ApprovalRequest, *, max_pending_per_requester: int, now_ms: int,
               max_pending_per_tenant: int = 0) -> Created:
        """Write ``request`` as a pending approval unless one is pending for the same call, the
        requester already has ``max_pending_per_requester`` pending (outcome ``capped``) or the
        tenant ``max_pending_per_tenant`` unexpired ones (``tenant_capped``); 0: no cap."""
        keys = ApprovalKeys(request.tenant)
        outcome, value = self._redis.eval(
            "approval create",
            _CREATE,
            [keys.call(request.call()), keys.record(request.approval_id), keys.pending, keys.expiry, keys.escalate,
             keys.requester(request.requester)],
            [request.approval_id, request.model_dump_json(), request.expires_at_ms, request.ttl_s * 1000,
             (request.ttl_s + RECORD_GRACE_S) * 1000, request.created_at_ms,
             request.escalate_at_ms if request.escalate_at_ms is not None else "", max_pending_per_requester, now_ms,
             max_pending_per_tenant],
        )
        if outcome in ("capped", "tenant_capped"):
            return Created(outcome, retry_at_ms=int(float(value)))
        if outcome == "created":
            self._redis.run("approval tenants", lambda client: client.sadd(TENANTS_KEY, request.tenant))
        return Created(outcome, approval_id=value)

    def load(self, tenant: str, approval_id: str) -> Approval | None:
        """The approval ``approval_id`` of ``tenant``, or None (also for a malformed id)."""
        if not _APPROVAL_ID.match(approval_id):
            return None
        key = ApprovalKeys(tenant).record(approval_id)
        fields: dict[str, str] = self._redis.run("approval get", lambda client: client.hgetall(key))
        return _parse(tenant, approval_id, fields)

    def _load_many(self, tenant: str, approval_ids: list[str]) -> list[Approval]:
        keys = ApprovalKeys(tenant)

        def read(client: Any) -> list[dict[str, str]]:
            pipe = client.pipeline(transaction=False)
            for approval_id in approval_ids:
                pipe.hgetall(keys.record(approval_id))
            found: list[dict[str, str]] = pipe.execute()
            return found

        found = self._redis.run("approval list", read) if approval_ids else []
        approvals = (_parse(tenant, i, f) for i, f in zip(approval_ids, found, strict=True))
        return [a for a in approvals if a is not None]

    def pending_page(self, tenant: str, *, after: tuple[int, str] | None) -> tuple[list[Approval], bool]:
        """Up to ``LIST_SCAN_MAX`` approvals of the tenant's pending index, oldest first,
        strictly after ``after`` = (created_at_ms, approval_id); and whether more remain."""
        keys = ApprovalKeys(tenant)
        low = after[0] if after else "-inf"

        def read(client: Any) -> list[tuple[str, float]]:
            rows: list[tuple[str, float]] = client.zrangebyscore(
                keys.pending, low, "+inf", start=0, num=LIST_SCAN_MAX + 1, withscores=True
            )
            return rows

        rows = self._redis.run("approval list", read)
        if after is not None:
            rows = [(i, s) for i, s in rows if (int(s), i) > after]
        more = len(rows) > LIST_SCAN_MAX
        return self._load_many(tenant, [i for i, _ in rows[:LIST_SCAN_MAX]]), more

    def vote(self, request: ApprovalRequest, write: VoteWrite, now_ms: int) -> str:
        """Cast ``write.vote`` on a pending approval at ``now_ms``. Returns ``counted`` (an
        approval short of the quorum), ``decided`` (this vote approved at the quorum, or
        denied), ``missing``, ``answered`` (decided before), ``expired``, ``voted`` (this
        approver voted before) or ``other_input`` (an earlier approval approved another input)."""
        keys = ApprovalKeys(request.tenant)
        vote, answer, scoped = write.vote, write.answer, write.scoped
        scoped_ttl_ms = (scoped.expires_at_ms - now_ms) + RECORD_GRACE_S * 1000 if scoped else 0
        outcome: str = self._redis.eval(
            "approval vote",
            _VOTE,
            [*keys.lifecycle(request), keys.scoped(scoped.grant_id if scoped else "none"), keys.scoped_index],
            [now_ms, vote.approver, vote.model_dump_json(), "1" if vote.approved else "0", vote.proposal,
             write.quorum, answer.model_dump_json(), answer.decision_id, (request.ttl_s + RECORD_GRACE_S) * 1000,
             request.approval_id, scoped.model_dump_json() if scoped else "", scoped.expires_at_ms if scoped else 0,
             scoped_ttl_ms, scoped.grant_id if scoped else ""],
        )
        return outcome

    def mark_used(self, tenant: str, approval_id: str, answer_id: str, now_ms: int, attempt: str | None) -> str:
        """Mark the approved record used by ``attempt`` (a hashed idempotency key, or None).
        Returns ``ok`` (also for a repeat of the same attempt), ``used``, ``missing`` or
        ``mismatch`` (answered otherwise, or not approved)."""
        key = ApprovalKeys(tenant).record(approval_id)
        outcome: str = self._redis.eval("approval consume", _CONSUME, [key], [answer_id, now_ms, attempt or ""])
        return outcome

    # --- the sweeper ---------------------------------------------------------------------

    def tenants(self) -> list[str]:
        """Tenants that opened approvals (the sweeper walks them)."""
        members: set[str] = self._redis.run("approval tenants", lambda client: client.smembers(TENANTS_KEY))
        return sorted(members)

    def due(self, tenant: str, which: str, now_ms: int) -> list[str]:
        """Ids due at ``now_ms`` in the ``expiry`` or ``escalate`` index (at most ``LIST_SCAN_MAX``)."""
        keys = ApprovalKeys(tenant)
        key = keys.expiry if which == "expiry" else keys.escalate
        ids: list[str] = self._redis.run(
            "approval sweep", lambda client: client.zrangebyscore(key, "-inf", now_ms, start=0, num=LIST_SCAN_MAX)
        )
        return ids

    def expire(self, approval: Approval, now_ms: int) -> bool:
        """Store ``expired`` for a pending approval past its expiry; True for the one caller
        that did it."""
        keys = ApprovalKeys(approval.request.tenant)
        outcome = self._redis.eval(
            "approval expire", _EXPIRE, keys.lifecycle(approval.request), [now_ms, approval.request.approval_id]
        )
        return bool(outcome == "expired")

    def drop_from_indexes(self, tenant: str, approval_id: str) -> None:
        """Forget an id whose record is gone (expired out of Redis)."""
        keys = ApprovalKeys(tenant)

        def drop(client: Any) -> None:
            for key in (keys.pending, keys.expiry, keys.escalate):
                client.zrem(key, approval_id)

        self._redis.run("approval sweep", drop)

    def escalate(self, tenant: str, approval_id: str, now_ms: int) -> bool:
        """Mark a pending approval escalated; True for the one caller that did it."""
        keys = ApprovalKeys(tenant)
        outcome = self._redis.eval("approval escalate", _ESCALATE, [keys.record(approval_id), keys.escalate], [now_ms, approval_id])
        return bool(outcome == "escalated")

    # --- scoped grants -------------------------------------------------------------------

    def scoped_grants(self, tenant: str, now_ms: int) -> list[StoredScopedGrant]:
        """The tenant's scoped grants that have not expired, soonest expiry first (at most
        ``LIST_SCAN_MAX``); revoked ones included (they show as revoked until they expire)."""
        keys = ApprovalKeys(tenant)

        def read(client: Any) -> list[tuple[str, dict[str, str]]]:
            client.zremrangebyscore(keys.scoped_index, "-inf", now_ms)
            ids: list[str] = client.zrangebyscore(keys.scoped_index, now_ms, "+inf", start=0, num=LIST_SCAN_MAX)
            pipe = client.pipeline(transaction=False)
            for grant_id in ids:
                pipe.hgetall(keys.scoped(grant_id))
            return list(zip(ids, pipe.execute(), strict=True)) if ids else []

        rows = self._redis.run("scoped grants", read)
        return [g for g in (self._parse_scoped(tenant, i, f) for i, f in rows) if g is not None]

    def scoped_grant(self, tenant: str, grant_id: str) -> StoredScopedGrant | None:
        if not _GRANT_ID.match(grant_id):
            return None
        key = ApprovalKeys(tenant).scoped(grant_id)
        fields: dict[str, str] = self._redis.run("scoped grant", lambda client: client.hgetall(key))
        return self._parse_scoped(tenant, grant_id, fields)

    @staticmethod
    def _parse_scoped(tenant: str, grant_id: str, fields: dict[str, str]) -> StoredScopedGrant | None:
        if not fields:
            return None
        try:
            grant = ScopedGrant.model_validate_json(fields["grant"])
            uses = int(fields.get("uses", "0"))
        except (KeyError, ValueError, ValidationError) as exc:
            raise _unreadable(f"scoped grant {grant_id}", exc) from None
        if grant.tenant != tenant or grant.grant_id != grant_id:
            raise _unreadable(f"scoped grant {grant_id}")
        try:
            approvers = tuple(str(a) for a in json.loads(fields.get("approvers", "[]")))
        except ValueError as exc:
            raise _unreadable(f"scoped grant {grant_id}", exc) from None
        return StoredScopedGrant(
            grant, uses=uses, revoked=fields.get("revoked") == "1", revoked_by=fields.get("revoked_by"), approvers=approvers
        )

    def set_scoped_approvers(self, grant: ScopedGrant, approvers: tuple[str, ...]) -> None:
        """Store every approver of the quorum that left ``grant`` (read back after the vote)."""
        key = ApprovalKeys(grant.tenant).scoped(grant.grant_id)
        text = json.dumps(list(approvers))
        self._redis.run("scoped grant", lambda client: client.hset(key, "approvers", text))

    def use_scoped(self, grant: ScopedGrant, now_ms: int) -> str:
        """Count one use of a scoped grant: ``ok``, ``revoked``, ``expired`` or ``missing``."""
        key = ApprovalKeys(grant.tenant).scoped(grant.grant_id)
        outcome: str = self._redis.eval("scoped grant use", _USE_SCOPED, [key], [now_ms, grant.expires_at_ms])
        return outcome

    def revoke_scoped(self, tenant: str, grant_id: str, by: str) -> str:
        """Revoke a scoped grant: ``ok``, ``revoked`` (before) or ``missing``."""
        key = ApprovalKeys(tenant).scoped(grant_id)
        outcome: str = self._redis.eval("scoped grant revoke", _REVOKE_SCOPED, [key], [by])
        return outcome
