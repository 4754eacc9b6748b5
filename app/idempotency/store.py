"""The Redis state machine of one idempotency record (DESIGN §4).

    (none) --claim (policy allowed)--> processing --complete--------> completed (result replayed)
                                          |        --fail retryable--> (none)   (released)
                                          |        --fail final------> failed   (failure replayed)
                                          '--lease expires----------> outcome unknown:
                                               retry_safe contract: re-claimable;
                                               else 409 until ``toolgate idempotency resolve``

Redis layout: one hash tag per (tenant, subject, key) (``app.idempotency.keys.Scope``), so both keys of a
record sit in one Redis Cluster slot and every script stays single-slot.

    toolgate:idem:{<tag>}:record   hash: state, fp, token, subject, tool, version, decision
                                   (id of the reserving call), result, reason, *_ms times. TTL lease + retention while
                                   processing (it outlives the lease to remember an unknown
                                   outcome), then the retention.
    toolgate:idem:{<tag>}:lease    the owner token; TTL = the lease. Gone = lease expired.
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass
from typing import Any, Literal

import rfc8785

from app import metrics
from app.errors import Conflict, NotFound, ValidationFailed
from app.fingerprint import canonical_json
from app.idempotency import scripts
from app.idempotency.keys import Scope
from app.models import IdempotencyInfo
from app.redis_client import RedisConnection
from app.settings import IdempotencySettings
from app.timefmt import now_ms, rfc3339_ms

Resolution = Literal["completed", "released"]


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
    #: The decision id of this call: a reservation remembers it, so that the execution report
    #: can name the decision (and its receipt) it settles.
    decision_id: str | None = None


@dataclass(frozen=True)
class Report:
    """The state a tool-service report left the record in; ``expires_at`` is RFC 3339 (the
    retention end) for ``completed``/``failed``, None for ``released``; ``decision_id`` of the
    decide call that reserved the key (None for a reservation made before it was kept)."""

    state: Literal["completed", "failed", "released"]
    expires_at: str | None
    decision_id: str | None = None
    #: A failure reported while the reservation's lease was running, for the first time: only
    #: such a report gives the call's limit shares back (after the lease they stay spent).
    in_lease: bool = False


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


def _replay_info(key: str, stored: Stored) -> IdempotencyInfo:
    """The ``idempotency`` member of a replayed decide response."""
    if stored.state == "completed":
        return IdempotencyInfo(key=key, state="replayed", replayed=True, outcome="completed", result=stored.result)
    return IdempotencyInfo(key=key, state="replayed", replayed=True, outcome="failed", failure_reason=stored.reason)


class IdempotencyStore:
    """The Redis state machine. ``lease_s`` is the default lease (a contract may override it),
    ``retention_s`` how long settled records are kept (seconds).

    Every method raises ``DependencyUnavailable`` (503) when Redis fails or times out.
    """

    def __init__(self, redis: RedisConnection, *, lease_s: int, retention_s: int) -> None:
        self.redis = redis
        self.lease_s = lease_s
        self.retention_s = retention_s

    @classmethod
    def from_settings(cls, redis: RedisConnection, settings: IdempotencySettings) -> IdempotencyStore:
        """The store with the ``idempotency_*`` settings."""
        return cls(redis, lease_s=settings.idempotency_lease_s, retention_s=settings.idempotency_retention_s)

    def inspect(self, scope: Scope, fp: str, *, retry_safe: bool) -> Stored | None:
        """Read the record for a call with fingerprint ``fp`` (no write).

        Returns the settled record to replay, or None when the key is free or re-claimable.
        Raises ``Conflict``: 422 other fingerprint (not retryable); 409 in progress
        (retryable, ``retry_after_s`` = seconds left on the lease); 409 outcome unknown
        (not retryable, ``details.outcome = "unknown"``).
        """
        reply = self.redis.eval("idempotency inspect", scripts.INSPECT, scope.redis_keys, [fp, "1" if retry_safe else "0"])
        return _settled(reply)

    def claim(self, call: PendingCall) -> tuple[str, int] | Stored:
        """Atomically claim ``call.scope`` for ``call`` (state ``processing``).

        Returns ``(owner token, lease end in epoch ms)``, or the settled record when another
        call completed first. Raises ``Conflict`` like ``inspect`` when another call holds it.
        """
        token = secrets.token_urlsafe(24)
        now = now_ms()
        lease_ms = call.lease_s * 1000
        args: list[str | int] = [
            call.fingerprint, "1" if call.retry_safe else "0", token, lease_ms, self.retention_s * 1000, now,
            call.subject_id, call.tool, call.version, call.decision_id or "",
        ]
        reply = self.redis.eval("idempotency claim", scripts.CLAIM, call.scope.redis_keys, args)
        if reply[0] == "reserved":
            return token, now + lease_ms
        stored = _settled(reply)
        assert stored is not None, "a free key is always claimed"
        return stored

    def settle(self, call: PendingCall) -> IdempotencyInfo:
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
        return IdempotencyInfo(
            key=call.scope.key,
            state="reserved",
            reservation_token=token,
            lease_expires_at=rfc3339_ms(lease_end_ms),
            replayed=False,
        )

    def reserved_tool(self, scope: Scope, subject_id: str) -> tuple[str, str]:
        """``(qualified tool name, version)`` of the record ``subject_id`` holds at ``scope``
        (to pick the output schema of a report). Raises ``NotFound`` (404) when there is none or another
        subject holds it."""
        state, subject, tool, version = self.redis.run(
            "idempotency owner", lambda c: c.hmget(scope.redis_keys[0], ["state", "subject", "tool", "version"])
        )
        if state is None or subject != subject_id:
            raise NotFound("no execution with this key")
        return tool, version

    def describe(self, scope: Scope) -> dict[str, Any] | None:
        """What an operator may see of the record at ``scope`` (``toolgate idempotency show``):
        ``state`` (``processing``, ``outcome_unknown``, ``completed``, ``failed``), ``tool``,
        ``version``, ``reserved_at`` / ``settled_at`` (RFC 3339), ``lease_remaining_ms``,
        ``expires_in_s`` (the record's TTL), ``resolved_by``, ``failure_reason``, and
        ``result_bytes`` (the stored result's size: the result itself may hold customer data
        and is not shown). None when there is no record."""
        record, lease = scope.redis_keys

        def read(client: Any) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            pipe.hgetall(record)
            pipe.pttl(lease)
            pipe.ttl(record)
            replies: list[Any] = pipe.execute()
            return replies

        fields, lease_ms, ttl_s = self.redis.run("idempotency show", read)
        if not fields:
            return None
        state = fields.get("state")
        if state == "processing" and lease_ms <= 0:
            state = "outcome_unknown"
        return {
            "state": state,
            "tool": fields.get("tool"),
            "version": fields.get("version"),
            "reserved_at": rfc3339_ms(int(fields["reserved_at_ms"])) if "reserved_at_ms" in fields else None,
            "settled_at": rfc3339_ms(int(fields["settled_at_ms"])) if "settled_at_ms" in fields else None,
            "lease_remaining_ms": max(0, int(lease_ms)),
            "expires_in_s": int(ttl_s),
            "resolved_by": fields.get("resolved_by"),
            "failure_reason": fields.get("reason"),
            "result_bytes": len(fields["result"].encode()) if "result" in fields else None,
        }

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
        args: list[str | int] = [subject_id, token or "", encoded, self.retention_s * 1000, now_ms()]
        return self._report(self.redis.eval("idempotency complete", scripts.COMPLETE, scope.redis_keys, args))

    def fail(self, scope: Scope, subject_id: str, *, retryable: bool, reason: str, token: str | None = None) -> Report:
        """Report a failed execution: ``retryable`` releases the key (a retry may execute),
        otherwise the failure is kept ``retention_s`` and replayed. Same checks and errors as
        ``complete``."""
        args: list[str | int] = [subject_id, token or "", "1" if retryable else "0", reason, self.retention_s * 1000, now_ms()]
        return self._report(self.redis.eval("idempotency fail", scripts.FAIL, scope.redis_keys, args))

    @staticmethod
    def _report(reply: list[Any]) -> Report:
        status = reply[0]
        if status == "not_found":
            raise NotFound("no execution with this key")
        if status == "stale":
            raise Conflict("this reservation is no longer yours", details={"reason": "stale_reservation"})
        if status == "settled":
            raise Conflict("this execution was already reported", details={"state": reply[1]})
        reserved_by = (reply[2] if len(reply) > 2 else "") or None
        in_lease = len(reply) > 3 and int(reply[3]) == 1
        if status == "released":
            return Report("released", None, reserved_by, in_lease)
        return Report(status, rfc3339_ms(now_ms() + int(reply[1])), reserved_by, in_lease)

    def resolve(self, scope: Scope, resolution: Resolution) -> Resolution:
        """Operator decision on a record (``toolgate idempotency resolve``): ``completed``
        (executed; retries replay a null result) or ``released`` (not executed; a retry may
        run it). Returns the resolution. Raises ``NotFound`` (no record), ``Conflict`` (409,
        retryable, while a lease is still running; 409, not retryable, when releasing a record
        that the tool service reported completed: a retry would run the tool again. A record an
        operator resolved as completed may be released: that corrects the operator's own call)."""
        args: list[str | int] = [resolution, self.retention_s * 1000, now_ms()]
        reply = self.redis.eval("idempotency resolve", scripts.RESOLVE, scope.redis_keys, args)
        if reply[0] == "not_found":
            raise NotFound("no idempotency record for this tenant and key")
        if reply[0] == "in_flight":
            raise Conflict("the call is still in progress", retryable=True, retry_after_s=_seconds(int(reply[1])))
        if reply[0] == "completed_before":
            raise Conflict(
                "the call completed: releasing it would let a retry run it again",
                retryable=False,
                details={"state": "completed"},
            )
        resolved: Resolution = reply[0]
        return resolved
