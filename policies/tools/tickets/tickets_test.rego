package tools.tickets_test

import data.toolgate.fixtures_test as fixtures

ticket := {"title": "Printer", "description": "It is on fire", "priority": "low", "clientMutationId": "9f1c6f0e"}

test_create_ticket_v1_allowed if {
	fixtures.expect(fixtures.call(fixtures.agent, "createTicket", ticket), {
		"decision": "allow",
		"reasons": ["allowed by policy"],
		"rules": {"tickets.valid_ticket"},
	})
}

test_other_version_not_governed if {
	fixtures.expect(fixtures.call_version(fixtures.agent, "createTicket", "2", ticket), {
		"decision": "deny",
		"rules": {"toolgate.no_family"},
	})
}

test_unregistered_create_ticket_is_a_dynamic_tool if {
	fixtures.expect(fixtures.dynamic(fixtures.agent, "createTicket", ticket), {
		"decision": "deny",
		"rules": {"toolgate.dynamic_tool_not_permitted"},
	})
}

test_support_agent_and_admin_create_tickets if {
	every role in ["support_agent", "admin"] {
		fixtures.expect(fixtures.call(fixtures.subject("u-1", "acme", [role]), "createTicket", ticket), {"decision": "allow"})
	}
}

test_auditor_may_not_create_tickets if {
	fixtures.expect(fixtures.call(fixtures.auditor, "createTicket", ticket), {
		"decision": "deny",
		"reasons": ["role auditor may not use tool createTicket"],
	})
}
