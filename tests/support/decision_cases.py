"""One table of decision cases over every shipped tool: used through the HTTP API with the
embedded engine and with the OPA sidecar, which must give identical decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KNOWN_IBAN = "GB29NWBK60161331926819"
ATTACKER_IBAN = "US133000000121212121212"
TICKET = {"title": "Printer on fire", "description": "Third floor printer is on fire.", "priority": "high"}


@dataclass(frozen=True)
class DecisionCase:
    id: str
    tool: str
    input: dict[str, Any]
    roles: tuple[str, ...]
    expected: str
    tenant: str = "acme"
    sub: str = "u-1"
    reason_contains: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _ticket(**changes: Any) -> dict[str, Any]:
    return {**TICKET, "clientMutationId": "6f1c2b1e-9a8d-4c3b-8e7f-1a2b3c4d5e6f", **changes}


BANK = {"tenant": "bank-demo", "sub": "emma", "roles": ("account_holder",)}

CASES = [
    # createTicket
    DecisionCase("ticket-agent-allow", "createTicket", _ticket(), ("support_agent",), "allow"),
    DecisionCase("ticket-admin-allow", "createTicket", _ticket(), ("admin",), "allow"),
    DecisionCase("ticket-auditor-deny", "createTicket", _ticket(), ("auditor",), "deny", reason_contains="may not use"),
    # processPayment
    DecisionCase("pay-admin-small-allow", "processPayment", {"amount": 120.5, "currency": "EUR", "recipient": "acct_42"}, ("admin",), "allow"),
    DecisionCase("pay-admin-large-approval", "processPayment", {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}, ("admin",), "user-approval", reason_contains="1000"),
    DecisionCase("pay-agent-deny", "processPayment", {"amount": 10, "currency": "EUR", "recipient": "acct_42"}, ("support_agent",), "deny"),
    DecisionCase("pay-approver-deny", "processPayment", {"amount": 10, "currency": "EUR", "recipient": "acct_42"}, ("approver",), "deny"),
    # runCommand
    DecisionCase("cmd-admin-approval", "runCommand", {"command": "systemctl restart cups"}, ("admin",), "user-approval"),
    DecisionCase("cmd-agent-deny", "runCommand", {"command": "ls"}, ("support_agent",), "deny"),
    # deleteFile
    DecisionCase("delete-admin-override-allow", "deleteFile", {"path": "/srv/tmp/old.log"}, ("admin",), "allow"),
    DecisionCase("delete-admin-no-override-deny", "deleteFile", {"path": "/srv/tmp/old.log"}, ("admin",), "deny", tenant="globex"),
    DecisionCase("delete-agent-deny", "deleteFile", {"path": "/srv/tmp/old.log"}, ("support_agent",), "deny"),
    # readFile
    DecisionCase("read-agent-allow", "readFile", {"path": "/srv/reports/q1.csv"}, ("support_agent",), "allow"),
    DecisionCase("read-shadow-deny", "readFile", {"path": "/etc/shadow"}, ("admin",), "deny"),
    DecisionCase("read-traversal-deny", "readFile", {"path": "/srv/../etc/shadow"}, ("support_agent",), "deny"),
    DecisionCase("read-no-role-deny", "readFile", {"path": "/srv/a"}, (), "deny"),
    # exportReport
    DecisionCase("export-agent-allow", "exportReport", {"start_date": "2026-01-01", "end_date": "2026-01-31"}, ("support_agent",), "allow"),
    DecisionCase("export-too-long-deny", "exportReport", {"start_date": "2020-01-01", "end_date": "2026-01-31"}, ("admin",), "deny"),
    DecisionCase("export-developer-deny", "exportReport", {"start_date": "2026-01-01", "end_date": "2026-01-02"}, ("developer",), "deny"),
    # dynamic tools
    DecisionCase("dynamic-developer-approval", "kubectl", {"verb": "get", "resource": "pods"}, ("developer",), "user-approval"),
    DecisionCase("dynamic-agent-deny", "kubectl", {"verb": "get", "resource": "pods"}, ("support_agent",), "deny"),
    DecisionCase("unknown-version-is-dynamic", "readFile", {"path": "/srv/a"}, ("support_agent",), "deny", extra={"version": "2"}),
    # AgentDojo banking tools
    DecisionCase("bank-get-iban-allow", "get_iban", {}, **BANK, expected="allow"),
    DecisionCase("bank-get-balance-allow", "get_balance", {}, **BANK, expected="allow"),
    DecisionCase("bank-recent-allow", "get_most_recent_transactions", {"n": 10}, **BANK, expected="allow"),
    DecisionCase("bank-scheduled-allow", "get_scheduled_transactions", {}, **BANK, expected="allow"),
    DecisionCase("bank-read-file-allow", "read_file", {"file_path": "bill-december-2023.txt"}, **BANK, expected="allow"),
    DecisionCase("bank-user-info-allow", "get_user_info", {}, **BANK, expected="allow"),
    DecisionCase("bank-send-known-allow", "send_money", {"recipient": KNOWN_IBAN, "amount": 50, "subject": "rent", "date": "2022-01-01"}, **BANK, expected="allow"),
    DecisionCase("bank-send-attacker-approval", "send_money", {"recipient": ATTACKER_IBAN, "amount": 50, "subject": "x", "date": "2022-01-01"}, **BANK, expected="user-approval"),
    DecisionCase("bank-send-negative-deny", "send_money", {"recipient": KNOWN_IBAN, "amount": -5, "subject": "x", "date": "2022-01-01"}, **BANK, expected="deny"),
    DecisionCase("bank-schedule-known-allow", "schedule_transaction", {"recipient": KNOWN_IBAN, "amount": 20, "subject": "gym", "date": "2022-04-01", "recurring": True}, **BANK, expected="allow"),
    DecisionCase("bank-schedule-attacker-approval", "schedule_transaction", {"recipient": ATTACKER_IBAN, "amount": 20, "subject": "x", "date": "2022-04-01", "recurring": True}, **BANK, expected="user-approval"),
    DecisionCase("bank-update-scheduled-allow", "update_scheduled_transaction", {"id": 7, "amount": 900}, **BANK, expected="allow"),
    DecisionCase("bank-update-scheduled-over-limit-approval", "update_scheduled_transaction", {"id": 7, "amount": 1200}, **BANK, expected="user-approval", reason_contains="amount over 1000"),
    DecisionCase("bank-update-scheduled-redirect-approval", "update_scheduled_transaction", {"id": 7, "recipient": ATTACKER_IBAN}, **BANK, expected="user-approval"),
    DecisionCase("bank-password-approval", "update_password", {"password": "new-password-123"}, **BANK, expected="user-approval"),
    DecisionCase("bank-update-user-info-allow", "update_user_info", {"first_name": "Emma"}, **BANK, expected="allow"),
    DecisionCase("bank-other-role-deny", "send_money", {"recipient": KNOWN_IBAN, "amount": 50, "subject": "x", "date": "2022-01-01"}, ("support_agent",), "deny", tenant="bank-demo", sub="emma"),
    # web and e-mail (a first call of its conversation: nothing untrusted came before)
    DecisionCase("web-fetch-allow", "get_webpage", {"url": "https://www.example.com/news"}, ("user",), "allow"),
    DecisionCase("web-fetch-internal-deny", "get_webpage", {"url": "http://169.254.169.254/latest/meta-data/"}, ("user",), "deny", reason_contains="internal"),
    DecisionCase("web-fetch-file-deny", "get_webpage", {"url": "file:///etc/passwd"}, ("user",), "deny", reason_contains="http"),
    DecisionCase("web-fetch-agent-deny", "get_webpage", {"url": "https://www.example.com/"}, ("support_agent",), "deny", reason_contains="may not use"),
    DecisionCase("email-read-allow", "read_inbox", {"n": 5}, ("user",), "allow"),
    DecisionCase("email-send-allow", "send_email", {"recipients": ["bob@example.com"], "subject": "Notes", "body": "See you."}, ("user",), "allow"),
    DecisionCase("email-send-agent-deny", "send_email", {"recipients": ["bob@example.com"], "subject": "x", "body": "y"}, ("support_agent",), "deny"),
    DecisionCase("email-read-agent-deny", "read_inbox", {"n": 5}, ("support_agent",), "deny", reason_contains="may not use"),
]

_BANKING_INPUTS = {c.tool: c.input for c in CASES if c.tenant == "bank-demo"}
CASES += [
    DecisionCase(f"bank-{tool}-wrong-role-deny", tool, tool_input, ("support_agent",), "deny",
                 tenant="bank-demo", sub="emma", reason_contains="may not use")
    for tool, tool_input in sorted(_BANKING_INPUTS.items())
]
