# Tickets: createTicket v1 (title, description, priority low|normal|high, clientMutationId).
#
# Who may create tickets is decided by role grants in data.roles (support_agent, admin);
# the contract already validated the input, so a registered v1 call is allowed.
package tools.tickets

import rego.v1

call_of(name) if {
	input.tool.registered == true
	input.tool.name == name
	input.tool.version == "1"
}

allow if call_of("createTicket")
