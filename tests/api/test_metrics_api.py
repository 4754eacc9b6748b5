"""GET /metrics through HTTP: protected by the metrics token, and counting what decide does.

The app here runs in one process (prometheus-client's default registry); the multiprocess
sum is covered by tests/unit/test_metrics.py. Counters are global to the test process, so
each test compares values before and after its own calls.
"""

from __future__ import annotations

import re

import pytest

from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error

TOKEN = "metrics-token-for-tests-0123456789"
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def metrics_client(make_app):
    return make_app(metrics_token=TOKEN).test_client()


def _value(text: str, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` of an exposition (label order as rendered: sorted)."""
    label_text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(f"{name}{{{label_text}}}" if labels else name) + r" ([0-9.e+-]+)$"
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0


def _scrape(client) -> str:
    resp = client.get("/metrics", headers=SCRAPE)
    assert resp.status_code == 200
    return resp.get_data(as_text=True)


def test_metrics_is_off_without_a_token(client):
    assert_error(client.get("/metrics"), 404, "NOT_FOUND", retryable=False)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": f"Basic {TOKEN}"}],
    ids=["missing", "wrong", "other-scheme"],
)
def test_metrics_refuses_a_scrape_without_the_token(metrics_client, headers):
    assert_error(metrics_client.get("/metrics", headers=headers), 401, "UNAUTHENTICATED", retryable=False)


def test_metrics_with_the_token_is_the_prometheus_text_format(metrics_client):
    resp = metrics_client.get("/metrics", headers={"Authorization": f"bearer {TOKEN}"})
    assert resp.status_code == 200
    assert resp.content_type.startswith("text/plain")
    assert "# TYPE toolgate_phase_seconds histogram" in resp.get_data(as_text=True)


def test_a_decision_is_counted_with_its_phases(metrics_client):
    before = _scrape(metrics_client)
    body = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
    resp = metrics_client.post("/v1/decide", json=body, headers=auth(roles=["support_agent"]))
    assert resp.status_code == 200 and resp.get_json()["decision"] == "allow"
    after = _scrape(metrics_client)
    labels = {"tool": "readFile", "version": "1", "decision": "allow"}
    assert _value(after, "toolgate_decisions_total", **labels) == _value(before, "toolgate_decisions_total", **labels) + 1
    for phase in ("auth", "validate", "policy", "log", "total"):
        name = "toolgate_phase_seconds_count"
        assert _value(after, name, phase=phase) == _value(before, name, phase=phase) + 1, phase


def test_unregistered_tools_share_one_label_whatever_the_caller_sends(metrics_client):
    """Name and version of a dynamic tool are caller input: they never become label values."""
    body = decide_body("someDynamicTool", {"q": "x"}, version="v-attacker-chosen")
    resp = metrics_client.post("/v1/decide", json=body, headers=auth(roles=["developer"]))
    assert resp.status_code == 200
    text = _scrape(metrics_client)
    assert "someDynamicTool" not in text and "v-attacker-chosen" not in text
    assert 'tool="_dynamic",version="_dynamic"' in text


def test_errors_are_counted_by_code(metrics_client):
    before = _value(_scrape(metrics_client), "toolgate_errors_total", code="UNAUTHENTICATED")
    resp = metrics_client.post("/v1/decide", json=decide_body("readFile", {"path": "/a"}))
    assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)
    after = _value(_scrape(metrics_client), "toolgate_errors_total", code="UNAUTHENTICATED")
    assert after == before + 1


def test_http_requests_are_counted_by_route_template_never_by_raw_path(metrics_client):
    before = _scrape(metrics_client)
    approvals = {"method": "GET", "route": "/v1/approvals/<approval_id>", "status": "401"}
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    for suffix in ("ap_1", "ap_2", "anything-at-all"):
        metrics_client.get(f"/v1/approvals/{suffix}")
    metrics_client.get("/v1/no/such/path/" + "x" * 50)
    after = _scrape(metrics_client)
    assert _value(after, "toolgate_http_requests_total", **approvals) - _value(before, "toolgate_http_requests_total", **approvals) == 3
    assert _value(after, "toolgate_http_requests_total", **unmatched) - _value(before, "toolgate_http_requests_total", **unmatched) == 1
    assert "anything-at-all" not in after and "x" * 50 not in after
    assert _value(after, "toolgate_http_request_seconds_count", method="GET", route="unmatched") >= 1


def test_build_and_policy_revision_are_exposed(metrics_client):
    decision = metrics_client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/reports/q1.csv"}),
                                   headers=auth("u-1", "acme", ["support_agent"])).get_json()
    text = _scrape(metrics_client)
    assert _value(text, "toolgate_build_info", version="0.1.0") == 1
    assert _value(text, "toolgate_policy_revision_info", revision=decision["policy_revision"]) == 1
