"""The HTTP layer over the same stand-ins (Flask's test client; no socket): the error body of
every code, ``require_subject``, ``X-Decision-Id``, and responses that match their models."""

from __future__ import annotations

import pytest

from app import create_app
from app.models import DecideResponse, DecisionListResponse, ErrorBody, ToolListResponse
from tests.support import fakes

READ = {"tool": "readFile", "version": "1", "input": {"path": "/srv/reports/q1.csv"}}


@pytest.fixture
def client(deps):
    app = create_app(deps.settings, deps)
    app.config["TESTING"] = True
    return app.test_client()


def auth(deps, **claims) -> dict[str, str]:
    return {"Authorization": fakes.bearer(deps.settings, **claims)}


def error(resp, status: int, code: str, *, retryable: bool) -> dict:
    assert resp.status_code == status
    body = ErrorBody.model_validate(resp.get_json())
    assert body.error.code == code and body.error.retryable is retryable
    assert body.request_id == resp.headers["X-Request-Id"]
    return resp.get_json()["error"]


def test_a_decision_matches_its_model_and_names_its_record(client, deps) -> None:
    resp = client.post("/v1/decide", json=READ, headers=auth(deps))
    assert resp.status_code == 200
    body = DecideResponse.model_validate(resp.get_json())
    assert resp.headers["X-Decision-Id"] == body.decision_id
    assert "approval" not in resp.get_json() and "idempotency" not in resp.get_json()


def test_without_a_token_every_endpoint_is_401_with_a_bearer_challenge(client) -> None:
    for method, path in [("post", "/v1/decide"), ("get", "/v1/tools"), ("get", "/v1/approvals"),
                         ("get", "/v1/decisions"), ("post", "/v1/executions/k/complete")]:
        resp = getattr(client, method)(path, json={})
        error(resp, 401, "UNAUTHENTICATED", retryable=False)
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert "X-Decision-Id" not in resp.headers


def test_a_refused_call_still_names_its_record(client, deps) -> None:
    resp = client.post("/v1/decide", json={**READ, "input": {"path": 5}}, headers=auth(deps))
    details = error(resp, 422, "VALIDATION_ERROR", retryable=False)["details"]
    assert [p["path"] for p in details["problems"]] == ["/path"]
    assert resp.headers["X-Decision-Id"]


def test_a_log_outage_is_a_503_without_a_decision_id(client, deps) -> None:
    deps.decision_log.failing = True
    resp = client.post("/v1/decide", json=READ, headers=auth(deps))
    error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert resp.headers["Retry-After"] == "1" and "X-Decision-Id" not in resp.headers


def test_listings_match_their_models(client, deps) -> None:
    tools = ToolListResponse.model_validate(client.get("/v1/tools", headers=auth(deps)).get_json())
    assert {(t.name, t.version) for t in tools.tools} >= {("readFile", "1"), ("processPayment", "1")}
    client.post("/v1/decide", json=READ, headers=auth(deps))
    page = client.get("/v1/decisions", headers=auth(deps, roles=("auditor",)))
    listing = DecisionListResponse.model_validate(page.get_json())
    assert [r.tool for r in listing.records] == ["readFile"]


def test_an_auditor_may_not_name_another_tenant_and_others_may_not_read(client, deps) -> None:
    other = client.get("/v1/decisions?tenant=globex", headers=auth(deps, roles=("auditor",)))
    error(other, 403, "FORBIDDEN", retryable=False)
    error(client.get("/v1/decisions", headers=auth(deps, roles=("admin",))), 403, "FORBIDDEN", retryable=False)


def test_an_unknown_route_and_a_wrong_method_are_structured(client) -> None:
    error(client.get("/v1/nothing"), 404, "NOT_FOUND", retryable=False)
    resp = client.get("/v1/decide")
    error(resp, 405, "VALIDATION_ERROR", retryable=False)
    assert "POST" in resp.headers["Allow"]


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/v1/approvals?limit=%C2%B2", "limit"),  # "²": str.isdigit() says yes, int() says no
        ("/v1/approvals?limit=%D9%A3", "limit"),  # an Arabic-Indic three
        ("/v1/approvals?limit=0", "limit"),
        ("/v1/approvals?limit=1&limit=2", "limit"),
        ("/v1/approvals?state=approved", "state"),
        ("/v1/approvals?colour=red", "colour"),
        ("/v1/decisions?limit=%C2%B2", "limit"),
        ("/v1/decisions?since=yesterday", "since"),
        ("/v1/decisions?cursor=x", "cursor"),
    ],
)
def test_every_malformed_query_parameter_is_a_400_naming_it(client, deps, path: str, parameter: str) -> None:
    roles = ("approver",) if path.startswith("/v1/approvals") else ("auditor",)
    details = error(client.get(path, headers=auth(deps, roles=roles)), 400, "VALIDATION_ERROR", retryable=False)["details"]
    assert [p["path"] for p in details["problems"]] == [parameter]
