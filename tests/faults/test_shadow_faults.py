"""A shadow candidate that throws or hangs, on the real gateway (gunicorn, 2 workers): every
answer is the shipped policies' own and comes within the shadow deadline (plus the call's own
time), every record names what went wrong with the candidate, and the errors are counted.

The candidate is real Rego in the real embedded engine: for processPayment two complete rules
give two values (an evaluation error, ``eval_conflict_error``); for readFile it calls
``http.send`` on a loopback socket that accepts connections and never answers, with a 30 s
timeout (a hang: the evaluation is abandoned at the deadline and keeps its shadow worker busy
until OPA gives up, so later calls find no free worker and record ``overloaded`` at once).
"""

from __future__ import annotations

import socket
import time

import pytest
import requests

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.support.calls import decide_body
from tests.support.gateway import GatewayProcess

DEADLINE_MS = 100
#: What an answer may take beyond the deadline on a shared 2-core machine; the hang is 30 s.
SLACK_S = 1.5
METRICS_TOKEN = "shadow-faults-metrics-token-0123"

CANDIDATE = """package toolgate

decision := {"decision": "allow", "reasons": ["candidate"]} if {
	input.tool.name == "readFile"
	http.send({"method": "GET", "url": "%s", "timeout": "30s"}).status_code == 200
}

decision := {"decision": "allow", "reasons": ["one"]} if input.tool.name == "processPayment"

decision := {"decision": "deny", "reasons": ["two"]} if input.tool.name == "processPayment"
"""


@pytest.fixture(scope="module")
def silent_server():
    """A loopback socket that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/never"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, redis_server, silent_server):
    workdir = tmp_path_factory.mktemp("shadow-faults")
    candidate = workdir / "candidate"
    (candidate / "toolgate").mkdir(parents=True)
    (candidate / "toolgate" / "decision.rego").write_text(CANDIDATE % silent_server, encoding="utf-8")
    process = GatewayProcess(
        {
            "TOOLGATE_REDIS_URL": redis_server.url,
            "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
            "TOOLGATE_CHECKPOINT_FILE": str(workdir / "checkpoints.jsonl"),
            "TOOLGATE_SHADOW_POLICY_DIR": str(candidate),
            "TOOLGATE_SHADOW_DEADLINE_MS": str(DEADLINE_MS),
            "TOOLGATE_SHADOW_WORKERS": "1",
            "TOOLGATE_METRICS_TOKEN": METRICS_TOKEN,
        },
        workers=2,
        threads=4,
    ).start()
    yield process
    process.stop()


def _errors(gateway: GatewayProcess, kind: str) -> float:
    text = requests.get(f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30).text
    prefix = f'toolgate_shadow_errors_total{{kind="{kind}",source="candidate"}}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def test_a_throwing_then_hanging_candidate_changes_no_answer_and_costs_at_most_its_deadline(gateway):
    admin = {"Authorization": "Bearer " + mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["admin"], ttl_s=600)}
    calls = [("processPayment", {"amount": 20, "currency": "EUR", "recipient": "acct_42"}, "allow")] * 4
    calls += [("readFile", {"path": "/srv/reports/q1.csv"}, "allow"), ("readFile", {"path": "/etc/shadow"}, "deny")] * 5
    answered = []
    for index, (tool, tool_input, expected) in enumerate(calls):
        headers = {**admin, "Idempotency-Key": f"faults-{index}"} if tool == "processPayment" else admin
        started = time.monotonic()
        response = requests.post(f"{gateway.url}/v1/decide", json=decide_body(tool, tool_input), headers=headers, timeout=60)
        took = time.monotonic() - started
        assert response.status_code == 200, response.text
        assert response.json()["decision"] == expected
        assert took < DEADLINE_MS / 1000 + SLACK_S, (index, tool, took)
        answered.append((response.json()["decision_id"], tool, took))

    auditor = {"Authorization": "Bearer " + mint_dev_token(Settings(), sub="a-1", tenant="acme", roles=["auditor"])}
    listed = requests.get(f"{gateway.url}/v1/decisions", params={"limit": 100}, headers=auditor, timeout=30).json()
    shadows = {r["decision_id"]: r["shadow"] for r in listed["records"]}
    payments = [shadows[d]["error"] for d, tool, _ in answered if tool == "processPayment"]
    reads = [shadows[d]["error"] for d, tool, _ in answered if tool == "readFile"]
    waited = [took for d, tool, took in answered if shadows[d]["error"] == "timeout"]
    assert min(waited) >= DEADLINE_MS / 1000  # it did wait for the hanging candidate, up to its deadline
    assert payments == ["evaluation_error"] * 4
    assert set(reads) <= {"timeout", "overloaded"} and 1 <= reads.count("timeout") <= 2  # one per gateway worker
    assert reads.count("overloaded") == len(reads) - reads.count("timeout")
    assert all(shadows[d]["decision"] is None and shadows[d]["agrees"] is None for d, _, _ in answered)
    assert _errors(gateway, "evaluation_error") == 4
    assert _errors(gateway, "timeout") == reads.count("timeout")
    assert _errors(gateway, "overloaded") == reads.count("overloaded")
    errors = requests.get(f"{gateway.url}/v1/decisions", params={"shadow": "error"}, headers=auditor, timeout=30).json()
    assert {r["decision_id"] for r in errors["records"]} == {d for d, _, _ in answered}


def test_a_failing_candidate_leaves_the_gateway_ready(gateway):
    ready = requests.get(f"{gateway.url}/readyz", timeout=30)
    assert ready.status_code == 200 and ready.json()["status"] == "ok"
    assert ready.json()["details"]["shadow_policy"]["revision"].startswith("sha256:")
