# METADATA
# title: toolgate capability document
# description: |
#   Whether a caller may use a tool at all, before any call: the answer behind
#   GET /v1/capabilities and the MCP gateway's tools/list. Asked with
#   {"subject": {"id", "tenant", "roles"}, "tool": {...}} only (no call, context or history),
#   so it reads only what does not depend on a call's input: the role grants (data.roles),
#   the families that govern the tool (their `governs` declarations) and the dynamic-tool
#   grant. "allow" means some call could be allowed, "user-approval" that calls would need
#   an approval; every call is still decided in full by data.toolgate.decision.
package toolgate.capability

# The package is the capability document: {"decision": ..., "reasons": [...]}.
default decision := "deny"

decision := "allow" if {
	input.tool.registered == true
	data.toolgate.tool_granted
	count(data.toolgate.families) > 0
}

decision := "user-approval" if {
	input.tool.registered == false
	data.toolgate.dynamic_tools_granted
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

reasons := ["the subject's roles grant this tool"] if decision == "allow"

reasons := ["unregistered tool needs human approval"] if decision == "user-approval"
