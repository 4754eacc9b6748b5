# METADATA
# title: toolgate capability document
# description: |
#   Whether a caller may use a tool at all, before any call: the answer behind
#   GET /v1/capabilities and the MCP gateway's tools/list. Asked with
#   {"subject": {"id", "tenant", "roles"}, "tool": {...}} only (no call, context or history),
#   so it reads only what does not depend on a call's input: the role grants (data.roles),
#   the families that govern the tool (their `governs` declarations), the families'
#   `unavailable` contributions (rules on the subject, tenant and tool only) and the
#   dynamic-tool grant. "allow" means some call could be allowed, "user-approval" that calls would need
#   an approval; every call is still decided in full by data.toolgate.decision.
package toolgate.capability

# The package is the capability document: {"decision": ..., "reasons": [...]}.
default decision := "deny"

decision := "allow" if {
	input.tool.registered == true
	data.toolgate.tool_granted
	count(data.toolgate.families) > 0
	count(unavailable) == 0
}

decision := "user-approval" if {
	input.tool.registered == false
	data.toolgate.dynamic_tools_granted
}

# What the consulted families say makes the tool unavailable whatever the input: each a
# {"rule", "message"} that reads input.subject and input.tool only (the families deny with the
# same contributions on every call).
unavailable contains c if {
	some family in data.toolgate.families
	some c in data.tools[family].unavailable
	is_string(c.message)
}

default reasons := ["no policy rule allows this tool"]

reasons := [data.toolgate.role_denial] if {
	input.tool.registered == true
	not data.toolgate.tool_granted
}

reasons := [msg] if {
	input.tool.registered == true
	data.toolgate.tool_granted
	count(data.toolgate.families) == 0
	msg := sprintf("no policy family governs tool %v version %v", [input.tool.name, input.tool.version])
}

reasons := sort([c.message | some c in unavailable]) if {
	input.tool.registered == true
	data.toolgate.tool_granted
	count(unavailable) > 0
}

reasons := ["the subject's roles grant this tool"] if decision == "allow"

reasons := ["unregistered tool needs human approval"] if decision == "user-approval"
