"""Where the session lives in Redis (docs/session.md "Redis keys").

One hash tag per (tenant, subject): the hex SHA-256 of the RFC 8785 JSON ``[tenant, subject]``,
so the caller-chosen names (subject ids, conversation ids, limit ids) never appear in a key
name, and every key of one subject sits in one Redis Cluster slot::

    toolgate:sess:{<tag>}:timeline    sorted set: decision id -> decision time (epoch ms)
    toolgate:sess:{<tag>}:events      hash: decision id -> the call's event (JSON)
    toolgate:sess:{<tag>}:outcomes    hash: decision id -> its execution report (JSON)
    toolgate:sess:{<tag>}:args        hash: decision id -> redacted arguments (the recent calls only)
    toolgate:sess:{<tag>}:shares      hash: decision id -> the limit shares it holds (JSON)
    toolgate:sess:{<tag>}:limit:<h>   sorted set: "<decision id>:<units>" -> reservation time (ms)
    toolgate:sess:{<tag>}:limit:<h>:sum  string: the units of that set's members
    toolgate:sess:{<tag>}:rate:<h>    string: the GCRA theoretical arrival time (epoch ms)

A tenant's rate limits have a tag of their own (``["tenant", tenant]``)::

    toolgate:rate:{<tenant tag>}:<h>  string: the GCRA theoretical arrival time (epoch ms)

``<h>`` is the first 32 hex digits of the SHA-256 of what names the limit (its id, scope and,
for a per-conversation limit, the conversation id).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property, lru_cache

from app.fingerprint import canonical_json
from app.models import LimitSpec


def _digest(value: object) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


@dataclass(frozen=True)
class SubjectKeys:
    """The session keys of one verified subject of one tenant."""

    tenant: str
    subject: str

    @staticmethod
    @lru_cache(maxsize=4096)
    def of(tenant: str, subject: str) -> SubjectKeys:
        """The keys of ``subject`` of ``tenant``, kept for the process's most recent 4096
        subjects: the key names are a SHA-256 of canonical JSON, worth computing once per
        subject rather than on every step of every call."""
        return SubjectKeys(tenant, subject)

    @cached_property
    def prefix(self) -> str:
        return f"toolgate:sess:{{{_digest([self.tenant, self.subject])}}}"

    @cached_property
    def events(self) -> tuple[str, str, str, str, str]:
        """``(timeline, events, outcomes, args, shares)``, the keys of every event script."""
        return tuple(f"{self.prefix}:{name}" for name in ("timeline", "events", "outcomes", "args", "shares"))  # type: ignore[return-value]

    def limit(self, spec: LimitSpec, conversation: str | None) -> str:
        """The reservations of ``spec``: one set per subject, or per subject and conversation
        (a call without a conversation id belongs to the subject's one "no conversation")."""
        scope = [spec.id, spec.scope, conversation if spec.scope == "conversation" else None]
        return f"{self.prefix}:limit:{_digest(scope)[:32]}"

    def rate(self, rate_id: str) -> str:
        """The GCRA state of the subject's rate limit ``rate_id``."""
        return f"{self.prefix}:rate:{_digest(rate_id)[:32]}"


@dataclass(frozen=True)
class TenantKeys:
    """The rate-limit keys of one tenant."""

    tenant: str

    def rate(self, rate_id: str) -> str:
        """The GCRA state of the tenant's rate limit ``rate_id``."""
        return f"toolgate:rate:{{{_digest(['tenant', self.tenant])}}}:{_digest(rate_id)[:32]}"
