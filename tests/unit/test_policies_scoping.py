"""Scoping of tool families: the careless-family experiment over every decision case.

A family that governs none of the shipped tools (or declares nothing at all) and allows every
high-risk call must not change any decision of the shipped families. Every case of
``tests/support/decision_cases.py`` and every AgentDojo banking reference call is evaluated with
the real embedded engine on the shipped bundle, then on copies of it with such a family added,
and the decision documents must be identical. The contract registry and the policy catalog
(``data.toolgate.catalog``) must also agree: every registered tool has exactly one family.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from opa_bindings import OpaEngine

from app.contracts.registry import ContractRegistry
from app.policy.bundle import load_bundle
from tests.conftest import CONTRACTS_DIR, POLICY_DIR
from tests.support.decision_cases import CASES
from tests.support.paths import BANKING_CALLS

CARELESS_FAMILIES = {
    # The experiment of the issue, written the new way: it declares another tool.
    "declares_another_tool": (
        "package tools.careless\n\n"
        'governs["someOtherTool"] := {}\n\n'
        'allow contains {"rule": "high_risk", "message": "high risk is fine"} if input.tool.risk == "high"\n'
    ),
    # The experiment as it was written before: no declaration, a boolean allow.
    "old_style_allow": 'package tools.careless\n\nallow if input.tool.risk == "high"\n',
    # A family that denies everything but governs nothing.
    "denies_everything": (
        "package tools.careless\n\n"
        'deny contains {"rule": "no", "message": "careless says no"} if true\n'
    ),
}


def _engine(policy_dir: Path) -> OpaEngine:
    engine = OpaEngine()
    load_bundle(engine, policy_dir, include_tests=False)
    return engine


def _inputs() -> list[tuple[str, dict[str, Any]]]:
    """(case id, policy input) of every shared decision case and banking reference call."""
    registry = ContractRegistry.load(CONTRACTS_DIR)

    def doc(sub: str, tenant: str, roles: list[str], tool: str, version: str, args: dict[str, Any]) -> dict[str, Any]:
        contract = registry.get(tool, version)
        return {
            "subject": {"id": sub, "tenant": tenant, "roles": roles},
            "tool": {
                "name": tool,
                "version": version,
                "namespace": "",
                "registered": contract is not None,
                "mutating": contract.meta.mutating if contract else True,
                "risk": contract.meta.risk if contract else "high",
            },
            "call": {"id": "call-1", "input": args},
            "context": {},
            "history": {},
            "approval": None,
            "request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
        }

    out = [(c.id, doc(c.sub, c.tenant, list(c.roles), c.tool, c.extra.get("version", "1"), c.input)) for c in CASES]
    for i, line in enumerate(BANKING_CALLS.read_text(encoding="utf-8").splitlines()):
        call = json.loads(line)
        out.append((f"bank-{i}", doc("emma", "bank-demo", ["account_holder"], call["function"], "1", call["args"])))
    return out


INPUTS = _inputs()


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    engine = _engine(POLICY_DIR)
    try:
        return {case: engine.eval_document("toolgate.decision", doc) for case, doc in INPUTS}
    finally:
        engine.close()


@pytest.mark.parametrize("family", sorted(CARELESS_FAMILIES))
def test_careless_family_changes_no_decision(family, shipped, tmp_path):
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy)
    (copy / "tools" / "careless").mkdir()
    (copy / "tools" / "careless" / "careless.rego").write_text(CARELESS_FAMILIES[family], encoding="utf-8")
    engine = _engine(copy)
    try:
        changed = {
            case: (shipped[case], got)
            for case, doc in INPUTS
            if (got := engine.eval_document("toolgate.decision", doc)) != shipped[case]
        }
    finally:
        engine.close()
    assert changed == {}
    assert len(INPUTS) > 90
    # the experiment reaches high-risk calls that the shipped families deny or ask about
    assert {shipped[case]["decision"] for case, doc in INPUTS if doc["tool"]["risk"] == "high"} == {
        "allow",
        "deny",
        "user-approval",
    }


def test_the_careless_family_is_consulted_for_its_own_tool(tmp_path):
    """The control: the same family does decide for the tool it declares."""
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy)
    (copy / "tools" / "careless").mkdir()
    (copy / "tools" / "careless" / "careless.rego").write_text(
        CARELESS_FAMILIES["declares_another_tool"], encoding="utf-8"
    )
    roles = json.loads((copy / "data.json").read_text(encoding="utf-8"))
    roles["roles"]["admin"]["tools"].append("someOtherTool")
    (copy / "data.json").write_text(json.dumps(roles), encoding="utf-8")
    engine = _engine(copy)
    try:
        doc = dict(INPUTS[0][1], subject={"id": "u", "tenant": "acme", "roles": ["admin"]})
        doc["tool"] = dict(doc["tool"], name="someOtherTool", risk="high")
        decision = engine.eval_document("toolgate.decision", doc)
    finally:
        engine.close()
    assert decision["decision"] == "allow"
    assert decision["matched_rules"] == [{"id": "careless.high_risk", "effect": "allow", "message": "high risk is fine"}]


def test_every_registered_contract_has_exactly_one_family():
    engine = _engine(POLICY_DIR)
    try:
        catalog = engine.eval_document("toolgate.catalog")
    finally:
        engine.close()
    assert catalog["problems"] == []
    claims: dict[tuple[str, str], list[str]] = {}
    for family, entry in catalog["families"].items():
        for declaration in entry["governs"]:
            assert declaration["namespace"] == ""
            for version in declaration["versions"]:
                claims.setdefault((declaration["name"], version), []).append(family)
    contracts = {(c.name, c.version) for c in ContractRegistry.load(CONTRACTS_DIR).all()}
    assert set(claims) == contracts  # no contract without a family, no family tool without a contract
    assert all(len(families) == 1 for families in claims.values()), claims
