"""Property-based API test: schemathesis generates requests from /openapi.json and checks that
/v1/decide and /v1/tools never answer 500 and that every response matches the document."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from tests.support.calls import make_token


@pytest.fixture
def api_schema(app):
    loaded = schemathesis.openapi.from_wsgi("/openapi.json", app)
    return loaded.include(path_regex=r"^/v1/(decide|tools)$")


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
