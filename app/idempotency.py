"""Idempotency (DESIGN §4): keys, fingerprints and the Redis state machine of one tool call.

A record is scoped by (tenant, key) and bound to the fingerprint of the first call that used
the key. Its states:

    (none) --claim (policy allowed)--> processing --complete--------> completed (result replayed)
                                          |        --fail retryable--> (none)   (released)
                                          |        --fail final------> failed   (failure replayed)
                                          '--lease expires----------> outcome unknown:
                                               retry_safe contract: re-claimable;
                                               else 409 until ``toolgate idempotency resolve``

Redis layout: one hash tag per (tenant, key), so both keys of a record sit in one Redis
Cluster slot and every script stays single-slot. The tag is the SHA-256 of the RFC 8785 JSON
``[tenant, key]``; the caller's key (which may hold ``*``, ``{``, ``:``, spaces...) never
appears in a key name, so it cannot address another record.

    toolgate:idem:{<tag>}:record   hash: state, fp, token, subject, tool, version, result,
                                   reason, *_ms times. TTL lease + retention while
                                   processing (it outlives the lease to remember an unknown
                                   outcome), then the retention.
    toolgate:idem:{<tag>}:lease    the owner token; TTL = the lease. Gone = lease expired.

Every state change is one Lua script (``app.redis_client.LuaScript``): the check and the
write happen in Redis, atomically; complete, fail and re-claim compare-and-set on the owner
token. Nothing is read in Python and then written.

The decide pipeline calls ``prepare`` before the policy (conflicts and Redis outages end the
call there) and ``IdempotencyStore.settle`` after an ``allow`` (reserve, or replay).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

import rfc8785

from app import metrics
from app.contracts import ToolContract
from app.errors import Conflict, NotFound, ValidationFailed
from app.fingerprint import canonical_json, fingerprint
from app.models import Subject
from app.redis_client import LuaScript, RedisConnection

# No comma: servers and proxies join repeated header lines with commas, so "a,b" could be
# two keys that another hop would read differently.
_KEY = re.compile(r"[\x20-\x2b\x2d-\x7e]{1,255}")

Resolution = Literal["completed", "released"]


def validate_key(key: str) -> str:
    """Return ``key`` if it is 1-255 printable ASCII characters (0x20-0x7E) other than a comma.

    Raises ``ValidationFailed`` (400). Never touches Redis.
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValidationFailed(
            "idempotency key must be 1-255 printable ASCII characters without a comma",
            http_status=400,
            details={"problems": [{"path": "/headers/Idempotency-Key", "message": "not 1-255 printable ASCII without a comma"}]},
        )
    return key


def call_key(header_key: str | None, contract: ToolContract | None, normalized_input: dict[str, Any]) -> str | None:
    """The idempotency key of a decide call: the ``Idempotency-Key`` header, else the input
    field the contract names (``idempotency_key_field``, e.g. createTicket's
    ``clientMutationId``), else None.

    Raises ``ValidationFailed`` (400) for a malformed key, and when a registered mutating
    tool has none.
    """
    if header_key is not None:
        return validate_key(header_key)
    key_field = contract.meta.idempotency_key_field if contract else None
    if key_field and normalized_input.get(key_field) is not None:
        return validate_key(normalized_input[key_field])
    if contract is not None and contract.meta.mutating:
        raise ValidationFailed(
            "this tool changes things: send an Idempotency-Key header",
            http_status=400,
            details={"problems": [{"path": "/headers/Idempotency-Key", "message": "required for a mutating tool"}]},
        )
    return None


@dataclass(frozen=True)
class Scope:
    """Where one record lives: the tenant and the caller's (validated) key."""

    tenant: str
    key: str

    @property
    def tag(self) -> str:
        """Hex SHA-256 of the RFC 8785 JSON ``[tenant, key]``: the Redis Cluster hash tag."""
        return hashlib.sha256(canonical_json([self.tenant, self.key])).hexdigest()

    @property
    def redis_keys(self) -> tuple[str, str]:
        """``(record key, lease key)``, both in the slot of ``{tag}``."""
        prefix = f"toolgate:idem:{{{self.tag}}}"
        return f"{prefix}:record", f"{prefix}:lease"


@dataclass(frozen=True)
class Stored:
    """A settled record, replayed to retries: ``completed`` with the tool's ``result``
    (``None`` when an operator resolved it), or ``failed`` with the ``reason``."""

    state: Literal["completed", "failed"]
    result: Any = None
    reason: str | None = None


