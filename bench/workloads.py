"""What the benchmark sends: tokens, request kinds, the realistic mix and its wrk configs.

Kinds of decide calls (all against the shipped policies and contracts, tenant ``acme``):

==========  ===============================================================  ===========
kind        call                                                             expected
==========  ===============================================================  ===========
allow       exportReport (read-only) by ``support_agent``                    200 allow
deny        exportReport by ``developer`` (role not granted)                 200 deny
approval    processPayment 5000 EUR by ``admin`` (over 1000), fresh key      200 user-approval
mutating    processPayment 1 EUR by ``admin``, fresh ``Idempotency-Key``;    200 allow
            when answered ``state: reserved``, followed by
            ``POST /v1/executions/<key>/complete`` with a result             (complete: 200)
replay      processPayment 100 EUR by ``admin`` with a key completed before  200 allow (replayed)
invalid     exportReport with end_date before start_date                     422
==========  ===============================================================  ===========

The mutating payment is 1 EUR so that a whole run stays under the shipped daily payment budget
of one subject (50000 EUR a day: 250 EUR payments spent it after 200 calls, and the rest were
denied). The mix per 102 decide calls: 60 allow, 15 deny, 10 approval, 10 mutating, 5 replay and 2
invalid, in one fixed shuffled order (``mix_deck``), plus one complete per reserved mutating call.
Workload (b) is the allow kind alone. Every call names a conversation
(``context.conversation_id``) that lasts ``CONVERSATION_CALLS`` calls of a wrk thread: the
gateway reads the conversation's history from the decision log for the policy.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Any

import jwt
import requests

from bench.stack import AUDIENCE, ISSUER

TENANT = "acme"
MIX_WEIGHTS = {"allow": 60, "deny": 15, "approval": 10, "mutating": 10, "replay": 5, "invalid": 2}
EXPECTED = {
    "allow": (200, "allow"),
    "deny": (200, "deny"),
    "approval": (200, "user-approval"),
    "mutating": (200, "allow"),
    "replay": (200, "allow"),
    "invalid": (422, "-"),
    "complete": (200, "-"),
}
REPLAY_KEYS = 20
#: Decide calls per conversation (``context.conversation_id``): the gateway reads the
#: conversation's history from the decision log on every call, so its length matters.
CONVERSATION_CALLS = 20

_REPORT = {"start_date": "2026-01-01", "end_date": "2026-03-31"}
_BODIES = {
    "allow": ("exportReport", _REPORT),
    "deny": ("exportReport", _REPORT),
    "approval": ("processPayment", {"amount": 5000, "currency": "EUR", "recipient": "acct_42"}),
    "mutating": ("processPayment", {"amount": 1, "currency": "EUR", "recipient": "acct_42"}),
    "replay": ("processPayment", {"amount": 100, "currency": "EUR", "recipient": "acct_7"}),
    "invalid": ("exportReport", {"start_date": "2026-03-31", "end_date": "2026-01-01"}),
}
ROLES = {
    "allow": "support_agent",
    "deny": "developer",
    "approval": "admin",
    "mutating": "admin",
    "replay": "admin",
    "invalid": "support_agent",
}


def mint_token(secret: str, role: str, *, sub: str | None = None, ttl_s: int = 4 * 3600, tenant: str = TENANT) -> str:
    """An HS256 bearer token for the bench gateway: ``tenant`` (``acme``), one role, ``ttl_s`` seconds."""
    now = int(time.time())
    claims = {
        "iss": ISSUER, "aud": AUDIENCE, "sub": sub or f"bench-{role}", "tenant": tenant, "roles": [role],
        "iat": now, "nbf": now, "exp": now + ttl_s, "jti": str(uuid.uuid4()),
    }
    return jwt.encode(claims, secret, algorithm="HS256", headers={"typ": "JWT"})


def decide_body(kind: str, conversation: str = "bench-1") -> str:
    """The compact JSON body of a decide call of ``kind`` in ``context.conversation_id``."""
    tool, tool_input = _BODIES[kind]
    body = {"tool": tool, "version": "1", "tool_call_id": f"call-{kind}", "input": tool_input,
            "context": {"conversation_id": conversation}}
    return json.dumps(body, separators=(",", ":"))


def tokens(secret: str) -> dict[str, str]:
    """One token per role used by the kinds."""
    return {role: mint_token(secret, role) for role in sorted(set(ROLES.values()))}


def mix_deck(weights: dict[str, int] = MIX_WEIGHTS, seed: int = 7) -> list[str]:
    """The kinds of one mix cycle in a fixed shuffled order (``sum(weights)`` entries)."""
    deck = [kind for kind, n in weights.items() for _ in range(n)]
    random.Random(seed).shuffle(deck)
    return deck


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def ceiling_config() -> dict[str, Any]:
    """wrk ``fixed`` config of workload (a): ``GET /healthz``, the bare JSON endpoint."""
    return {"method": "GET", "path": "/healthz", "headers": {}}


def decide_config(secret: str, *, threads: int = 1) -> dict[str, Any]:
    """wrk ``mix`` config of workload (b): only the read-only allow decision."""
    return mix_config(secret, [], threads=threads, deck=["allow"])


def mix_config(secret: str, replay_keys: list[str], *, rate: float = 0.0, threads: int = 1,
               timeline: bool = False, deck: list[str] | None = None) -> dict[str, Any]:
    """wrk ``mix`` config of workload (c) (or of ``deck``); ``rate`` > 0 paces it (requests/s
    over all threads). Conversations last ``CONVERSATION_CALLS`` calls of a wrk thread."""
    toks = tokens(secret)
    kinds: dict[str, Any] = {}
    for kind in MIX_WEIGHTS:
        spec: dict[str, Any] = {"method": "POST", "path": "/v1/decide", "headers": _headers(toks[ROLES[kind]]),
                                "body": decide_body(kind, "{{conversation}}")}
        if kind in ("approval", "mutating"):
            spec["key"] = "fresh"
        elif kind == "replay":
            spec["key"] = "replay"
            spec["replay_keys"] = " ".join(replay_keys) or "bench-replay-none"
        kinds[kind] = spec
    return {
        "deck": deck or mix_deck(),
        "kinds": kinds,
        "complete": {"path_prefix": "/v1/executions/", "headers": _headers(toks["admin"]),
                     "body": json.dumps({"result": {"status": "paid", "payment_id": "pay-bench"}})},
        "rate": float(rate),
        "threads": threads,
        "timeline": timeline,
        "conversation_calls": CONVERSATION_CALLS,
    }


def seed_replays(http: requests.Session, url: str, secret: str, count: int = REPLAY_KEYS) -> tuple[list[str], dict[str, bool]]:
    """Decide and complete ``count`` replay calls so that later calls with their keys replay.

    Returns the keys and the features seen: ``idempotency`` (the decide answer carried
    ``idempotency.state == "reserved"`` and the complete answered 200), ``approvals`` (a
    user-approval answer carried ``approval.approval_id``). Without idempotency the keys are
    still returned: the replay kind is then an ordinary allow. Raises ``requests.RequestException``.
    """
    admin = _headers(tokens(secret)["admin"])
    keys, reserved = [], True
    for i in range(count):
        key = f"bench-replay-{uuid.uuid4().hex[:12]}-{i}"
        resp = http.post(url + "/v1/decide", data=decide_body("replay"), headers={**admin, "Idempotency-Key": key}, timeout=10)
        state = (resp.json().get("idempotency") or {}).get("state") if resp.status_code == 200 else None
        if state == "reserved":
            done = http.post(url + f"/v1/executions/{key}/complete", headers=admin,
                             data=json.dumps({"result": {"status": "paid"}}), timeout=10)
            reserved = reserved and done.status_code == 200
        else:
            reserved = False
        keys.append(key)
    approval = http.post(url + "/v1/decide", data=decide_body("approval"),
                         headers={**admin, "Idempotency-Key": f"bench-probe-{uuid.uuid4().hex}"}, timeout=10)
    approvals = approval.status_code == 200 and bool((approval.json().get("approval") or {}).get("approval_id"))
    return keys, {"idempotency": reserved, "approvals": approvals}


def unexpected(responses: dict[tuple[str, int, str], int]) -> dict[str, int]:
    """Responses that are not what their kind expects, as ``{"kind:status:decision": n}``."""
    bad: dict[str, int] = {}
    for (kind, status, decision), n in responses.items():
        want = EXPECTED.get(kind)
        if want is None or status != want[0] or (want[1] != "-" and decision != want[1]):
            bad[f"{kind}:{status}:{decision}"] = bad.get(f"{kind}:{status}:{decision}", 0) + n
    return bad
