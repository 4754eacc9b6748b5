"""Helpers for idempotency tests through HTTP: createTicket calls, reports, Redis inspection."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

from redis.cluster import RedisCluster

from app.redis_client import RedisConnection
from tests.support.calls import auth, decide_body

SUPPORT = ["support_agent"]


def ticket_input(title: str = "Printer jammed", mutation_id: str | None = None) -> dict[str, Any]:
    """createTicket input with a fresh ``clientMutationId`` unless one is given."""
    return {
        "title": title,
        "description": "The printer on floor 3 is jammed.",
        "priority": "high",
        "clientMutationId": mutation_id or str(uuid.uuid4()),
    }


def ticket(ticket_id: str = "T-1001", title: str = "Printer jammed") -> dict[str, Any]:
    """A createTicket result that matches the contract's output schema."""
    return {"id": ticket_id, "title": title, "status": "open", "priority": "high"}


def decide(client, tool: str, tool_input: dict[str, Any], *, key: str | None = None, sub: str = "u-1",
           tenant: str = "acme", roles: list[str] | None = None):
    """``POST /v1/decide`` with a fresh token; ``key`` becomes the ``Idempotency-Key`` header."""
    headers = auth(sub, tenant, roles if roles is not None else SUPPORT)
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post("/v1/decide", json=decide_body(tool, tool_input), headers=headers)


def report(client, key: str, outcome: str, body: dict[str, Any], *, sub: str = "u-1", tenant: str = "acme",
           roles: list[str] | None = None):
    """``POST /v1/executions/<key>/<outcome>`` (``complete`` or ``fail``), the key URL-encoded."""
    return client.post(
        f"/v1/executions/{quote(key, safe='')}/{outcome}",
        json=body,
        headers=auth(sub, tenant, roles if roles is not None else SUPPORT),
    )


def idempotency_keys(redis: RedisConnection) -> list[str]:
    """Every idempotency key name in Redis (all nodes of a cluster)."""
    def keys(client) -> list[str]:
        if isinstance(client, RedisCluster):
            return client.keys("toolgate:idem:*", target_nodes=RedisCluster.PRIMARIES)
        return client.keys("toolgate:idem:*")

    return sorted(redis.run("test", keys))
