"""``ProvenanceStore``: the values of reported results, per subject and conversation, as keyed
digests in Redis (docs/session.md "Provenance"). Never a raw value: a value is stored as the
first 32 hex digits of HMAC-SHA256(tenant key, ``kind-class NUL key``) (``normalize.key``),
the tenant key being HMAC-SHA256(``provenance_secret``, ``"toolgate provenance" NUL tenant``),
so digests of one tenant say nothing about another's values.

Keys, in the subject's session slot (``app.session.keys``; ``<h>``: the first 32 hex digits of
the SHA-256 of the JSON ``["provenance", conversation id or null]``)::

    toolgate:sess:{<tag>}:prov:<h>        hash: digest -> its sources, JSON [[tool, pointer, label, decision id, ms], ...]
    toolgate:sess:{<tag>}:prov:<h>:order  sorted set: digest -> last time it was remembered (epoch ms)

A conversation keeps its newest ``provenance_max_values`` digests for
``provenance_retention_s``; a digest its newest ``MAX_SOURCES`` sources. ``remember`` returns
the labels of the values the count bound pushed out: the caller keeps them as untraced, as
those values can no longer be traced. One HMGET reads the
sources of every value of a call. Only the gateway writes them, from a completion report
bound by its reservation token to a call of the same tenant and subject, into that call's
conversation (``remember``). Every method raises ``DependencyUnavailable`` (503) when Redis
fails or times out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import orjson

from app.fingerprint import canonical_json
from app.redis_client import LuaScript, RedisConnection
from app.session.keys import SubjectKeys
from app.settings import Settings
from app.timefmt import now_ms

#: Sources kept per value, the newest.
MAX_SOURCES = 8
_KIND_CLASS = {"number": "amount"}

# KEYS: hash, order. ARGV: now_ms, retention_ms, max_values, max_sources, then digest and
# source JSON pairs. Appends each source to its digest's list (the newest max_sources kept),
# then drops digests older than the retention and beyond the newest max_values; both keys
# live a retention past their last write. Returns the labels of the digests the count bound
# dropped (each once).
REMEMBER = LuaScript("""
local now, retain, max_values, max_sources = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
for i = 5, #ARGV, 2 do
  local digest, source = ARGV[i], cjson.decode(ARGV[i + 1])
  local known = redis.call('HGET', KEYS[1], digest)
  local sources = known and cjson.decode(known) or {}
  sources[#sources + 1] = source
  while #sources > max_sources do table.remove(sources, 1) end
  redis.call('HSET', KEYS[1], digest, cjson.encode(sources))
  redis.call('ZADD', KEYS[2], now, digest)
end
local function drop(digests)
  for first = 1, #digests, 500 do
    local chunk = {unpack(digests, first, math.min(first + 499, #digests))}
    redis.call('HDEL', KEYS[1], unpack(chunk))
    redis.call('ZREM', KEYS[2], unpack(chunk))
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - retain))
local pushed_out = redis.call('ZRANGE', KEYS[2], 0, -(max_values + 1))
local labels, lost = {}, {}
for first = 1, #pushed_out, 500 do
  local chunk = {unpack(pushed_out, first, math.min(first + 499, #pushed_out))}
  for _, known in ipairs(redis.call('HMGET', KEYS[1], unpack(chunk))) do
    for _, source in ipairs(known and cjson.decode(known) or {}) do
      if not labels[source[3]] then labels[source[3]] = true; lost[#lost + 1] = source[3] end
    end
  end
end
drop(pushed_out)
redis.call('PEXPIRE', KEYS[1], retain)
redis.call('PEXPIRE', KEYS[2], retain)
return lost
""")


# KEYS: hash. ARGV: digests. Their sources (a script rather than HMGET: the gateway's script
# path, ``RedisConnection.eval``, leaves out redis-py's per-command wrappers).
READ = LuaScript("return redis.call('HMGET', KEYS[1], unpack(ARGV))")


@dataclass(frozen=True)
class Source:
    """Where a value was seen: a reported result of ``tool`` (decided as ``decision_id``), at
    the concrete ``pointer``, carrying ``label``."""

    tool: str
    pointer: str
    label: str
    decision_id: str

    def as_input(self) -> dict[str, str]:
        return {"tool": self.tool, "pointer": self.pointer, "label": self.label, "decision_id": self.decision_id}


@dataclass(frozen=True)
class Remembered:
    """One value of a reported result: its ``(kind, key)``, where it was and its label."""

    kind: str
    key: str
    pointer: str
    label: str


def _hash_key(keys: SubjectKeys, conversation: str | None) -> str:
    digest = hashlib.sha256(canonical_json(["provenance", conversation])).hexdigest()[:32]
    return f"{keys.prefix}:prov:{digest}"


def provenance_secret(settings: Settings) -> bytes:
    """``provenance_secret`` when set, else HMAC-SHA256(audit key-hash secret, "toolgate provenance")."""
    if settings.provenance_secret is not None:
        return settings.provenance_secret.get_secret_value().encode()
    base = settings.audit_key_hash_secret.get_secret_value().encode()
    return hmac.new(base, b"toolgate provenance", hashlib.sha256).digest()


class ProvenanceStore:
    """The remembered values of every subject's conversations (see the module docstring)."""

    def __init__(self, redis: RedisConnection, settings: Settings) -> None:
        self.redis = redis
        self.max_values = settings.provenance_max_values
        self.retention_ms = settings.provenance_retention_s * 1000
        secret = provenance_secret(settings)

        @lru_cache(maxsize=1024)
        def tenant_key(tenant: str) -> bytes:
            return hmac.new(secret, b"toolgate provenance\0" + tenant.encode(), hashlib.sha256).digest()

        @lru_cache(maxsize=8192)
        def digest(tenant: str, kind: str, value_key: str) -> str:
            message = f"{_KIND_CLASS.get(kind, kind)}\0{value_key}".encode()
            return hmac.new(tenant_key(tenant), message, hashlib.sha256).hexdigest()[:32]

        self._digest = digest

    def digest(self, tenant: str, kind: str, value_key: str) -> str:
        """The stored digest of the value ``value_key`` of ``kind`` for ``tenant`` (the
        worker's most recent 8192 kept: a conversation names the same values again and again)."""
        return self._digest(tenant, kind, value_key)

    def remember(
        self, keys: SubjectKeys, conversation: str | None, *, tool: str, decision_id: str, values: Iterable[Remembered]
    ) -> list[str]:
        """Remember ``values`` of the result of ``decision_id`` (a call of ``tool`` in
        ``conversation``); returns the labels of the values this pushed out of the conversation
        (its ``provenance_max_values`` newest kept), sorted."""
        now = now_ms()
        args: list[str | int] = [now, self.retention_ms, self.max_values, MAX_SOURCES]
        for value in values:
            source = json.dumps([tool, value.pointer, value.label, decision_id, now], separators=(",", ":"))
            args += [self.digest(keys.tenant, value.kind, value.key), source]
        if len(args) == 4:
            return []
        key = _hash_key(keys, conversation)
        lost = self.redis.eval("provenance remember", REMEMBER, [key, key + ":order"], args)
        return sorted(label.decode() if isinstance(label, bytes) else label for label in lost)

    def sources(self, keys: SubjectKeys, conversation: str | None, digests: Sequence[str]) -> dict[str, list[Source]]:
        """The sources of each of ``digests`` remembered in ``conversation`` within the
        retention (a digest never seen: absent), in one round trip."""
        if not digests:
            return {}
        key = _hash_key(keys, conversation)
        found = self.redis.eval("provenance read", READ, [key], list(digests))
        since = now_ms() - self.retention_ms
        sources: dict[str, list[Source]] = {}
        for digest, text in zip(digests, found, strict=True):
            if text:
                kept = [Source(*entry[:4]) for entry in orjson.loads(text) if entry[4] > since]
                if kept:
                    sources[digest] = kept
        return sources
