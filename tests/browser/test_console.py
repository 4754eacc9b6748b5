"""The console in a real browser against a live gateway: sign in, see a pending approval,
approve it with an edit, the tool service's retried call allowed with the edited input; a
refused answer that keeps the edit and is recorded; the auditor's search (the API's filters),
record detail and export; every page at a phone's width; times in UTC and local time; a POST
without the CSRF token refused."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from zoneinfo import ZoneInfo

import requests

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from app.timefmt import parse_rfc3339
from tests.browser.conftest import DESKTOP, VIEWER_ZONE, page_width_at_phone_size

DEV = Settings()


def token(sub: str, roles: list[str]) -> str:
    return mint_dev_token(DEV, sub=sub, tenant="acme", roles=roles)


def tool_service_decide(gateway, body: dict, key: str) -> dict:
    headers = {"Authorization": f"Bearer {token('svc-payments', ['admin'])}", "Idempotency-Key": key}
    resp = requests.post(gateway.url + "/v1/decide", json=body, headers=headers, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()


def payment(amount: int) -> dict:
    return {"tool": "processPayment", "tool_call_id": f"call_{uuid.uuid4().hex[:8]}",
            "input": {"amount": amount, "currency": "EUR", "recipient": "acct_42"}, "context": {"conversation_id": "c-77"}}


def sign_in(page, gateway, subject: str, roles: str) -> None:
    page.context.clear_cookies()
    page.goto(gateway.url + "/console/inbox")
    assert page.url.endswith("/console/sign-in")
    page.fill("#subject", subject)
    page.fill("#tenant", "acme")
    page.fill("#roles", roles)
    page.click("#dev-sign-in")
    page.wait_for_url("**/console/inbox")


def pending_card(gateway, browser, amount: int, approver: str):
    """A payment of ``amount`` waiting for approval, and its card in the inbox of ``approver``
    (signed in with the approver role): ``(approval_id, page, card)``."""
    approval_id = tool_service_decide(gateway, payment(amount), uuid.uuid4().hex)["approval"]["approval_id"]
    page = browser.new_page()
    sign_in(page, gateway, approver, "approver")
    return approval_id, page, page.locator(f"article#{approval_id}")


def test_approve_with_an_edit_in_the_console_and_the_retried_call_runs_it(gateway, browser, screenshot):
    body = payment(1500)
    key = uuid.uuid4().hex
    asked = tool_service_decide(gateway, body, key)
    assert asked["decision"] == "user-approval"
    approval_id = asked["approval"]["approval_id"]
    other = tool_service_decide(gateway, payment(4200), uuid.uuid4().hex)["approval"]["approval_id"]

    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    sign_in(page, gateway, "u-approver", "approver auditor")
    card = page.locator(f"article#{approval_id}")
    assert card.locator("h2").inner_text().startswith("processPayment")
    assert card.locator(".requester").inner_text() == "svc-payments"
    assert "payment over 1000 needs approval" in card.locator(".reasons").inner_text()
    assert card.locator(".rules").inner_text().strip() == "-"  # the test policy reports no rule ids
    assert page.locator("article.approval").nth(0).get_attribute("id") == approval_id  # oldest first
    assert page.locator(f"article#{other}").is_visible()
    screenshot(page, "console-inbox", docs=True)

    card.locator('input[name="input.amount"]').fill("1200")
    card.locator('input[name="reason"]').fill("invoice 2291 is 1200")
    card.locator("button.approve").click()
    page.wait_for_url("**/console/inbox?done=*")
    assert page.locator("#flash").inner_text() == f"{approval_id}: approved"
    assert page.locator(f"article#{approval_id}").count() == 0
    assert errors == []

    # The tool service picks the grant up (long poll) and repeats the model's call as it was.
    shown = requests.get(f"{gateway.url}/v1/approvals/{approval_id}?wait=5",
                         headers={"Authorization": f"Bearer {token('svc-payments', ['admin'])}"}, timeout=10).json()
    assert shown["approval"]["state"] == "approved"
    retried = tool_service_decide(gateway, {**body, "approval": {"approval_id": approval_id, "grant": shown["grant"]}}, key)
    assert retried["decision"] == "allow" and retried["ai_sdk_status"] == "approved"
    assert retried["input"]["amount"] == 1200
    assert retried["approval_edit"]["changes"] == [{"path": "/amount", "requested": 1500, "approved": 1200, "op": "replace"}]
    assert retried["idempotency"]["state"] == "reserved"
    page.close()


def test_auditor_search_detail_and_export(gateway, browser, screenshot, tmp_path):
    approval_id = tool_service_decide(gateway, payment(2500), uuid.uuid4().hex)["approval"]["approval_id"]
    tool_service_decide(gateway, payment(150_000), uuid.uuid4().hex)  # denied
    page = browser.new_page()
    sign_in(page, gateway, "u-auditor", "auditor")
    response = page.goto(gateway.url + "/console/audit")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert page.locator('li.chain.ok[data-tenant="acme"]').is_visible()
    assert page.locator("svg.chart rect").count() > 0
    assert "processPayment" in page.locator(".tops").inner_text()
    screenshot(page, "console-audit", docs=True)

    page.fill('input[name="approval_id"]', approval_id)
    page.click("#search")
    page.wait_for_url(f"**approval_id={approval_id}**")
    rows = page.locator("#records tbody tr")
    assert rows.count() == 1
    rows.first.locator("a.record-link").click()
    page.wait_for_url("**/console/audit/records/*")
    assert page.locator("#approval-id").inner_text() == approval_id
    assert int(page.locator("#seq").inner_text()) >= 1
    assert not page.locator("#record-json").is_visible()  # the raw JSON is behind a toggle
    page.locator("#raw summary").click()
    record = json.loads(page.locator("#record-json").inner_text())
    assert record["approval_id"] == approval_id and record["decision"] == "user-approval"
    screenshot(page, "console-record-approval")

    page.go_back()
    with page.expect_download() as download:
        page.click("#export-jsonl")
    lines = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert [r["decision_id"] for r in lines] == [record["decision_id"]]
    with page.expect_download() as download:
        page.click("#export-csv")
    csv_text = Path(download.value.path()).read_text()
    assert csv_text.splitlines()[0].startswith("decision_id") and record["decision_id"] in csv_text
    page.close()


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(gateway, browser):
    approval_id = tool_service_decide(gateway, payment(1800), uuid.uuid4().hex)["approval"]["approval_id"]
    page = browser.new_page()
    sign_in(page, gateway, "u-approver-2", "approver")
    # The browser's own cookies, a form post without (or with a wrong) CSRF token.
    for form in ({"decision": "approve", "reason": "forged"}, {"decision": "approve", "csrf": "not-the-token"}):
        resp = page.request.post(f"{gateway.url}/console/approvals/{approval_id}", form=form, max_redirects=0)
        assert resp.status == 403
        assert "CSRF" in resp.text()
    page.reload()
    assert page.locator(f"article#{approval_id}").is_visible()
    shown = requests.get(f"{gateway.url}/v1/approvals/{approval_id}",
                         headers={"Authorization": f"Bearer {token('u-approver-2', ['approver'])}"}, timeout=10).json()
    assert shown["approval"]["state"] == "pending" and shown["approval"]["votes"] == []
    page.close()


def test_a_scoped_grant_chosen_in_the_inbox_is_listed_and_revoked_in_the_console(gateway, browser, screenshot):
    _, page, card = pending_card(gateway, browser, 1900, "u-approver-3")
    card.locator('select[name="scope"]').select_option("duration")
    card.locator('input[name="scope_minutes"]').fill("30")
    card.locator('input[name="pin.recipient"]').check()
    card.locator("button.approve").click()
    page.wait_for_url("**/console/inbox?done=*")
    # A later payment to the pinned recipient needs no new approval; another recipient does.
    later = tool_service_decide(gateway, payment(1700), uuid.uuid4().hex)
    assert later["decision"] == "allow" and later["ai_sdk_status"] == "approved"
    other = payment(1700)
    other["input"]["recipient"] = "acct_77"
    assert tool_service_decide(gateway, other, uuid.uuid4().hex)["decision"] == "user-approval"
    page.goto(gateway.url + "/console/grants")
    row = page.locator("table.records tbody tr").filter(has_text="svc-payments").first
    assert '/recipient {"eq": "acct_42"}' in row.inner_text() and "duration" in row.inner_text()
    screenshot(page, "console-grants")
    row.locator("button.deny").click()
    page.wait_for_url("**/console/grants")
    assert "revoked" in page.locator("table.records tbody tr").first.inner_text()
    assert tool_service_decide(gateway, payment(1700), uuid.uuid4().hex)["decision"] == "user-approval"
    page.close()


def test_the_insights_page_shows_escalations_answers_and_approved_values(gateway, browser, screenshot):
    approver = {"Authorization": f"Bearer {token('u-approver-4', ['approver'])}"}
    for amount, approved in ((1300, True), (1400, True), (90_000, False)):
        approval_id = tool_service_decide(gateway, payment(amount), uuid.uuid4().hex)["approval"]["approval_id"]
        resp = requests.post(f"{gateway.url}/v1/approvals/{approval_id}", json={"approved": approved}, headers=approver,
                             timeout=10)
        assert resp.status_code == 200, resp.text
    page = browser.new_page()
    sign_in(page, gateway, "u-auditor-2", "auditor")
    page.goto(gateway.url + "/console/insights?tool=processPayment")
    row = page.locator('tr.insight[data-tool="processPayment"]')  # the test policy names no rule: "-"
    assert row.count() == 1 and row.get_attribute("data-rule") == "-"
    # Earlier tests of this module escalated payments too: at least these three, one denied.
    assert int(row.locator(".escalations").inner_text()) >= 3
    assert row.locator(".denied").inner_text() != "0%"
    assert "counterparty: acct_42" in row.locator(".values").inner_text()
    screenshot(page, "console-insights", docs=True)
    page.close()
    # Without an auditor role the page is refused.
    page = browser.new_page()
    sign_in(page, gateway, "u-approver-4", "approver")
    assert page.goto(gateway.url + "/console/insights").status == 403
    page.close()


def test_the_console_address_the_docs_give_opens_on_the_proxys_port(gateway, browser):
    """``<proxy>/console`` (docs/approvers.md) redirects twice (the trailing slash, then the
    inbox, then sign-in); every hop keeps the address and port the browser used."""
    page = browser.new_page()
    page.context.clear_cookies()
    page.goto(gateway.url + "/console")
    assert page.url == gateway.url + "/console/sign-in"
    page.close()


def decisions(gateway, **filters: str) -> list[dict]:
    """The decision records of tenant acme matching ``filters`` (``GET /v1/decisions``)."""
    resp = requests.get(f"{gateway.url}/v1/decisions", params=filters, timeout=10,
                        headers={"Authorization": f"Bearer {token('u-auditor-api', ['auditor'])}"})
    assert resp.status_code == 200, resp.text
    return resp.json()["records"]


def test_an_edit_the_contract_refuses_keeps_the_form_says_why_and_is_recorded(gateway, browser, screenshot):
    approval_id, page, card = pending_card(gateway, browser, 1800, "u-approver-5")
    card.locator('input[name="input.amount"]').fill("2500")  # raised: an approver may only narrow
    card.locator('input[name="input.recipient"]').fill("acct_43")
    card.locator('input[name="reason"]').fill("the invoice says 2500")
    with page.expect_navigation() as answered:
        card.locator("button.approve").click()
    assert answered.value.status == 422
    card = page.locator(f"article#{approval_id}")
    assert "an approver may lower a number, not raise it" in card.locator(".refused").inner_text()
    assert "/amount" in card.locator(".refused .problems").inner_text()
    assert card.locator('input[name="input.amount"]').input_value() == "2500"
    assert card.locator('input[name="input.recipient"]').input_value() == "acct_43"
    assert card.locator('input[name="reason"]').input_value() == "the invoice says 2500"
    screenshot(page, "console-refused-edit")
    # A value that is not JSON where the input holds a number: refused by the console itself.
    card.locator('input[name="input.amount"]').fill("twelve hundred")
    with page.expect_navigation() as answered:
        card.locator("button.approve").click()
    assert answered.value.status == 422
    assert "not valid JSON" in card.locator(".refused").inner_text()
    assert card.locator('input[name="input.amount"]').input_value() == "twelve hundred"
    page.close()
    not_json, raised = decisions(gateway, approval_id=approval_id, event="approval_answer")  # newest first
    for refused in (raised, not_json):
        assert refused["tool"] == "processPayment" and refused["version"] == "1"
        assert refused["error_code"] == "VALIDATION_ERROR" and refused["decision"] is None
    assert raised["reasons"] == ["the invoice says 2500", "refused: an approver may lower a number, not raise it (at /amount)"]
    assert not_json["reasons"] == ["the invoice says 2500", "refused: an edited value is not valid JSON (at /amount)"]


def test_an_answer_to_an_approval_answered_meanwhile_keeps_what_was_typed_and_is_recorded(gateway, browser):
    approval_id, page, card = pending_card(gateway, browser, 1600, "u-approver-6")
    card.locator('input[name="input.amount"]').fill("1500")
    card.locator('input[name="reason"]').fill("ok at 1500")
    # Another approver answers first, through the API.
    resp = requests.post(f"{gateway.url}/v1/approvals/{approval_id}", json={"approved": False, "reason": "no"}, timeout=10,
                         headers={"Authorization": f"Bearer {token('u-approver-7', ['approver'])}"})
    assert resp.status_code == 200, resp.text
    with page.expect_navigation() as answered:
        card.locator("button.approve").click()
    assert answered.value.status == 409
    section = page.locator(f"#refused-{approval_id}")
    assert section.locator(".refused-message").inner_text() != ""
    assert "1500" in section.locator(".typed").inner_text()
    assert section.locator(".typed-reason").inner_text() == "ok at 1500"
    page.close()
    refused = [r for r in decisions(gateway, approval_id=approval_id, event="approval_answer") if r["subject_id"] == "u-approver-6"]
    assert len(refused) == 1 and refused[0]["tool"] == "processPayment" and refused[0]["error_code"] == "CONFLICT"
    assert refused[0]["reasons"][0] == "ok at 1500" and refused[0]["reasons"][1].startswith("refused: ")


def test_the_search_takes_the_apis_idempotency_key_and_shadow_filters(gateway, browser):
    key = uuid.uuid4().hex
    decided = tool_service_decide(gateway, payment(20), key)
    tool_service_decide(gateway, payment(21), uuid.uuid4().hex)
    page = browser.new_page()
    sign_in(page, gateway, "u-auditor-3", "auditor")
    page.goto(gateway.url + "/console/audit")
    page.fill('input[name="idempotency_key"]', key)
    page.click("#search")
    page.wait_for_url("**idempotency_key=*")
    rows = page.locator("#records tbody tr")
    assert rows.count() == 1 and rows.first.locator("a.record-link").inner_text() == decided["decision_id"]
    # No shadow policy runs here: no record disagrees with one.
    page.goto(gateway.url + "/console/audit")
    page.select_option('select[name="shadow"]', "disagrees")
    page.click("#search")
    page.wait_for_url("**shadow=disagrees**")
    assert page.locator("#records tbody").inner_text().strip() == "No records match."
    assert decisions(gateway, shadow="disagrees") == []
    page.close()


def test_the_decision_list_shows_ids_revisions_times_in_utc_and_local_and_full_rule_labels(gateway, browser):
    denied = tool_service_decide(gateway, payment(150_001), uuid.uuid4().hex)
    assert denied["decision"] == "deny"
    page = browser.new_page()
    sign_in(page, gateway, "u-auditor-4", "auditor")
    page.goto(gateway.url + "/console/audit")
    headers = page.locator("#records thead th").all_inner_texts()
    assert "Decision id" in headers and "Policy revision" in headers
    row = page.locator("#records tbody tr").filter(has_text=denied["decision_id"])
    [record] = decisions(gateway, request_id=denied["request_id"])
    assert row.locator("td.revision").inner_text() == record["policy_revision"]
    # The time in UTC, with its zone, and the viewer's local time beside it.
    when = row.locator("time.utc")
    utc = parse_rfc3339(when.get_attribute("datetime"))
    assert when.inner_text() == utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    local = utc.astimezone(ZoneInfo(VIEWER_ZONE))
    shown = row.locator("time.utc + .local").inner_text()
    assert local.strftime("%H:%M:%S") in shown and ("IST" in shown or "GMT+5:30" in shown)
    assert when.get_attribute("title") == f"your local time: {shown}"
    # The deny reason is 29 characters: shown whole, not cut at 22.
    assert "amount over 100000 is refused" in page.locator("ol.top-rules").inner_text()
    page.close()


def test_every_page_fits_a_phone(gateway, browser, screenshot):
    """At a 390 px viewport no page is wider than the viewport (wide tables scroll in their own box)."""
    approval_id = tool_service_decide(gateway, payment(1750), uuid.uuid4().hex)["approval"]["approval_id"]
    page = browser.new_page()
    sign_in(page, gateway, "u-approver-8", "approver auditor")
    page.goto(gateway.url + "/console/audit?approval_id=" + approval_id)
    record_url = page.locator("a.record-link").first.get_attribute("href")
    widths = {}
    for name, path in (("inbox", "/console/inbox"), ("grants", "/console/grants"), ("audit", "/console/audit"),
                       ("record", record_url), ("insights", "/console/insights"), ("tools", "/console/tools"),
                       ("sign-in", "/console/sign-in")):
        page.set_viewport_size(DESKTOP)
        page.goto(gateway.url + path)
        widths[name] = page_width_at_phone_size(page)
        if name in ("inbox", "audit", "record"):
            screenshot(page, f"console-{name}-phone", docs=name == "inbox", full_page=False)
    page.set_viewport_size(DESKTOP)
    assert widths == dict.fromkeys(widths, 390)
    page.close()


def test_the_tools_view_says_when_the_policy_has_no_catalog(gateway, browser):
    """The test policy declares no families: the contracts still show, each governed by none."""
    page = browser.new_page()
    sign_in(page, gateway, "u-auditor-5", "auditor")
    page.goto(gateway.url + "/console/tools")
    assert "no catalog (data.toolgate.catalog)" in page.locator("#catalog-error").inner_text()
    assert "no family" in page.locator('#tools tr.tool[data-tool="processPayment"] .families').inner_text()
    page.close()
