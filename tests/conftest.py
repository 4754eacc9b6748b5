"""Shared fixtures: real servers and paths. Warnings are errors (pyproject).

Servers live for the whole session (one set per pytest-xdist worker) and are started on first
use; each test that asks for one gets it reset:

- ``redis_server``: a redis-server; ``redis_client`` flushes it (FLUSHALL) before the test.
- ``redis_cluster``: a 3-master Redis Cluster, every node flushed before the test.

No test mints a token at import or collection time (``tests.support.early_tokens``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.paths import CONTRACTS_DIR, POLICY_DIR, PROJECT_ROOT
from tests.support.redis_cluster import RedisClusterHarness
from tests.support.servers import RedisServer

__all__ = ["CONTRACTS_DIR", "POLICY_DIR", "PROJECT_ROOT"]
pytest_plugins = ["tests.support.early_tokens"]  # no token minted at import or collection time


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port for the whole session."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server: RedisServer):
    """A redis-py client on the session server, flushed before each test."""
    import redis

    client = redis.Redis.from_url(redis_server.url, socket_timeout=2)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_cluster_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterHarness]:
    """The session's Redis Cluster (three masters), started once; use ``redis_cluster``."""
    harness = RedisClusterHarness(tmp_path_factory.mktemp("cluster")).start()
    yield harness
    harness.stop()


@pytest.fixture
def redis_cluster(redis_cluster_nodes: RedisClusterHarness) -> RedisClusterHarness:
    """The session's Redis Cluster with every node flushed before the test."""
    redis_cluster_nodes.flush()
    return redis_cluster_nodes
