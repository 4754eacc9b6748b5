package tools.tickets_test

import rego.v1

import data.tools.tickets

agent := {"id": "u-1", "tenant": "acme", "roles": ["support_agent"]}

ticket := {"title": "Printer", "description": "It is on fire", "priority": "low", "clientMutationId": "9f1c6f0e-6d3b-4b8e-9a43-2f0d9b1f7a10"}

call_input(subject, name, version, args) := {
	"subject": subject,
	"tool": {"name": name, "version": version, "registered": true, "mutating": true, "risk": "low"},
	"call": {"id": null, "input": args},
	"context": {},
	"history": {},
	"approval": null,
	"request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
}

test_create_ticket_v1_allowed if {
	tickets.allow with input as call_input(agent, "createTicket", "1", ticket)
}

test_create_ticket_other_version_not_allowed if {
	not tickets.allow with input as call_input(agent, "createTicket", "2", ticket)
}

test_other_tool_not_allowed if {
	not tickets.allow with input as call_input(agent, "readFile", "1", {"path": "/tmp/x"})
}

test_unregistered_create_ticket_not_allowed if {
	doc := object.union(call_input(agent, "createTicket", "1", ticket), {"tool": {"registered": false}})
	not tickets.allow with input as doc
}

test_support_agent_and_admin_create_tickets if {
	every role in ["support_agent", "admin"] {
		subject := {"id": "u-1", "tenant": "acme", "roles": [role]}
		d := data.toolgate.decision with input as call_input(subject, "createTicket", "1", ticket)
		d.decision == "allow"
	}
}

test_auditor_may_not_create_tickets if {
	subject := {"id": "u-1", "tenant": "acme", "roles": ["auditor"]}
	d := data.toolgate.decision with input as call_input(subject, "createTicket", "1", ticket)
	d == {"decision": "deny", "reasons": ["role auditor may not use tool createTicket"]}
}
