"""A shadow rollout end to end, on the real gateway (gunicorn, 2 workers, the embedded engine,
a real Redis and SQLite): a candidate that flips one rule (payments need approval above 100
instead of 1000) runs beside the shipped policies.

- every call answers exactly as the shipped policies answer (reservations and approvals
  included), and its record carries the candidate's decision;
- ``toolgate_shadow_decisions_total``, ``toolgate audit query --shadow-disagrees`` and
  ``GET /v1/decisions?shadow=disagrees`` show exactly the calls that flip;
- ``toolgate policy diff`` over that log reports the same flips, with the rule ids that
  changed, and exits 1 only for a candidate that loosens;
- ``toolgate policy explain`` evaluates a recorded call again under its archived revision.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from app.auth.dev_tokens import mint_dev_token
from app.policy.toolchain import opa_binary
from app.settings import Settings
from tests.conftest import POLICY_DIR, PROJECT_ROOT
from tests.support.calls import decide_body
from tests.support.errors import assert_error
from tests.support.gateway import GatewayProcess

PAYMENTS = Path("tools/payments/payments.rego")
METRICS_TOKEN = "rollout-metrics-token-0123456789"


def candidate_with_threshold(root: Path, amount: int) -> Path:
    """A copy of the shipped policies whose payments need approval above ``amount``."""
    target = root / f"candidate-{amount}"
    shutil.copytree(POLICY_DIR, target)
    rego = target / PAYMENTS
    text = rego.read_text(encoding="utf-8")
    assert "default_approval_amount := 1000" in text
    rego.write_text(text.replace("default_approval_amount := 1000", f"default_approval_amount := {amount}"), encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def rollout(tmp_path_factory, redis_server):
    workdir = tmp_path_factory.mktemp("rollout")
    candidate = candidate_with_threshold(workdir, 100)
    env = {
        "TOOLGATE_REDIS_URL": redis_server.url,
        "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
        "TOOLGATE_CHECKPOINT_FILE": str(workdir / "checkpoints.jsonl"),
        "TOOLGATE_SHADOW_POLICY_DIR": str(candidate),
        "TOOLGATE_SHADOW_DEADLINE_MS": "2000",
        "TOOLGATE_METRICS_TOKEN": METRICS_TOKEN,
    }
    process = GatewayProcess(env, workers=2, threads=4).start()
    yield process, workdir, candidate
    process.stop()


def _token(*roles: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=list(roles), ttl_s=600)}


#: (tool, input, dry run, the shipped policies' decision, the candidate's)
CALLS = [
    ("processPayment", {"amount": 50, "currency": "EUR", "recipient": "acct_42"}, False, "allow", "allow"),
    ("processPayment", {"amount": 150, "currency": "EUR", "recipient": "acct_42"}, False, "allow", "user-approval"),
    ("processPayment", {"amount": 500, "currency": "EUR", "recipient": "acct_42"}, False, "allow", "user-approval"),
    ("processPayment", {"amount": 999, "currency": "EUR", "recipient": "acct_42"}, True, "allow", "user-approval"),
    ("processPayment", {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}, False, "user-approval", "user-approval"),
    ("readFile", {"path": "/srv/reports/q1.csv"}, False, "allow", "allow"),
    ("readFile", {"path": "/etc/shadow"}, False, "deny", "deny"),
]


def _toolgate(workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
               "TOOLGATE_CHECKPOINT_FILE": str(workdir / "checkpoints.jsonl"), "TOOLGATE_LOG_LEVEL": "ERROR", **env}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=environ,
                          cwd=PROJECT_ROOT, timeout=120, check=False)


def _metric(text: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith("toolgate_shadow_decisions_total{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_candidate_that_flips_one_rule(rollout):
    gateway, workdir, candidate = rollout
    admin = _token("admin")
    made: list[tuple[str, str, str]] = []  # (decision id, active, shadow)
    for index, (tool, tool_input, dry_run, active, _) in enumerate(CALLS):
        headers = dict(admin)
        if tool == "processPayment" and not dry_run:
            headers["Idempotency-Key"] = f"rollout-{index}"
        body = decide_body(tool, tool_input, **({"dry_run": True} if dry_run else {}))
        response = requests.post(f"{gateway.url}/v1/decide", json=body, headers=headers, timeout=30)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["decision"] == active, (tool, tool_input, answer)
        assert "shadow" not in answer
        if active == "allow" and "Idempotency-Key" in headers:
            assert answer["idempotency"]["state"] == "reserved"  # the candidate's approval changed nothing
        if active == "user-approval":
            assert answer["approval"]["approval_id"]
        made.append((answer["decision_id"], active, CALLS[index][4]))
    flipped = {decision_id for decision_id, active, shadow in made if active != shadow}
    assert len(flipped) == 3

    auditor = _token("auditor")
    listed = requests.get(f"{gateway.url}/v1/decisions", params={"tenant": "acme", "limit": 100}, headers=auditor, timeout=30)
    records = {r["decision_id"]: r for r in listed.json()["records"]}
    for decision_id, active, shadow in made:
        record = records[decision_id]
        assert record["policy_decision"] == active
        assert record["shadow"]["source"] == "candidate" and record["shadow"]["decision"] == shadow
        assert record["shadow"]["agrees"] is (active == shadow)
        assert record["shadow"]["revision"] != record["policy_revision"]

    disagreeing = requests.get(f"{gateway.url}/v1/decisions", params={"shadow": "disagrees"}, headers=auditor, timeout=30)
    assert {r["decision_id"] for r in disagreeing.json()["records"]} == flipped

    scrape = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    metrics_text = requests.get(f"{gateway.url}/metrics", headers=scrape, timeout=30).text
    assert _metric(metrics_text, agreement="disagree") == 3
    assert _metric(metrics_text, tool="processPayment", active="allow", shadow="user-approval", agreement="disagree") == 3
    assert _metric(metrics_text, agreement="agree") == len(CALLS) - 3

    query = _toolgate(workdir, "audit", "query", "--shadow-disagrees", "--format", "jsonl")
    assert query.returncode == 0, query.stderr
    assert {json.loads(line)["decision_id"] for line in query.stdout.splitlines()} == flipped

    diff = _toolgate(workdir, "policy", "diff", "--candidate", str(candidate), "--json")
    assert diff.returncode == 0, diff.stderr  # nothing loosens
    report = json.loads(diff.stdout)
    assert report["records"] == len(CALLS) and report["evaluated"] == len(CALLS) and report["flipped"] == 3
    [group] = report["flips"]
    assert (group["tool"], group["from"], group["to"], group["calls"]) == ("processPayment", "allow", "user-approval", 3)
    assert set(group["examples"]) == flipped
    assert {(r["change"], r["id"]) for r in group["rules"]} == {
        ("+", "payments.amount_over_threshold"), ("-", "payments.amount_within_threshold")
    }

    text = _toolgate(workdir, "policy", "diff", "--candidate", str(candidate))
    assert text.returncode == 0 and "3 would flip (0 to allow from deny or user-approval)" in text.stdout
    assert re.search(r"processPayment\s+allow\s+user-approval\s+3\s+\+payments.amount_over_threshold \(3\)", text.stdout)

    loosening = candidate_with_threshold(workdir, 10_000)
    loose = _toolgate(workdir, "policy", "diff", "--candidate", str(loosening), "--json")
    assert loose.returncode == 1, loose.stderr
    loose_report = json.loads(loose.stdout)
    assert loose_report["loosening"] == 1
    assert [(g["from"], g["to"], g["calls"]) for g in loose_report["flips"]] == [("user-approval", "allow", 1)]
    loose_text = _toolgate(workdir, "policy", "diff", "--candidate", str(loosening))
    assert loose_text.returncode == 1 and "LOOSENING: 1 call denied or held for approval would be allowed" in loose_text.stdout


def test_explain_evaluates_a_recorded_call_under_its_archived_revision(rollout):
    gateway, workdir, candidate = rollout
    body = decide_body("processPayment", {"amount": 700, "currency": "EUR", "recipient": "acct_42"}, dry_run=True)
    answer = requests.post(f"{gateway.url}/v1/decide", json=body, headers=_token("admin"), timeout=30).json()
    assert answer["decision"] == "allow"
    explained = _toolgate(workdir, "policy", "explain", answer["decision_id"], "--json")
    assert explained.returncode == 0, explained.stderr
    found = json.loads(explained.stdout)
    assert found["recorded"]["revision"] == answer["policy_revision"]
    assert found["at_revision"]["revision"] == answer["policy_revision"] and found["at_revision"]["same_as_recorded"]
    assert found["today"]["same_as_recorded"] is True
    assert opa_binary() is not None, "scripts/install.sh builds opa into .tools/bin"
    assert "Enter data.toolgate.decision" in found["trace"]
    # Today's policy is the candidate: the same call would now need approval.
    later = _toolgate(workdir, "policy", "explain", answer["decision_id"], "--trace", "off",
                      TOOLGATE_POLICY_DIR=str(candidate))
    assert later.returncode == 0, later.stderr
    assert "revision " + answer["policy_revision"] in later.stdout and "the same as recorded" in later.stdout
    assert "user-approval, DIFFERS from the recorded allow" in later.stdout


def test_readyz_reports_the_candidate_without_depending_on_it(rollout):
    gateway, _, candidate = rollout
    from app.policy.bundle import read_directory

    ready = requests.get(f"{gateway.url}/readyz", timeout=30)
    assert ready.status_code == 200
    details = ready.json()["details"]
    shadow = details["shadow_policy"]
    assert shadow["engine"] == "embedded" and shadow["source"] == str(candidate)
    assert shadow["revision"] == read_directory(candidate).revision != details["policy_engine"]["revision"]
    assert (shadow["deadline_ms"], shadow["workers"]) == (2000, 2)


def test_explain_says_what_it_cannot_explain(rollout):
    gateway, workdir, _ = rollout
    body = decide_body("readFile", {"path": ""}, dry_run=True)  # fails its contract: never evaluated
    refused = requests.post(f"{gateway.url}/v1/decide", json=body, headers=_token("admin"), timeout=30)
    assert_error(refused, 422, "VALIDATION_ERROR", retryable=False, path="/path")
    unexplained = _toolgate(workdir, "policy", "explain", refused.headers["X-Decision-Id"])
    assert unexplained.returncode == 1 and "is not a decided decide call" in unexplained.stderr
    unknown = _toolgate(workdir, "policy", "explain", "01M8S2GK6QPAHV5XDHQMAZE3DE")
    assert unknown.returncode == 2 and "no decision 01M8S2GK6QPAHV5XDHQMAZE3DE" in unknown.stderr
    malformed = _toolgate(workdir, "policy", "explain", "not-an-id")
    assert malformed.returncode == 2 and "is not a decision id" in malformed.stderr
