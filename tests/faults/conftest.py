"""Fault tests use the API fixtures (real app, Redis, JWKS, the OPA REST Data API test server)."""

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
