"""Concurrency (DESIGN §4): 50 simultaneous decide calls with one key give exactly one
reservation; the others get 409 CONFLICT (retryable) or, once completed, the replay. Repeated
20 times in one process (50 threads), and 20 times through a real gunicorn with 2 workers."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.support.calls import decide_body
from tests.support.gateway import GatewayProcess
from tests.support.idempotency import SUPPORT, decide, report, ticket, ticket_input

CALLERS = 50
ROUNDS = 20


@pytest.fixture
def callers() -> Iterator[ThreadPoolExecutor]:
    """``CALLERS`` threads kept for every round, as a server keeps its request threads (the
    embedded engine is built once per thread)."""
    with ThreadPoolExecutor(CALLERS) as pool:
        yield pool


def _all_at_once(pool: ThreadPoolExecutor, call: Callable[[], tuple[int, dict]]) -> list[tuple[int, dict]]:
    """Run ``call`` on every thread of ``pool``, released together by a barrier; returns
    ``(status, body)`` of each."""
    barrier = threading.Barrier(CALLERS)

    def run() -> tuple[int, dict]:
        barrier.wait(timeout=60)
        return call()

    return [future.result() for future in [pool.submit(run) for _ in range(CALLERS)]]


def _exactly_one_reservation(results: list[tuple[int, dict]]) -> None:
    assert len(results) == CALLERS
    reserved = [body for status, body in results if status == 200 and body["idempotency"]["state"] == "reserved"]
    assert len(reserved) == 1, [(status, body.get("error")) for status, body in results]
    for status, body in results:
        if status != 200:
            assert status == 409, body
            assert body["error"]["code"] == "CONFLICT" and body["error"]["retryable"] is True
            assert body["error"]["retry_after_seconds"] >= 1
        elif body["idempotency"]["state"] != "reserved":
            assert body["idempotency"]["state"] == "replayed"


def _decide_in_app(app, tool_input: dict) -> tuple[int, dict]:
    """One createTicket decide call through ``app``'s test client: ``(status, body)``."""
    resp = decide(app.test_client(), "createTicket", tool_input)
    return resp.status_code, resp.get_json()


def test_50_threads_in_one_process_one_reservation_20_times(make_app, callers):
    # 50 request threads in one worker: the pool holds one Redis connection per thread.
    app = make_app(threads=CALLERS, redis_socket_timeout_ms=2000)
    for _ in range(ROUNDS):
        tool_input = ticket_input()
        call = functools.partial(_decide_in_app, app, tool_input)
        _exactly_one_reservation(_all_at_once(callers, call))
        done = report(app.test_client(), tool_input["clientMutationId"], "complete", {"result": ticket()})
        assert done.status_code == 200
        status, body = call()
        assert status == 200 and body["idempotency"]["state"] == "replayed"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, redis_server):
    """The gateway under gunicorn, 2 workers x 4 threads, development token settings."""
    workdir = tmp_path_factory.mktemp("gateway")
    process = GatewayProcess(
        {
            "TOOLGATE_REDIS_URL": redis_server.url,
            "TOOLGATE_REDIS_SOCKET_TIMEOUT_MS": "2000",
            "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
        },
        workers=2,
        threads=4,
    ).start()
    yield process
    process.stop()


def _decide_over_http(url: str, body: dict, headers: dict[str, str]) -> tuple[int, dict]:
    """One decide call to the gateway at ``url``: ``(status, body)``."""
    resp = requests.post(f"{url}/v1/decide", json=body, headers=headers, timeout=30)
    return resp.status_code, resp.json()


def test_50_clients_through_gunicorn_with_2_workers_one_reservation_20_times(gateway, callers):
    token = mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=SUPPORT, ttl_s=600)
    headers = {"Authorization": f"Bearer {token}"}
    for _ in range(ROUNDS):
        body = decide_body("createTicket", ticket_input())
        call = functools.partial(_decide_over_http, gateway.url, body, headers)
        _exactly_one_reservation(_all_at_once(callers, call))
