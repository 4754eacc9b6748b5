"""The gateway answers through HTTP with real tokens, engine and contracts."""

from tests.support.calls import auth, decide_body
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
