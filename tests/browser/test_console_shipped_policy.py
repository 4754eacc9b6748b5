"""The console over the shipped policies and contracts, in a real browser: the read-only view
of the tools, families and roles in force, and the record page of a decision whose rules
matched, laid out (at a desktop's and at a phone's width)."""

from __future__ import annotations

import json
import uuid

import requests

from app.auth.dev_tokens import mint_dev_token
from app.contracts.registry import ContractRegistry
from app.settings import Settings
from tests.browser.conftest import DESKTOP, page_width_at_phone_size
from tests.browser.test_console import sign_in
from tests.support.paths import CONTRACTS_DIR

DEV = Settings()


def decide(gateway, tool: str, tool_input: dict, roles: list[str]) -> dict:
    token = mint_dev_token(DEV, sub="u-agent", tenant="acme", roles=roles)
    body = {"tool": tool, "version": "1", "tool_call_id": f"call_{uuid.uuid4().hex[:8]}", "input": tool_input}
    resp = requests.post(gateway.url + "/v1/decide", json=body, timeout=10,
                         headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_the_tools_view_shows_the_contracts_families_roles_and_revision_in_force(shipped_gateway, browser, screenshot):
    revision = decide(shipped_gateway, "readFile", {"path": "/srv/a"}, ["support_agent"])["policy_revision"]
    page = browser.new_page()
    sign_in(page, shipped_gateway, "u-auditor", "auditor")
    page.goto(shipped_gateway.url + "/console/tools")
    assert page.locator("#policy-revision").inner_text() == revision
    assert page.locator("#catalog-error").count() == 0
    contracts = ContractRegistry.load(CONTRACTS_DIR).all()
    rows = page.locator("#tools tr.tool:not(.no-contract)")
    assert rows.count() == len(contracts)
    for contract in contracts:
        row = page.locator(f'#tools tr.tool[data-tool="{contract.qualified_name}"][data-version="{contract.version}"]')
        assert row.locator(".risk").inner_text() == contract.meta.risk
        assert row.locator(".mutating").inner_text() == ("yes" if contract.meta.mutating else "no")
    payment = page.locator('#tools tr.tool[data-tool="processPayment"]')
    assert payment.locator(".families").inner_text().strip() == "payments"
    assert payment.locator(".approver-roles").inner_text() == "approver"
    assert page.locator('#tools tr.tool[data-tool="send_money"] .approver-roles').inner_text() == "account_holder"
    assert "answers approvals of family banking" in page.locator('#roles tr[data-role="account_holder"]').inner_text()
    assert "its own tenant's decision log" in page.locator('#roles tr[data-role="auditor"]').inner_text()
    # Families naming no approver roles fall back to the policy's default (decision.rego).
    assert "names no approver roles (commands, files, reports, tickets)" in page.locator('#roles tr[data-role="approver"]').inner_text()
    screenshot(page, "console-tools", docs=True)
    assert page_width_at_phone_size(page) == 390
    screenshot(page, "console-tools-phone", docs=True, full_page=False)
    page.close()


def test_the_record_page_lays_out_decision_rules_input_shadow_receipt_and_chain(shipped_gateway, browser, screenshot):
    denied = decide(shipped_gateway, "readFile", {"path": "/etc/shadow"}, ["admin"])
    assert denied["decision"] == "deny" and denied["matched_rules"]
    page = browser.new_page()
    sign_in(page, shipped_gateway, "u-auditor", "auditor")
    page.goto(f"{shipped_gateway.url}/console/audit/records/{denied['decision_id']}")
    assert page.locator("#outcome").inner_text() == "deny"
    assert page.locator("#tool").inner_text() == "readFile v1"
    assert page.locator("#revision").inner_text() == denied["policy_revision"]
    assert page.locator("#reasons li").all_inner_texts() == denied["reasons"]
    rules = page.locator("#matched-rules tbody tr")
    assert [[c.strip() for c in rules.nth(i).locator("td").all_inner_texts()] for i in range(rules.count())] == [
        [m["id"], m["effect"], m["message"]] for m in denied["matched_rules"]]
    assert page.locator("#input tbody tr").all_inner_texts() == ["/path\t/etc/shadow"]
    assert "No shadow policy evaluated this call." in page.locator("#shadow").inner_text()
    assert denied["decision_id"] in page.locator("#receipt").inner_text()
    raw = json.loads(page.locator("#record-json").text_content())
    assert page.locator("#seq").inner_text() == str(raw["seq"])
    assert page.locator("#hash").inner_text() == raw["hash"] and page.locator("#prev-hash").inner_text() == raw["prev_hash"]
    assert not page.locator("#record-json").is_visible()
    page.locator("#raw summary").click()
    assert page.locator("#record-json").is_visible()
    page.locator("#raw summary").click()
    screenshot(page, "console-record", docs=True)
    assert page_width_at_phone_size(page) == 390
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "console-record-phone", docs=True, full_page=False)
    page.set_viewport_size(DESKTOP)
    page.close()
