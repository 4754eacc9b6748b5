"""Approval analytics and suggestions from a real decision log: the seeded banking workload of
``tests/data/approval_workload.py`` through the HTTP API (real Redis, the embedded engine over
the shipped policies, step-up confirmations by the account holders), recorded in SQLite and in
PostgreSQL; then ``toolgate policy insights``, ``toolgate policy suggest`` and ``toolgate policy
diff`` over it."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from app.audit.queries import DecisionQuery
from app.audit.stores import open_decision_log
from app.policy.bundle import read_directory
from app.policy.insights import escalations, insights
from app.policy.suggest import suggest
from app.timefmt import format_us
from tests.conftest import POLICY_DIR, PROJECT_ROOT
from tests.data import approval_workload as workload
from tests.support.calls import make_token
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)


def _record(make_app, dsn: str) -> tuple[workload.Summary, list[Any], dict[str, Any]]:
    app = make_app(audit_dsn=dsn)
    client = app.test_client()

    def post(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        resp = client.post(path, json=body, headers=headers)
        return resp.status_code, resp.get_json()

    def token(sub: str, step_up: bool) -> str:
        extra = {"aud": app.extensions["toolgate"].settings.approval_step_up_audience} if step_up else {}
        return make_token(sub, workload.TENANT, ["account_holder"], **extra)

    summary = workload.run(post, token)
    contracts = {c.qualified_name: c for c in app.extensions["toolgate"].contracts.all()}
    with closing(open_decision_log(dsn)) as store:
        records = list(store.iter_records(DecisionQuery(tenant=workload.TENANT)))
    return summary, records, contracts


def test_insights_and_safe_suggestions_from_the_recorded_workload(make_app, audit_dsn):  # noqa: F811
    summary, records, contracts = _record(make_app, audit_dsn)
    assert summary.answers["denied"] == 3 and summary.answers["approved"] >= 20, summary
    found = list(escalations(records))
    assert sum(e.outcome == "approved" for e in found) == summary.answers["approved"]
    assert sum(e.outcome == "denied" for e in found) == summary.answers["denied"]

    rows = {(r.rule, r.tool): r for r in insights(found, {t: c.meta.counterparty_fields for t, c in contracts.items()})}
    unknown = rows[("banking.recipient_unknown", "send_money")]
    assert unknown.outcomes["denied"] == 2  # the fraudulent payee, twice
    assert unknown.escalations == unknown.outcomes["approved"] + 2
    assert unknown.median_answer_s is not None and unknown.median_answer_s >= 0
    approved_payees = dict(unknown.top_values()["counterparty"])
    assert set(approved_payees) == set(workload.GOOD_PAYEES)
    over = rows[("banking.amount_over_limit", "send_money")]
    assert (over.escalations, over.outcomes["approved"], over.outcomes["denied"]) == (5, 4, 1)

    report = suggest(records, found, read_directory(POLICY_DIR), contracts)
    safe = [s for s in report.suggestions if s.safe]
    assert {s.change for s in safe} >= {f"counterparties.payees += {p}" for p in workload.GOOD_PAYEES}
    assert not any(workload.FRAUD_PAYEE in s.change for s in report.suggestions)
    limits = [s for s in safe if s.kind == "limit"]
    assert [s.change for s in limits] == ["limits.transfer_auto_approve_amount = 3100"]
    combined = report.combined
    assert combined is not None and combined.allows_denied == 0
    assert combined.removes * 2 >= summary.answers["approved"], (combined.removes, summary.answers)


def _toolgate(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLGATE_AUDIT_DSN": dsn, "TOOLGATE_ENV": "development"}
    return subprocess.run([sys.executable, "-m", "app.cli", "policy", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_commands_and_policy_diff_confirm_the_suggestions(make_app, tmp_path):
    dsn = str(tmp_path / "workload.sqlite")
    summary, records, _ = _record(make_app, dsn)

    shown = _toolgate("insights", "--tenant", workload.TENANT, "--json", dsn=dsn)
    assert shown.returncode == 0, shown.stderr
    rules = {(r["rule"], r["tool"]): r for r in json.loads(shown.stdout)["rules"]}
    assert rules[("banking.amount_over_limit", "send_money")]["deny_rate"] == 0.2
    assert _toolgate("insights", "--tool", "send_money", dsn=dsn).stdout.startswith("RULE")

    out = tmp_path / "suggestions"
    made = _toolgate("suggest", "--out", str(out), "--json", dsn=dsn)
    assert made.returncode == 0, made.stderr
    report = json.loads(made.stdout)
    assert report["all_safe"]["allows_denied_calls"] == 0
    tenant_data = out / "all-safe" / "tenant-data"
    written = json.loads((tenant_data / workload.TENANT / "data.json").read_text())
    assert set(workload.GOOD_PAYEES) <= set(written["counterparties"]["payees"])
    assert workload.FRAUD_PAYEE not in json.dumps(written)

    # policy diff over the same log: the flips to allow are exactly the escalations removed ...
    diff = _toolgate("diff", "--candidate", str(POLICY_DIR), "--tenant-data", str(tenant_data), "--json", dsn=dsn)
    assert diff.returncode == 1, diff.stderr  # it loosens: a person must look
    flipped = json.loads(diff.stdout)
    assert flipped["loosening"] == report["all_safe"]["removes_escalations"] + report["all_safe"]["allows_unanswered_calls"]
    # ... and none of them is a call a person denied.
    for record in records:
        if record.event == "decide" and record.approval_id in summary.fraud_approvals:
            until = format_us(record.time + dt.timedelta(microseconds=1))
            one = _toolgate("diff", "--candidate", str(POLICY_DIR), "--tenant-data", str(tenant_data), "--since",
                            format_us(record.time), "--until", until, "--json", dsn=dsn)
            assert one.returncode == 0 and json.loads(one.stdout)["loosening"] == 0, one.stdout + one.stderr
    assert Path(out / "all-safe" / "suggestion.json").is_file()


def test_an_unanswered_escalation_is_pending_then_expired(make_app, tmp_path):
    _, records, _ = _record(make_app, str(tmp_path / "log.sqlite"))
    asked = [r for r in records if r.event == "decide" and r.approval_id]
    first = asked[0]
    unanswered = [r for r in records if r.event != "approval_answer"]
    pending = next(e for e in escalations(unanswered, ttl_s=60, now=first.time + dt.timedelta(seconds=30))
                   if e.record.decision_id == first.decision_id)
    expired = next(e for e in escalations(unanswered, ttl_s=60, now=first.time + dt.timedelta(seconds=61))
                   if e.record.decision_id == first.decision_id)
    assert (pending.outcome, pending.answer_s, expired.outcome) == ("pending", None, "expired")


@pytest.mark.parametrize("command", ["insights", "suggest"])
def test_without_a_decision_log_the_commands_exit_2(command, tmp_path):
    done = _toolgate(command, "--out", str(tmp_path / "o"), dsn=str(tmp_path / "missing.sqlite")) if command == "suggest" \
        else _toolgate(command, dsn=str(tmp_path / "missing.sqlite"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (tmp_path / "missing.sqlite").exists()
