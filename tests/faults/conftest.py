"""Fault tests use the API fixtures (real app, Redis, JWKS, the OPA REST Data API test server),
and ``own_redis``: a Redis of one test alone, so that it can be stopped, hung and emptied."""

from collections.abc import Iterator

import pytest

from tests.api.conftest import (  # noqa: F401
    app,
    base_settings,
    client,
    empty_decision_log,
    jwks_server,
    make_app,
    opa_server,
    opa_test_server,
    shipped_contracts,
    shipped_engines,
    sidecar_client,
)
from tests.support.servers import RedisServer


@pytest.fixture
def own_redis(tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "own-redis").start()
    yield server
    server.stop()