@dataclass(frozen=True)
class PendingCall:
    """A decide call that carries an idempotency key, as checked before the policy.

    ``stored`` is the settled record to replay if the policy allows; None means the key is
    free (or re-claimable) and is claimed on allow. ``lease_s`` in seconds.
    """

    scope: Scope
    fingerprint: str
    subject_id: str
    tool: str
    version: str
    lease_s: int
    retry_safe: bool
    stored: Stored | None


@dataclass(frozen=True)
class Report:
    """The state a tool-service report left the record in; ``expires_at`` is RFC 3339 (the
    retention end) for ``completed``/``failed``, None for ``released``."""

    state: Literal["completed", "failed", "released"]
    expires_at: str | None


_CLASSIFY = """
local function classify(record, lease, fp, retry_safe)
  local f = redis.call('HMGET', record, 'state', 'fp', 'result', 'reason')
  if not f[1] then return {'fresh'} end
  if f[2] ~= fp then return {'mismatch'} end
  if f[1] == 'processing' then
    local ttl = redis.call('PTTL', lease)
    if ttl > 0 then return {'processing', ttl} end
    if retry_safe == '1' then return {'reclaimable'} end
    return {'unknown'}
  end
  if f[1] == 'completed' then return {'completed', f[3]} end
  return {'failed', f[4]}
end
"""

# KEYS: record, lease. ARGV: fingerprint, retry_safe ('1'|'0').
_INSPECT = LuaScript(_CLASSIFY + "return classify(KEYS[1], KEYS[2], ARGV[1], ARGV[2])")

# KEYS: record, lease. ARGV: fingerprint, retry_safe, token, lease_ms, retention_ms, now_ms,
# subject, tool, version. A free or re-claimable record becomes 'processing' for ``token``.
_CLAIM = LuaScript(_CLASSIFY + """
local c = classify(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if c[1] ~= 'fresh' and c[1] ~= 'reclaimable' then return c end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'processing', 'fp', ARGV[1], 'token', ARGV[3], 'subject', ARGV[7],
  'tool', ARGV[8], 'version', ARGV[9], 'reserved_at_ms', ARGV[6])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]) + tonumber(ARGV[5]))
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return {'reserved'}
""")

_OWNED = """
local f = redis.call('HMGET', KEYS[1], 'state', 'subject', 'token', 'result', 'reason')
if not f[1] or f[2] ~= ARGV[1] then return {'not_found'} end
if ARGV[2] ~= '' and ARGV[2] ~= f[3] then return {'stale'} end
"""

# KEYS: record, lease. ARGV: subject, token ('' = the current reservation), result JSON,
# retention_ms, now_ms. Repeating the same report is answered like the first one.
_COMPLETE = LuaScript(_OWNED + """
if f[1] == 'completed' and f[4] == ARGV[3] then return {'completed', redis.call('PTTL', KEYS[1])} end
if f[1] ~= 'processing' then return {'settled', f[1]} end
redis.call('HSET', KEYS[1], 'state', 'completed', 'result', ARGV[3], 'settled_at_ms', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('DEL', KEYS[2])
return {'completed', tonumber(ARGV[4])}
""")

# KEYS: record, lease. ARGV: subject, token, retryable ('1'|'0'), reason, retention_ms, now_ms.
_FAIL = LuaScript(_OWNED + """
if f[1] == 'failed' and ARGV[3] == '0' and f[5] == ARGV[4] then return {'failed', redis.call('PTTL', KEYS[1])} end
if f[1] ~= 'processing' then return {'settled', f[1]} end
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {'released'}
end
redis.call('HSET', KEYS[1], 'state', 'failed', 'reason', ARGV[4], 'settled_at_ms', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('DEL', KEYS[2])
return {'failed', tonumber(ARGV[5])}
""")

