"""``SessionStore``: the session's Redis operations, each one script (``app.session.scripts``)
on one subject's keys (or one tenant's, for tenant rate limits).

Every method raises ``DependencyUnavailable`` (503) when Redis fails or times out: without
the session no decision is made (fail closed), as for idempotency.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app import metrics
from app.errors import RateLimited
from app.models import LimitSpec, RateLimitSpec
from app.redis_client import RedisConnection
from app.session import scripts
from app.session.events import Event, Outcome
from app.session.keys import SubjectKeys, TenantKeys
from app.session.limits import gcra, max_units, settings_rate_limit
from app.session.view import Snapshot, parse
from app.settings import SessionSettings
from app.timefmt import now_ms


@dataclass(frozen=True)
class Share:
    """Units one call holds in one limit set: the set's key and the member ``<id>:<units>``."""

    key: str
    member: str


@dataclass(frozen=True)
class Admission:
    """What ADMIT answered: the ``shares`` reserved (none for a refusal, a dry run or a call
    without limits), or the limit that ``refused`` the call and the units already ``used``."""

    shares: tuple[Share, ...] = ()
    refused: LimitSpec | None = None
    used_units: int = 0


def _with_sum(limit_key: str) -> tuple[str, str]:
    """A limit set's key and the key of its running sum (same slot)."""
    return limit_key, limit_key + ":sum"


def _shares_json(shares: Sequence[Share]) -> str:
    return json.dumps([[share.key, share.member] for share in shares], separators=(",", ":"))


