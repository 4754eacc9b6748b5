"""The family template of docs/policy-template/ works as the walkthrough of
docs/policy-authors.md says: copied into a copy of the shipped policies and contracts as the
``mail`` family, with its grant and tenant data, every Rego test passes (the template's
included), its contract loads, and the catalog lists it without problems. Real embedded engine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from opa_bindings import OpaEngine

from app.contracts.registry import ContractRegistry
from app.policy.bundle import load_bundle
from app.policy.testing import run_policy_tests
from tests.conftest import CONTRACTS_DIR, POLICY_DIR, PROJECT_ROOT

TEMPLATE = PROJECT_ROOT / "docs" / "policy-template"


def _walkthrough(root: Path) -> tuple[Path, Path]:
    """Steps 1-3 of the walkthrough on copies under ``root``; returns (policies, contracts).
    Idempotent: the shipped tree may already hold the mail family (an author followed the
    walkthrough in the repository)."""
    policies, contracts = root / "policies", root / "contracts"
    shutil.copytree(POLICY_DIR, policies)
    shutil.copytree(CONTRACTS_DIR, contracts)
    shutil.copy(TEMPLATE / "contracts" / "sendEmail.v1.yaml", contracts)
    family = policies / "tools" / "mail"
    family.mkdir(exist_ok=True)
    for name in ("family_template", "family_template_test"):
        text = (TEMPLATE / "tools" / "family_template" / f"{name}.rego").read_text(encoding="utf-8")
        (family / f"{name.replace('family_template', 'mail')}.rego").write_text(
            text.replace("family_template", "mail"), encoding="utf-8"
        )
    data = json.loads((policies / "data.json").read_text(encoding="utf-8"))
    if "sendEmail" not in data["roles"]["support_agent"]["tools"]:
        data["roles"]["support_agent"]["tools"].append("sendEmail")
    (policies / "data.json").write_text(json.dumps(data), encoding="utf-8")
    acme = policies / "tenants" / "acme" / "data.json"
    overlay = json.loads(acme.read_text(encoding="utf-8"))
    acme.write_text(json.dumps({**overlay, "allowed_domains": ["acme.example"]}), encoding="utf-8")
    return policies, contracts


def test_the_template_becomes_a_working_family(tmp_path):
    policies, contracts = _walkthrough(tmp_path)
    report = run_policy_tests(policies)
    assert report.ok, report.format_text()
    mail_tests = [r for r in report.results if r.case.package == "tools.mail_test"]
    assert len(mail_tests) == 5 and all(r.outcome == "pass" for r in mail_tests)

    contract = ContractRegistry.load(contracts).get("sendEmail", "1")
    assert contract is not None and contract.meta.risk == "high"

    engine = OpaEngine()
    try:
        load_bundle(engine, policies, include_tests=False)
        catalog = engine.eval_document("toolgate.catalog")
        call = {
            "subject": {"id": "u-1", "tenant": "acme", "roles": ["support_agent"]},
            "tool": {"name": "sendEmail", "version": "1", "namespace": "", "registered": True,
                     "mutating": True, "risk": "high"},
            "call": {"id": "c", "input": {"to": "eve@elsewhere.example", "subject": "Quote", "body": "Hi"}},
            "context": {}, "history": {}, "approval": None, "request": {"id": "r", "time": "2026-11-29T21:00:00Z"},
        }
        decision = engine.eval_document("toolgate.decision", call)
    finally:
        engine.close()
    assert catalog["problems"] == []
    assert catalog["families"]["mail"] == {
        "governs": [{"name": "sendEmail", "namespace": "", "versions": ["1"], "shared_with": []}],
        "approver_roles": ["mail_approver"],
    }
    assert decision["decision"] == "user-approval"
    assert decision["approval"]["approver_roles"] == ["mail_approver"]


def test_the_template_example_tenant_uses_only_documented_members():
    example = json.loads((TEMPLATE / "tenants" / "example-tenant" / "data.json").read_text(encoding="utf-8"))
    assert set(example) == {"counterparties", "allowed_domains", "limits", "features"}