# KEYS: record, lease. ARGV: resolution ('completed'|'released'), retention_ms, now_ms.
_RESOLVE = LuaScript("""
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'not_found'} end
if state == 'processing' then
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl > 0 then return {'in_flight', ttl} end
end
if ARGV[1] == 'released' then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {'released'}
end
if state ~= 'completed' then
  redis.call('HSET', KEYS[1], 'state', 'completed', 'result', 'null', 'resolved_by', 'operator', 'settled_at_ms', ARGV[3])
  redis.call('HDEL', KEYS[1], 'reason')
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {'completed'}
""")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _rfc3339(epoch_ms: int) -> str:
    moment = dt.datetime.fromtimestamp(epoch_ms / 1000, dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _seconds(ms: int) -> int:
    return max(1, math.ceil(ms / 1000))


def _conflict(reply: list[Any]) -> Conflict:
    """The error for an INSPECT/CLAIM reply that blocks the call."""
    status = reply[0]
    kind = {"mismatch": "fingerprint_mismatch", "processing": "in_flight"}.get(status, "outcome_unknown")
    metrics.IDEMPOTENCY_CONFLICTS.labels(kind).inc()
    if status == "mismatch":
        return Conflict(
            "idempotency key was already used with another request",
            http_status=422,
            retryable=False,
            details={"reason": "fingerprint_mismatch"},
        )
    if status == "processing":
        return Conflict(
            "a call with this idempotency key is in progress; retry later",
            retryable=True,
            retry_after_s=_seconds(int(reply[1])),
            details={"state": "processing"},
        )
    return Conflict(
        "the outcome of the call with this idempotency key is unknown; an operator must resolve it",
        retryable=False,
        details={"outcome": "unknown"},
    )


def _settled(reply: list[Any]) -> Stored | None:
    """The settled record of an INSPECT/CLAIM reply, None for a free key; else raise."""
    if reply[0] == "completed":
        return Stored("completed", result=json.loads(reply[1]))
    if reply[0] == "failed":
        return Stored("failed", reason=reply[1])
    if reply[0] in ("fresh", "reclaimable"):
        return None
    raise _conflict(reply)


def _replay_info(key: str, stored: Stored) -> dict[str, Any]:
    """The ``idempotency`` member of a replayed decide response."""
    info: dict[str, Any] = {"key": key, "state": "replayed", "replayed": True, "outcome": stored.state}
    if stored.state == "completed":
        info["result"] = stored.result
    else:
        info["failure_reason"] = stored.reason
    return info


class IdempotencyStore:
    """The Redis state machine. ``lease_s`` is the default lease (a contract may override it),
    ``retention_s`` how long settled records are kept (seconds).

    Every method raises ``DependencyUnavailable`` (503) when Redis fails or times out.
    """

    def __init__(self, redis: RedisConnection, *, lease_s: int, retention_s: int) -> None:
        self.redis = redis
        self.lease_s = lease_s
        self.retention_s = retention_s

    def inspect(self, scope: Scope, fp: str, *, retry_safe: bool) -> Stored | None:
        """Read the record for a call with fingerprint ``fp`` (no write).

        Returns the settled record to replay, or None when the key is free or re-claimable.
        Raises ``Conflict``: 422 other fingerprint (not retryable); 409 in progress
        (retryable, ``retry_after_s`` = seconds left on the lease); 409 outcome unknown
        (not retryable, ``details.outcome = "unknown"``).
        """
        reply = self.redis.eval("idempotency inspect", _INSPECT, scope.redis_keys, [fp, "1" if retry_safe else "0"])
        return _settled(reply)

    def claim(self, call: PendingCall) -> tuple[str, int] | Stored:
        """Atomically claim ``call.scope`` for ``call`` (state ``processing``).

        Returns ``(owner token, lease end in epoch ms)``, or the settled record when another
        call completed first. Raises ``Conflict`` like ``inspect`` when another call holds it.
        """
        token = secrets.token_urlsafe(24)
        now = _now_ms()
        lease_ms = call.lease_s * 1000
        args = [
            call.fingerprint, "1" if call.retry_safe else "0", token, lease_ms, self.retention_s * 1000, now,
            call.subject_id, call.tool, call.version,
        ]
        reply = self.redis.eval("idempotency claim", _CLAIM, call.scope.redis_keys, args)
        if reply[0] == "reserved":
            return token, now + lease_ms
        stored = _settled(reply)
        assert stored is not None, "a free key is always claimed"
        return stored

    def settle(self, call: PendingCall) -> dict[str, Any]:
        """After the policy allowed ``call``: replay its settled record, or claim the key.

        Returns the ``idempotency`` member of the decide response: ``{key, state: "reserved",
        reservation_token, lease_expires_at (RFC 3339), replayed: false}`` or ``{key, state:
        "replayed", replayed: true, outcome, result | failure_reason}``. Raises ``Conflict``
        when another call claimed the key meanwhile.
        """
        outcome = call.stored or self.claim(call)
        if isinstance(outcome, Stored):
            metrics.IDEMPOTENCY_REPLAYS.inc()
            return _replay_info(call.scope.key, outcome)
        metrics.IDEMPOTENCY_RESERVATIONS.inc()
        token, lease_end_ms = outcome
        return {
            "key": call.scope.key,
            "state": "reserved",
            "reservation_token": token,
            "lease_expires_at": _rfc3339(lease_end_ms),
            "replayed": False,
        }

    def reserved_tool(self, scope: Scope, subject_id: str) -> tuple[str, str]:
        """``(tool, version)`` of the record ``subject_id`` holds at ``scope`` (to pick the
        output schema of a report). Raises ``NotFound`` (404) when there is none or another
        subject holds it."""
        state, subject, tool, version = self.redis.run(
            "idempotency owner", lambda c: c.hmget(scope.redis_keys[0], "state", "subject", "tool", "version")
        )
        if state is None or subject != subject_id:
            raise NotFound("no execution with this key")
        return tool, version

    def complete(self, scope: Scope, subject_id: str, result: Any, *, token: str | None = None) -> Report:
        """Store ``result`` (JSON value) for the reservation, kept ``retention_s``.

        ``token`` compare-and-sets on the owner; None applies to the current reservation. A
        repeat of the same report succeeds again. Raises ``NotFound`` (404: no record, or
        another subject's), ``Conflict`` (409, not retryable: the reservation is no longer
        the caller's, or the record is settled otherwise), ``ValidationFailed`` (422: the
        result holds a number RFC 8785 cannot encode).
        """
        try:
            encoded = canonical_json(result).decode()
        except rfc8785.CanonicalizationError:
            raise ValidationFailed(
                "result cannot be canonicalized",
                http_status=422,
                details={"problems": [{"path": "/result", "message": "numbers must be finite and integers within ±2**53"}]},
            ) from None
        args = [subject_id, token or "", encoded, self.retention_s * 1000, _now_ms()]
        return self._report(self.redis.eval("idempotency complete", _COMPLETE, scope.redis_keys, args))

    def fail(self, scope: Scope, subject_id: str, *, retryable: bool, reason: str, token: str | None = None) -> Report:
        """Report a failed execution: ``retryable`` releases the key (a retry may execute),
        otherwise the failure is kept ``retention_s`` and replayed. Same checks and errors as
        ``complete``."""
        args = [subject_id, token or "", "1" if retryable else "0", reason, self.retention_s * 1000, _now_ms()]
        return self._report(self.redis.eval("idempotency fail", _FAIL, scope.redis_keys, args))

    @staticmethod
    def _report(reply: list[Any]) -> Report:
        status = reply[0]
        if status == "not_found":
            raise NotFound("no execution with this key")
        if status == "stale":
            raise Conflict("this reservation is no longer yours", details={"reason": "stale_reservation"})
        if status == "settled":
            raise Conflict("this execution was already reported", details={"state": reply[1]})
        if status == "released":
            return Report("released", None)
        return Report(status, _rfc3339(_now_ms() + int(reply[1])))

    def resolve(self, scope: Scope, resolution: Resolution) -> Resolution:
        """Operator decision on a record (``toolgate idempotency resolve``): ``completed``
        (executed; retries replay a null result) or ``released`` (not executed; a retry may
        run it). Returns the resolution. Raises ``NotFound`` (no record) and ``Conflict``
        (409, retryable, while a lease is still running)."""
        args = [resolution, self.retention_s * 1000, _now_ms()]
        reply = self.redis.eval("idempotency resolve", _RESOLVE, scope.redis_keys, args)
        if reply[0] == "not_found":
            raise NotFound("no idempotency record for this tenant and key")
        if reply[0] == "in_flight":
            raise Conflict("the call is still in progress", retryable=True, retry_after_s=_seconds(int(reply[1])))
        return reply[0]


def prepare(
    store: IdempotencyStore,
    *,
    header_key: str | None,
    subject: Subject,
    tool: str,
    version: str,
    contract: ToolContract | None,
    normalized_input: dict[str, Any],
) -> PendingCall | None:
    """Step 5 of decide: find the call's key and check its record before the policy runs.

    Returns None for a call without a key (read-only or unregistered tools; Redis is not
    touched), else the ``PendingCall`` to settle after an allow. Raises ``ValidationFailed``
    (400 missing/malformed key, checked before Redis), ``Conflict`` (see
    ``IdempotencyStore.inspect``) and ``DependencyUnavailable`` (503, Redis down).
    """
    key = call_key(header_key, contract, normalized_input)
    if key is None:
        return None
    scope = Scope(subject.tenant, key)
    fp = fingerprint(subject.tenant, subject.id, tool, version, normalized_input)
    meta = contract.meta if contract else None
    retry_safe = bool(meta and meta.retry_safe)
    return PendingCall(
        scope=scope,
        fingerprint=fp,
        subject_id=subject.id,
        tool=tool,
        version=version,
        lease_s=(meta.lease_s if meta and meta.lease_s else store.lease_s),
        retry_safe=retry_safe,
        stored=store.inspect(scope, fp, retry_safe=retry_safe),
    )
