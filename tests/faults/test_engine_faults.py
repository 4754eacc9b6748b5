"""Engine faults a real OPA cannot be made to produce, through the scriptable stand-in
(tests/support/opa_server.py, a real HTTP server speaking OPA's REST Data API from the embedded
engine): results of the wrong shape, a 500, a hang-up after the request, a fixed delay. The
faults a real OPA produces (killed, SIGSTOP, restarted, a bundle that does not compile) are in
test_real_opa_faults.py. Nothing is ever allowed without a definite policy answer (DESIGN §3)."""

from __future__ import annotations

import time

import pytest

from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.opa_server import Behaviour
from tests.support.servers import free_port

ALLOWED_CALL = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
def _support_agent() -> dict[str, str]:
    """A fresh token per request: a token minted at import would expire in a long suite."""
    return auth(roles=["support_agent"])


def _decide(client):
    return client.post("/v1/decide", json=ALLOWED_CALL, headers=_support_agent())


def test_control_the_sidecar_allows_this_call(sidecar_client, opa_server):
    resp = _decide(sidecar_client)
    assert resp.status_code == 200
    assert resp.get_json()["decision"] == "allow"
    assert resp.get_json()["policy_revision"] == opa_server.revision
    call = opa_server.calls[0]
    assert "strict-builtin-errors=true" in call["path"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({}, id="no-result"),
        pytest.param({"result": {"decision": "allow "}}, id="allow-with-space"),
        pytest.param({"result": {"decision": True}}, id="decision-true"),
        pytest.param({"result": True}, id="bare-true"),
        pytest.param({"result": "false"}, id="string-false"),
        pytest.param({"result": {"allow": "false"}}, id="legacy-allow-string"),
        pytest.param({"result": {"decision": "yes"}}, id="unknown-word"),
        pytest.param({"result": 1}, id="number"),
        pytest.param({"result": {}}, id="empty-object"),
        pytest.param({"result": ["allow"]}, id="list"),
        pytest.param({"result": {"decision": "allow", "reasons": "ok"}}, id="reasons-not-list"),
        pytest.param({"result": {"decision": "allow", "reasons": [1]}}, id="reasons-not-strings"),
    ],
)
def test_unusable_results_are_denied(sidecar_client, opa_server, body):
    """pc-05 / pc-07: the case catalogue words the reason differently ("unrecognized", "no policy
    result"); DESIGN §3 fixes it as "no policy decision", and DESIGN wins."""
    opa_server.script(Behaviour(body=body))
    resp = _decide(sidecar_client)
    assert resp.status_code == 200
    data = resp.get_json()
    assert data["decision"] == "deny"
    assert data["reasons"] == ["no policy decision"]


def test_explicit_decision_wins_over_legacy_field(sidecar_client, opa_server):
    """pc-11: {"decision": "deny", "allow": true, "reason": ...} is a deny with that reason."""
    opa_server.script(Behaviour(body={"result": {"decision": "deny", "allow": True, "reason": "explicit deny wins"}}))
    data = _decide(sidecar_client).get_json()
    assert data["decision"] == "deny"
    assert data["reasons"] == ["explicit deny wins"]


def test_evaluation_error_is_503_without_retry(sidecar_client, opa_server):
    opa_server.script(Behaviour(status=500, body={"code": "internal_error", "message": "eval_conflict_error"}))
    resp = _decide(sidecar_client)
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert "eval_conflict_error" not in resp.get_data(as_text=True)
    assert len(opa_server.calls) == 1


@pytest.mark.serial  # the 503 must come within 1.5 s
def test_slower_than_read_timeout_is_503(make_app, opa_server):
    client = make_app(engine="opa", opa_url=opa_server.url, opa_read_timeout_ms=100, opa_deadline_ms=800).test_client()
    opa_server.always(Behaviour(delay_s=0.5))
    started = time.monotonic()
    resp = _decide(client)
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert time.monotonic() - started < 1.5


def test_connection_refused_is_503(make_app):
    """pc-09 expects a 200 deny "policy evaluation failed"; DESIGN §3 and the gateway issue say
    503 DEPENDENCY_UNAVAILABLE (retryable), and DESIGN wins. Either way nothing is allowed."""
    client = make_app(engine="opa", opa_url=f"http://127.0.0.1:{free_port()}").test_client()
    resp = _decide(client)
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)


def test_hang_up_is_503(sidecar_client, opa_server):
    opa_server.always(Behaviour(hang_up=True))
    resp = _decide(sidecar_client)
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)


def test_readyz_reports_the_sidecar_down(make_app):
    client = make_app(engine="opa", opa_url=f"http://127.0.0.1:{free_port()}").test_client()
    resp = client.get("/readyz")
    assert resp.status_code == 503
    assert resp.get_json()["checks"]["policy_engine"] == "unavailable"


def test_embedded_engine_evaluation_error_is_503(make_app, tmp_path):
    """A policy that raises a conflict error at evaluation time fails closed with 503."""
    (tmp_path / "toolgate").mkdir()
    (tmp_path / "toolgate" / "decision.rego").write_text(
        'package toolgate\n\ndecision := {"decision": "allow"} if true\n\ndecision := {"decision": "deny"} if true\n'
    )
    client = make_app(policy_dir=tmp_path).test_client()
    resp = _decide(client)
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)


def test_embedded_engine_undefined_decision_is_deny(make_app, tmp_path):
    (tmp_path / "toolgate").mkdir()
    (tmp_path / "toolgate" / "decision.rego").write_text(
        'package toolgate\n\ndecision := {"decision": "allow"} if input.never_set\n'
    )
    data = _decide(make_app(policy_dir=tmp_path).test_client()).get_json()
    assert data["decision"] == "deny" and data["reasons"] == ["no policy decision"]
