"""The gateway answers through HTTP with real tokens, engine and contracts."""

from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.keys import EC1


def test_allow_with_rsa_token(client):
    body = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
    resp = client.post("/v1/decide", json=body, headers=auth(roles=["support_agent"]))
    assert resp.status_code == 200, resp.get_json()
    data = resp.get_json()
    assert data["decision"] == "allow"
    assert data["policy_revision"].startswith("sha256:")
    assert resp.headers["X-Request-Id"] == data["request_id"]


def test_allow_with_ec_token(client):
    body = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
    resp = client.post("/v1/decide", json=body, headers=auth(roles=["support_agent"], key=EC1))
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json()["decision"] == "allow"


def test_dry_run_reserves_nothing_and_creates_no_approval(app, client, redis_client):
    from app.audit.queries import DecisionQuery

    body = decide_body("processPayment", {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}, dry_run=True)
    resp = client.post("/v1/decide", json=body, headers=auth(roles=["admin"]))
    data = resp.get_json()
    assert resp.status_code == 200, data
    assert data["decision"] == "user-approval" and data["dry_run"] is True
    assert "approval" not in data and "idempotency" not in data
    assert redis_client.dbsize() == 0
    records = app.extensions["toolgate"].decision_reader.query(DecisionQuery(tenant="acme"), limit=5).records
    assert [r.event for r in records] == ["decide_dry_run"]


def test_dry_run_cannot_present_an_approval(client):
    body = decide_body("readFile", {"path": "/srv/a"}, dry_run=True, approval={"approval_id": "ap_x", "grant": "g"})
    resp = client.post("/v1/decide", json=body, headers=auth(roles=["support_agent"]))
    error = assert_error(resp, 422, "VALIDATION_ERROR", retryable=False, path=["/"])
    assert error["details"]["problems"][0]["message"] == "Value error, a dry run cannot present an approval"
