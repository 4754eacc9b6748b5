"""Fixtures for tests through the HTTP interface: the real app with real parts.

- tokens signed with real RSA (RS256) and EC (ES256) keys, verified through a JWKS served on
  loopback (``jwks_server``);
- the real embedded OPA engine with the shipped ``policies/`` and ``contracts/``;
- a real Redis (``redis_server``, flushed per test) and a real SQLite decision log.

``make_app(**overrides)`` builds another app with changed settings (e.g. the OPA sidecar).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from tests.conftest import CONTRACTS_DIR, POLICY_DIR
from tests.support.calls import AUDIENCE, ISSUER
from tests.support.jwks_server import JwksServer
from tests.support.keys import EC1, K1, jwks
from tests.support.opa_server import OpaTestServer


@pytest.fixture(scope="session")
def jwks_server():
    """A JWKS on loopback publishing the RSA key k1 and the EC key ec1."""
    with JwksServer(jwks(K1, EC1)) as server:
        yield server


@pytest.fixture
def base_settings(jwks_server: JwksServer, redis_server, tmp_path) -> dict[str, Any]:
    """Keyword arguments of the test ``Settings``; tests may copy and change them."""
    return {
        "env": "development",
        "engine": "embedded",
        "policy_dir": POLICY_DIR,
        "contracts_dir": CONTRACTS_DIR,
        "jwt_algorithms": ["RS256", "ES256"],
        "jwt_issuer": ISSUER,
        "jwt_audience": AUDIENCE,
        "jwt_jwks_url": jwks_server.jwks_url,
        "jwt_jwks_cache_s": 2,
        "jwt_jwks_refetch_cooldown_s": 10,
        "redis_url": redis_server.url,
        # Every decide call reads and writes its session in Redis: a loaded test machine must
        # not turn a slow answer into a 503 (tests of timeouts set their own).
        "redis_socket_timeout_ms": 2000,
        "audit_dsn": str(tmp_path / "decisions.sqlite"),
        "checkpoint_file": tmp_path / "checkpoints.jsonl",
        "approval_keys": "k-test:" + "a" * 32 + ",k-old:" + "b" * 32,
        "log_level": "WARNING",
    }


@pytest.fixture
def make_app(base_settings: dict[str, Any], redis_client) -> Callable[..., Any]:
    """``make_app(**overrides)`` -> a Flask app built from the test settings plus overrides."""

    def build(**overrides: Any):
        app = create_app(Settings(**{**base_settings, **overrides}))
        app.config["TESTING"] = True
        return app

    return build


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def opa_server():
    """The OPA REST Data API test server (answers from the embedded engine; scriptable)."""
    server = OpaTestServer(POLICY_DIR)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def sidecar_client(make_app, opa_server):
    """A client of an app that uses the OPA sidecar engine (the test server)."""
    return make_app(engine="opa", opa_url=opa_server.url).test_client()