class SessionStore:
    """The session of every subject (see the module docstring); sizes from ``SessionSettings``."""

    def __init__(self, redis: RedisConnection, settings: SessionSettings) -> None:
        self.redis = redis
        self.windows_s = tuple(int(v) for v in settings.session_windows_s)
        self.retention_s = settings.session_retention_s
        self.max_events = settings.session_max_events
        self.recent = settings.session_recent_calls
        self.max_args_bytes = settings.session_max_args_bytes
        #: ``TOOLGATE_RATE_LIMIT_PER_SUBJECT``, applied to every decided call (None: unset).
        self.default_rate_limit = settings_rate_limit(settings.rate_limit_per_subject)

    def snapshot(
        self, keys: SubjectKeys, conversation: str | None, *, own_key: str | None = None, with_recent: bool = True
    ) -> Snapshot:
        """The subject's events within the retention window, newest first; ``own_key`` (the
        call's key digest) leaves the call's own earlier attempts out of the counts; the
        arguments of the recent calls are read only ``with_recent``."""
        now = now_ms()
        timeline, events, outcomes, args, _ = keys.events
        flat, found, reports, kept = self.redis.eval(
            "session snapshot", scripts.SNAPSHOT, [timeline, events, outcomes, args],
            [now - self.retention_s * 1000, self.max_events, self.recent if with_recent else 0],
        )
        stored = parse(flat, found, reports, kept)
        truncated = len(flat) // 2 > self.max_events
        return Snapshot(stored[: self.max_events], truncated, now, conversation, self.windows_s, self.recent, own_key)

    def admit(
        self,
        subject: SubjectKeys,
        *,
        decision_id: str,
        conversation: str | None,
        rates: Sequence[RateLimitSpec],
        limits: Sequence[tuple[LimitSpec, int]],
        commit: bool,
    ) -> Admission:
        """Count the call against ``rates`` and reserve ``limits`` (each with the units this call
        takes), atomically per scope: tenant rate limits first (their own slot), then the
        subject's rate limits and limits in one script. ``commit`` False checks only.

        Raises ``RateLimited`` (429, ``retry_after_s``, ``details.rate_limit``) when a rate
        limit is over; then nothing of the subject's is counted. Returns the ``Admission``.
        """
        now = now_ms()
        tenant_rates = [r for r in rates if r.scope == "tenant"]
        if tenant_rates:
            tenant = TenantKeys(subject.tenant)
            self._admit(now, [tenant.rate(r.id) for r in tenant_rates], tenant_rates, [], decision_id, commit)
        subject_rates = [r for r in rates if r.scope == "subject"]
        limit_keys = [subject.limit(spec, conversation) for spec, _ in limits]
        reply = self._admit(
            now, [subject.rate(r.id) for r in subject_rates] + [k for key in limit_keys for k in _with_sum(key)],
            subject_rates, limits, decision_id, commit,
        )
        if reply[0] == "limit_reached":
            spec = limits[int(reply[1]) - 1][0]
            metrics.SESSION_LIMITS.labels("refused").inc()
            return Admission(refused=spec, used_units=int(reply[2]))
        if not commit or not limits:
            return Admission()
        metrics.SESSION_LIMITS.labels("reserved").inc(len(limits))
        return Admission(shares=tuple(Share(key, f"{decision_id}:{units}") for key, (_, units) in zip(limit_keys, limits, strict=True)))

    def _admit(
        self, now: int, keys: list[str], rates: Sequence[RateLimitSpec], limits: Sequence[tuple[LimitSpec, int]],
        decision_id: str, commit: bool,
    ) -> list[Any]:
        args: list[str | int] = [now, len(rates), "1" if commit else "0", decision_id]
        for rate in rates:
            args.extend(gcra(rate))
        for spec, units in limits:
            args.extend([spec.window_s * 1000, max_units(spec), units])
        reply: list[Any] = self.redis.eval("session admit", scripts.ADMIT, keys, args)
        if reply[0] == "rate_limited":
            rate = rates[int(reply[1]) - 1]
            metrics.RATE_LIMITED.labels(rate.scope).inc()
            raise RateLimited(
                "rate limit exceeded; retry later",
                retry_after_s=max(1, math.ceil(int(reply[2]) / 1000)),
                details={"rate_limit": rate.id, "scope": rate.scope},
            )
        return reply

    def note(self, keys: SubjectKeys, decision_id: str, event: Event, *, args: str, shares: Sequence[Share]) -> None:
        """Add the event of a decided call (``args``: its redacted arguments as JSON, '' for
        none), linked to the ``shares`` it holds so that a failure report gives them back."""
        self.redis.eval(
            "session note", scripts.NOTE, keys.events,
            [decision_id, now_ms(), event.encode(), args if self.recent else "", _shares_json(shares) if shares else "",
             self.retention_s * 1000, self.max_events, self.recent],
        )

    def forget(self, keys: SubjectKeys, decision_id: str) -> None:
        """Remove the event of ``decision_id`` (a decision that was never answered)."""
        self.redis.eval("session forget", scripts.FORGET, keys.events, [decision_id])

    def give_back(self, keys: SubjectKeys, decision_id: str, shares: Sequence[Share], *, linked: bool) -> bool:
        """Give back ``shares`` once; ``linked``: they were noted with the event (so a report
        and an undo cannot both give them back). Returns False when already given back."""
        if not shares:
            return False
        expected = _shares_json(shares) if linked else ""
        released = self.redis.eval(
            "session give back", scripts.RELEASE, [keys.events[4], *(k for s in shares for k in _with_sum(s.key))],
            [decision_id, expected, *(s.member for s in shares)],
        )
        if released:
            metrics.SESSION_LIMITS.labels("given_back").inc(len(shares))
        return bool(released)

    def linked_shares(self, keys: SubjectKeys, decision_id: str) -> tuple[Share, ...]:
        """The shares noted with ``decision_id``'s event (none left: empty)."""
        text = self.redis.run("session shares", lambda client: client.hget(keys.events[4], decision_id))
        return tuple(Share(key, member) for key, member in json.loads(text)) if text else ()

    def settle(self, keys: SubjectKeys, decision_id: str, outcome: Outcome) -> bool:
        """Store the execution report of ``decision_id``; False when its event dropped out."""
        _, events, outcomes, _, _ = keys.events
        return bool(self.redis.eval(
            "session settle", scripts.SETTLE, [events, outcomes], [decision_id, outcome.encode(), self.retention_s * 1000]
        ))
