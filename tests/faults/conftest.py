"""Fault tests use the API fixtures (real app, Redis, JWKS, the OPA REST Data API test server)."""

from tests.api.conftest import (  # noqa: F401
    app,
    base_settings,
    client,
    jwks_server,
    make_app,
    opa_server,
    sidecar_client,
)
