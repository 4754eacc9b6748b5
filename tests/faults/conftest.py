"""Fault fixtures: an OPA REST Data API test server answering from the embedded engine.

No ``opa`` binary can be installed on these machines; when one is on PATH,
``tests/api/test_engine_parity.py`` also runs against it.
"""

from __future__ import annotations

import pytest

from tests.api.conftest import app, base_settings, client, jwks_server, make_app  # noqa: F401
from tests.conftest import POLICY_DIR
from tests.support.opa_server import OpaTestServer


@pytest.fixture
def opa_server():
    server = OpaTestServer(POLICY_DIR)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def sidecar_client(make_app, opa_server):
    """A client of an app that uses the OPA sidecar engine (the test server)."""
    return make_app(engine="opa", opa_url=opa_server.url).test_client()
