"""Fixtures of the client tests: one live gateway per module (``gateway``) on the session's
Redis and JWKS, clients for each test identity, and fresh keys and call ids.

Tests share the module's gateway and its Redis, so each uses its own idempotency keys and
tool call ids (``fresh``); ``redis_client`` flushing would pull reservations from under a
neighbour, so it is not used here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from toolgate_client import RetryPolicy, ToolgateClient

from tests.api.conftest import jwks_server  # noqa: F401
from tests.clients.gateway import ClientGateway, token_for

#: A short policy for tests that expect an error at once.
QUICK = RetryPolicy(max_attempts=3, deadline_s=5.0, base_delay_s=0.05, max_delay_s=0.5)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, redis_server, jwks_server) -> Iterator[ClientGateway]:  # noqa: F811
    """A gateway under gunicorn (1 worker x 4 threads) with the test JWKS and the session Redis."""
    gw = ClientGateway(redis_url=redis_server.url, jwks_url=jwks_server.jwks_url,
                       workdir=tmp_path_factory.mktemp("client-gateway")).start()
    yield gw
    gw.stop()


@pytest.fixture
def client_for(gateway: ClientGateway) -> Iterator[Callable[..., ToolgateClient]]:
    """``client_for("agent" | "admin" | "approver" | "auditor", retry=...)`` -> a client of
    ``gateway`` with that identity's token; closed after the test."""
    made: list[ToolgateClient] = []

    def make(name: str, *, retry: RetryPolicy = QUICK, **kwargs: Any) -> ToolgateClient:
        client = ToolgateClient(gateway.url, token_for(name), retry=retry, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def fresh() -> Callable[[str], str]:
    """``fresh("pay")`` -> a unique id such as ``pay-3f2a...`` for keys and tool call ids."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:16]}"
