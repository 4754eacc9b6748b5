"""Every decision case of the suite (tests/support/decision_cases.py and the AgentDojo banking
calls) against the embedded engine and a real ``opa run --server`` serving the bundle that
``toolgate policy build`` makes of ``policies/``: identical decisions, reasons and revision."""

from __future__ import annotations

import json
import uuid

import pytest

from app.policy.bundle import read_directory
from tests.api.test_decisions_per_tool import decide_case
from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body
from tests.support.decision_cases import CASES
from tests.support.paths import BANKING_CALLS


def _banking(client):
    for line in BANKING_CALLS.read_text().splitlines():
        call = json.loads(line)
        headers = {**auth("emma", "bank-demo", ["account_holder"]), "Idempotency-Key": f"k-{uuid.uuid4().hex}"}
        yield call["function"], client.post("/v1/decide", json=decide_body(call["function"], call["args"]), headers=headers)


def _outcome(resp) -> tuple:
    data = resp.get_json()
    return resp.status_code, data.get("decision"), data.get("reasons"), data.get("policy_revision")


@pytest.fixture
def other_redis(redis_server) -> str:
    """Another database of the session's Redis: each engine decides against a session of its
    own, so that a case's call under one engine does not count in the other's session (one
    delete per conversation, rate limits; docs/session.md)."""
    return redis_server.url.rsplit("/", 1)[0] + "/1"


def test_decision_cases_are_identical_under_both_engines(make_app, real_opa, other_redis):
    embedded = make_app().test_client()
    sidecar = make_app(engine="opa", opa_url=real_opa.url, opa_read_timeout_ms=2000, redis_url=other_redis).test_client()
    revision = read_directory(POLICY_DIR).revision
    mismatches = []
    for case in CASES:
        a, b = _outcome(decide_case(embedded, case)), _outcome(decide_case(sidecar, case))
        if a != b or a[:2] != (200, case.expected) or a[3] != revision:
            mismatches.append((case.id, a, b))
    assert mismatches == []
    assert len(CASES) > 40


def test_banking_calls_are_identical_under_both_engines(make_app, real_opa, other_redis):
    embedded = list(_banking(make_app().test_client()))
    sidecar_app = make_app(engine="opa", opa_url=real_opa.url, opa_read_timeout_ms=2000, redis_url=other_redis)
    sidecar = list(_banking(sidecar_app.test_client()))
    assert len(embedded) == len(sidecar) == len(BANKING_CALLS.read_text().splitlines()) > 40
    left = [(tool, _outcome(resp)) for tool, resp in embedded]
    right = [(tool, _outcome(resp)) for tool, resp in sidecar]
    assert left == right
    assert {outcome[1] for _, outcome in left} == {"allow", "user-approval"}


def test_the_decision_record_names_the_revision_of_the_real_server(make_app, real_opa):
    app = make_app(engine="opa", opa_url=real_opa.url)
    resp = app.test_client().post("/v1/decide", json=decide_body("readFile", {"path": "/srv/reports/q1.csv"}),
                                  headers=auth(roles=["support_agent"]))
    assert resp.status_code == 200
    from app.audit.queries import DecisionQuery

    records = list(app.extensions["toolgate"].decision_reader.iter_records(DecisionQuery()))
    assert [r.policy_revision for r in records] == [read_directory(POLICY_DIR).revision]
    assert [r.engine for r in records] == ["opa"]


def test_banking_replay_through_real_gateways_is_identical_under_both_engines(real_opa, redis_server, tmp_path):
    """``toolgate replay`` of the AgentDojo banking calls through two gunicorn gateways, one per
    engine: the same text output, line for line."""
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT
    from tests.support.gateway import GatewayProcess

    outputs = {}
    for engine in ("embedded", "opa"):
        gateway = GatewayProcess({
            "TOOLGATE_ENGINE": engine, "TOOLGATE_OPA_URL": real_opa.url, "TOOLGATE_REDIS_URL": redis_server.url,
            "TOOLGATE_AUDIT_DSN": str(tmp_path / f"{engine}.sqlite"),
        }).start()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "app.cli", "replay", str(BANKING_CALLS), "--url", gateway.url,
                 "--sub", "emma", "--tenant", "bank-demo", "--role", "account_holder"],
                cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, check=False)
        finally:
            gateway.stop()
        assert done.returncode == 0, done.stderr[-2000:]
        outputs[engine] = done.stdout
    assert outputs["embedded"] == outputs["opa"]
    assert "errors               0" in outputs["opa"] and "total               45" in outputs["opa"]


def test_both_engines_answer_the_same_session_reads(make_app, real_opa):
    """``data.toolgate.session_reads`` through the sidecar's ``evaluate_document`` and in process:
    the same members, named by the same revision."""
    embedded = make_app().extensions["toolgate"].session_reads
    sidecar = make_app(engine="opa", opa_url=real_opa.url, opa_read_timeout_ms=2000).extensions["toolgate"].session_reads
    revision = read_directory(POLICY_DIR).revision
    sidecar.of_tool({"name": "exportReport", "version": "1"})  # the sidecar names its revision
    for reads in (embedded, sidecar):
        reads.prime()  # the gateway trusts the declarations once it has checked them (app.session.declarations)
    for name in ("exportReport", "processPayment", "deleteFile", "send_money"):
        tool = {"name": name, "version": "1", "registered": True}
        assert embedded.of_tool(tool) == sidecar.of_tool(tool)
        assert embedded.of_tool(tool).revision == revision
    assert sidecar.of_tool({"name": "deleteFile", "version": "1"}).members == {
        "session.conversation.calls", "session.subject.calls", "session.windows"}
