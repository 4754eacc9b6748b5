"""Approvals in Redis: the key layout, the Lua scripts and the reads (DESIGN §5).

Every key of one tenant carries the same hash tag, so each script touches one Cluster slot; the
tenant is base64url-encoded inside the tag, so no tenant text can close the tag or reach another
tenant's keys::

    tg:{ap:<tenant b64url>}:rec:<approval_id>   hash    state, expires_at_ms, request (JSON),
                                                        answer (JSON), answer_id, used_at_ms,
                                                        used_by (SHA-256 of the idempotency key)
    tg:{ap:<tenant b64url>}:pending             zset    approval_id scored by expires_at_ms
    tg:{ap:<tenant b64url>}:call:<sha256 hex>   string  approval_id of the pending approval of one
                                                        (requester, tool, version, tool_call_id,
                                                        input fingerprint), until it is answered

Creating (or finding) a pending approval, answering it and marking its grant used are each one
Lua script, so two racing answers or twenty racing uses of one grant have exactly one winner.
Records outlive their expiry by ``RECORD_GRACE_S`` so late readers see ``expired``/``used``.
Every method raises ``DependencyUnavailable`` (503) when Redis fails, and for a record it
cannot read (a store fault, never a guess).
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from pydantic import ValidationError

from app.approvals.records import STORED_STATES, Approval, ApprovalAnswer, ApprovalRequest, CallFacts
from app.errors import DependencyUnavailable
from app.fingerprint import canonical_json
from app.redis_client import LuaScript, RedisConnection
from app.vocabulary import APPROVAL_ID_PATTERN

#: How long a record stays readable after its approval (or grant) expired, in seconds.
RECORD_GRACE_S = 3600
#: At most this many pending approvals are read per listing.
LIST_SCAN_MAX = 1000
_APPROVAL_ID = re.compile(APPROVAL_ID_PATTERN)

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
    """An ``Approval`` from a record hash (None when the hash is empty)."""
    if not fields:
        return None
    try:
        request = ApprovalRequest.model_validate_json(fields["request"])
        answer = ApprovalAnswer.model_validate_json(fields["answer"]) if "answer" in fields else None
    except (KeyError, ValidationError) as exc:
        raise DependencyUnavailable(log_detail=f"approval record {approval_id} is unreadable: {type(exc).__name__}") from None
    state = fields.get("state")
    if state not in STORED_STATES or request.tenant != tenant:
        raise DependencyUnavailable(log_detail=f"approval record {approval_id} has state {state!r}")
    return Approval(request=request, state=state, answer=answer)  # type: ignore[arg-type]


class ApprovalStore:
    """Approvals of every tenant in the process's ``RedisConnection``."""

    def __init__(self, redis: RedisConnection) -> None:
        self._redis = redis

    def create(self, request: ApprovalRequest) -> str:
        """Write ``request`` as a pending approval unless one is pending for the same call;
        returns the id of the pending approval (``request.approval_id`` when it is new)."""
        keys = ApprovalKeys(request.tenant)
        approval_id: str = self._redis.eval(
            "approval create",
            _CREATE,
            [keys.call(request.call()), keys.record(request.approval_id), keys.pending],
            [request.approval_id, request.model_dump_json(), request.expires_at_ms, request.ttl_s * 1000,
             (request.ttl_s + RECORD_GRACE_S) * 1000],
        )
        return approval_id

    def load(self, tenant: str, approval_id: str) -> Approval | None:
        """The approval ``approval_id`` of ``tenant``, or None (also for a malformed id)."""
        if not _APPROVAL_ID.match(approval_id):
            return None
        key = ApprovalKeys(tenant).record(approval_id)
        fields: dict[str, str] = self._redis.run("approval get", lambda client: client.hgetall(key))
        return _parse(tenant, approval_id, fields)

    def pending(self, tenant: str, now_ms: int) -> list[Approval]:
        """The tenant's approvals that are pending at ``now_ms``, soonest expiry first (at most
        ``LIST_SCAN_MAX`` are read); expired entries are dropped from the index on the way."""
        keys = ApprovalKeys(tenant)

        def read(client: Any) -> list[str]:
            client.zremrangebyscore(keys.pending, "-inf", now_ms)
            ids: list[str] = client.zrangebyscore(keys.pending, now_ms, "+inf", start=0, num=LIST_SCAN_MAX)
            return ids

        approval_ids = self._redis.run("approval list", read)

        def read_records(client: Any) -> list[dict[str, str]]:
            pipe = client.pipeline(transaction=False)
            for approval_id in approval_ids:
                pipe.hgetall(keys.record(approval_id))
            found: list[dict[str, str]] = pipe.execute()
            return found

        found = self._redis.run("approval list", read_records) if approval_ids else []
        approvals = (_parse(tenant, i, f) for i, f in zip(approval_ids, found, strict=True))
        return [a for a in approvals if a is not None and a.state_at(now_ms) == "pending"]

    def write_answer(self, answered: Approval, now_ms: int) -> str:
        """Store ``answered`` (state and answer) if the approval is still pending at ``now_ms``.
        Returns ``ok``, ``missing``, ``answered`` (answered before) or ``expired``."""
        request, answer = answered.request, answered.answer
        assert answer is not None
        keys = ApprovalKeys(request.tenant)
        outcome: str = self._redis.eval(
            "approval answer",
            _ANSWER,
            [keys.record(request.approval_id), keys.pending, keys.call(request.call())],
            [now_ms, answered.state, answer.model_dump_json(), answer.decision_id,
             (request.ttl_s + RECORD_GRACE_S) * 1000, request.approval_id],
        )
        return outcome

    def grant_state(self, tenant: str, approval_id: str) -> tuple[str | None, str | None, str | None]:
        """``(state, answer_id, used_by)`` of the record, each None when missing."""
        key = ApprovalKeys(tenant).record(approval_id)
        state, answer_id, used_by = self._redis.run(
            "approval check", lambda client: client.hmget(key, ["state", "answer_id", "used_by"])
        )
        return state, answer_id, used_by

    def mark_used(self, tenant: str, approval_id: str, answer_id: str, now_ms: int, attempt: str | None) -> str:
        """Mark the approved record used by ``attempt`` (a hashed idempotency key, or None).
        Returns ``ok`` (also for a repeat of the same attempt), ``used``, ``missing`` or
        ``mismatch`` (answered otherwise, or not approved)."""
        key = ApprovalKeys(tenant).record(approval_id)
        outcome: str = self._redis.eval("approval consume", _CONSUME, [key], [answer_id, now_ms, attempt or ""])
        return outcome
