"""A test-only policy over ``input.session`` and the gateway-enforced ``limits`` and
``rate_limits`` (docs/session.md), written into a policy directory for the session API tests
and the gunicorn concurrency tests. It grants every tool to every caller: what it tests is the
session, not the roles of the shipped policies.

- deleteFile: one per conversation, at most 3 per subject a day (limits);
- createTicket: at most ``data.limits.tickets_per_conversation`` per conversation in an hour;
- processPayment: at most 1000 a day per subject, summed over ``/amount`` (a budget);
- send_money: user-approval unless the recipient came from a trusted tool result;
- schedule_transaction: at most 100 a day per subject over ``/amount`` (a budget); one over 50
  needs approval (the grant's call is asked of the policy twice); rate limited by policy data;
- the "rule of two": user-approval for a tool whose output is an external channel in a
  conversation that holds both untrusted content and private data;
- rate limits per tool from ``data.rate_limits.tools`` (policy data shipped with the bundle);
- readFile: denied from the 3rd call per conversation in a minute (a snapshot rule, to show
  ``input.session`` counts; not safe under concurrency, unlike the limits).
"""

from __future__ import annotations

import json
from pathlib import Path

SESSION_POLICY = """package toolgate

import rego.v1

session := input.session

tool := input.tool.name

limits := [
	{"id": "delete.conversation", "scope": "conversation", "window_s": 86400, "max": 1, "message": "one delete per conversation"},
	{"id": "delete.subject", "scope": "subject", "window_s": 86400, "max": 3, "message": "at most 3 deletes a day"},
] if {
	tool == "deleteFile"
} else := [{"id": "tickets.conversation", "scope": "conversation", "window_s": 3600,
	"max": data.limits.tickets_per_conversation}] if {
	tool == "createTicket"
} else := [{"id": "payments.daily", "scope": "subject", "window_s": 86400, "max": 1000, "amount_field": "/amount"}] if {
	tool == "processPayment"
} else := [{"id": "scheduled.daily", "scope": "subject", "window_s": 86400, "max": 100, "amount_field": "/amount"}] if {
	tool == "schedule_transaction"
} else := []

rate_limits contains {"id": concat(".", ["tool", tool]), "scope": "subject", "count": rule.count, "per_s": rule.per_s} if {
	rule := data.rate_limits.tools[tool]
}

rule_of_two if {
	"external_comms" in input.tool.output_labels
	"untrusted_content" in session.conversation.labels
	"private_data" in session.conversation.labels
}

trusted_recipient if input.call.input.recipient in session.conversation.trusted_counterparties

reads_this_minute := object.get(session.conversation.calls["1m"], "readFile", 0)

decision := {"decision": "user-approval", "reasons": ["untrusted content, private data and an external channel in one conversation"]} if {
	rule_of_two
} else := {"decision": "user-approval", "reasons": ["the recipient did not come from a trusted tool result"]} if {
	tool == "send_money"
	not trusted_recipient
} else := {"decision": "user-approval", "reasons": ["a transaction over 50 needs approval"], "rate_limits": [r | some r in rate_limits]} if {
	tool == "schedule_transaction"
	input.call.input.amount > 50
	not input.approval.approved
} else := {"decision": "deny", "reasons": ["at most 2 reads a minute in a conversation"]} if {
	tool == "readFile"
	reads_this_minute >= 2
} else := {"decision": "allow", "reasons": ["allowed"], "limits": limits, "rate_limits": [r | some r in rate_limits]}
"""

SESSION_DATA = {
    "limits": {"tickets_per_conversation": 3},
    "rate_limits": {"tools": {"get_balance": {"count": 2, "per_s": 60}, "schedule_transaction": {"count": 3, "per_s": 3600}}},
}


def write_session_policy(directory: Path) -> Path:
    """Write the policy and its data into ``directory`` (a bundle directory); returns it."""
    (directory / "toolgate").mkdir(parents=True, exist_ok=True)
    (directory / "toolgate" / "decision.rego").write_text(SESSION_POLICY)
    (directory / "data.json").write_text(json.dumps(SESSION_DATA))
    return directory


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.support.session_policy DIR  (writes the session test policy into DIR)")
    print(write_session_policy(Path(sys.argv[1])))
