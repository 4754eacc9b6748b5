"""Property-based API test: schemathesis generates requests from /openapi.json and checks that
/v1/decide and /v1/tools never answer 500 and that every response matches the document.

Bodies holding an integer beyond +-(2**53 - 1) are not generated: JSON Schema cannot say it,
and the gateway refuses them on purpose with a 400 (``app.bodies.MAX_EXACT_INTEGER``,
tests/unit/test_canonical_json.py), which the positive-data check would take for a schema violation."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from app.bodies import MAX_EXACT_INTEGER
from tests.support.calls import make_token


def _exact(value: object) -> bool:
    """Whether every integer in ``value`` is one the gateway accepts."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) <= MAX_EXACT_INTEGER
    if isinstance(value, dict):
        return all(_exact(v) for v in value.values())
    if isinstance(value, list):
        return all(_exact(v) for v in value)
    return True


@pytest.fixture
def api_schema(app):
    loaded = schemathesis.openapi.from_wsgi("/openapi.json", app).include(path_regex=r"^/v1/(decide|tools)$")

    @loaded.hook
    def filter_body(context: schemathesis.HookContext, body: object) -> bool:
        return _exact(body)

    return loaded


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_api_matches_its_openapi_document(case):
    token = make_token(roles=["support_agent", "admin", "developer"])
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"})


def test_openapi_document_is_3_1_and_names_the_endpoints(client):
    doc = client.get("/openapi.json").get_json()
    assert doc["openapi"].startswith("3.1")
    assert {"/v1/decide", "/v1/tools", "/healthz", "/readyz"} <= set(doc["paths"])
    assert "DecideRequest" in doc["components"]["schemas"]
