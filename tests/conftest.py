"""Shared fixtures: real servers (Redis) and paths. Warnings are errors (pyproject)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.servers import RedisServer

PROJECT_ROOT = Path(__file__).resolve().parent.parent
POLICY_DIR = PROJECT_ROOT / "policies"
CONTRACTS_DIR = PROJECT_ROOT / "contracts"


def shared_dir() -> Path:
    """The read-only ``shared/`` folder beside the project (or ``TOOLGATE_SHARED_DIR``)."""
    return Path(os.environ.get("TOOLGATE_SHARED_DIR", PROJECT_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory):
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
