"""Every shipped tool has allow and deny cases (and user-approval where the policy says so)
through POST /v1/decide with real signed tokens and the embedded engine."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from app.contracts.registry import ContractRegistry
from tests.conftest import CONTRACTS_DIR
from tests.support.calls import auth, decide_body
from tests.support.decision_cases import CASES, DecisionCase


def decide_case(client, case: DecisionCase):
    """The case as the first call of a conversation of its own: what an earlier case read (the
    history, a file) never counts in a later one's session (issue 25: an allowed read of
    untrusted content counts at once, reported or not)."""
    body = decide_body(case.tool, case.input, **case.extra)
    body["context"] = {"conversation_id": f"case-{case.id}-{uuid.uuid4().hex[:8]}", **body.get("context", {})}
    headers = {**auth(case.sub, case.tenant, list(case.roles)), "Idempotency-Key": f"case-{uuid.uuid4().hex}"}
    return client.post("/v1/decide", json=body, headers=headers)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decision(client, case):
    resp = decide_case(client, case)
    assert resp.status_code == 200, resp.get_json()
    data = resp.get_json()
    assert data["decision"] == case.expected, data
    assert data["reasons"], "every decision carries at least one reason"
    assert case.reason_contains in " ".join(data["reasons"])
    assert data["tool"] == {"name": case.tool, "version": case.extra.get("version", "1")}


def test_every_registered_tool_has_allow_and_deny_cases():
    covered = defaultdict(set)
    for case in CASES:
        covered[case.tool].add(case.expected)
    for contract in ContractRegistry.load(CONTRACTS_DIR).all():
        assert {"allow", "deny"} <= covered[contract.name] or contract.name in _NEVER_ALLOWED, contract.name


# Tools the shipped policy never allows without a human: their cases are user-approval and deny.
_NEVER_ALLOWED = {"runCommand", "update_password"}
