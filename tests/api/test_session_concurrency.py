"""Limits hold under concurrency (docs/session.md): through a real gunicorn with 2 workers x 4
threads, 20 simultaneous calls under "at most 3 tickets per conversation" allow exactly 3, and
3 simultaneous payments of 400 under a daily budget of 1000 (room for 2) allow exactly 2;
each repeated over fresh conversations and subjects. The policy is the test-only one of
``tests/support/session_policy.py``; snapshot rules alone would allow them all."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.support.gateway import GatewayProcess
from tests.support.idempotency import ticket_input
from tests.support.session_policy import write_session_policy

CALLERS = 20
ROUNDS = 5


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, redis_server):
    workdir = tmp_path_factory.mktemp("session-gateway")
    process = GatewayProcess(
        {
            "TOOLGATE_REDIS_URL": redis_server.url,
            "TOOLGATE_REDIS_SOCKET_TIMEOUT_MS": "2000",
            "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
            "TOOLGATE_POLICY_DIR": str(write_session_policy(workdir / "policy")),
        },
        workers=2,
        threads=4,
    ).start()
    yield process
    process.stop()


@pytest.fixture
def callers():
    with ThreadPoolExecutor(CALLERS) as pool:
        yield pool


def _all_at_once(pool: ThreadPoolExecutor, bodies: list[tuple[dict[str, Any], dict[str, str]]], url: str) -> list[tuple[int, dict]]:
    barrier = threading.Barrier(len(bodies))

    def send(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict]:
        barrier.wait(timeout=60)
        resp = requests.post(f"{url}/v1/decide", json=body, headers=headers, timeout=60)
        return resp.status_code, resp.json()

    return [f.result() for f in [pool.submit(send, body, headers) for body, headers in bodies]]


def _headers(subject: str, key: str) -> dict[str, str]:
    token = mint_dev_token(Settings(), sub=subject, tenant="acme", roles=["admin"], ttl_s=600)
    return {"Authorization": f"Bearer {token}", "Idempotency-Key": key}


def test_20_concurrent_calls_under_at_most_3_per_conversation_allow_exactly_3(gateway, callers):
    for _ in range(ROUNDS):
        subject, conversation = f"u-{uuid.uuid4().hex[:8]}", f"conv-{uuid.uuid4().hex[:8]}"
        bodies = []
        for _ in range(CALLERS):
            tool_input = ticket_input()
            body = {"tool": "createTicket", "input": tool_input, "context": {"conversation_id": conversation}}
            bodies.append((body, _headers(subject, tool_input["clientMutationId"])))
        results = _all_at_once(callers, bodies, gateway.url)
        assert {status for status, _ in results} == {200}, results
        decisions = Counter(body["decision"] for _, body in results)
        assert decisions == {"allow": 3, "deny": CALLERS - 3}, decisions
        assert {tuple(b["reasons"]) for _, b in results if b["decision"] == "deny"} == {
            ("limit tickets.conversation reached (3 of 3 used in 1h)",)
        }
        assert all(b["idempotency"]["state"] == "reserved" for _, b in results if b["decision"] == "allow")


def test_3_concurrent_payments_under_a_budget_for_2_allow_exactly_2(gateway, callers):
    for _ in range(ROUNDS):
        subject = f"u-{uuid.uuid4().hex[:8]}"
        bodies = [
            ({"tool": "processPayment", "input": {"amount": 400, "currency": "EUR", "recipient": "acct_42"},
              "context": {"conversation_id": f"conv-{uuid.uuid4().hex[:8]}"}}, _headers(subject, uuid.uuid4().hex))
            for _ in range(3)
        ]
        results = _all_at_once(callers, bodies, gateway.url)
        decisions = Counter(body["decision"] for _, body in results)
        assert decisions == {"allow": 2, "deny": 1}, results
