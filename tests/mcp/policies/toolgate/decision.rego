# A small test policy of the MCP gateway tests (not the shipped library).
#
# `data.toolgate.capability` (asked with input {subject, tool}): may the caller use the tool at
# all? Denied by role grants (`data.roles[role].tools`) and by input-independent rules
# (destructive tools, by their MCP annotations, need a role with `destructive_tools`).
#
# `data.toolgate.decision`: deny > user-approval > allow. The capability denials, plus rules on
# the call's input: a note may not mention a password; a transfer over the threshold needs the
# approval of an approver (or of the account holder herself); private documents may not be read;
# an upstream named in `data.read_only_upstreams` may only be read (`input.tool.upstream`).
package toolgate

import rego.v1

roles contains role if {
	some role in input.subject.roles
	is_string(role)
}

granted if {
	some role in roles
	input.tool.name in data.roles[role].tools
}

destructive_allowed if {
	some role in roles
	data.roles[role].destructive_tools == true
}

destructive if {
	input.tool.annotations.readOnlyHint == false
	input.tool.annotations.destructiveHint == true
}

capability_deny contains sprintf("no role of the caller may use %s", [input.tool.name]) if not granted

capability_deny contains sprintf("%s is destructive and no role of the caller may use destructive tools", [input.tool.name]) if {
	destructive
	not destructive_allowed
}

capability := {"decision": "deny", "reasons": sort(capability_deny)} if {
	count(capability_deny) > 0
} else := {"decision": "allow", "reasons": ["the caller may use this tool"]}

deny contains reason if some reason in capability_deny

deny contains "notes must not hold passwords" if {
	input.tool.name == "add_note"
	contains(lower(input.call.input.text), "password")
}

deny contains "the approver rejected this call" if input.approval.approved == false

deny contains sprintf("upstream %s may only be read", [input.tool.upstream]) if {
	input.tool.upstream in data.read_only_upstreams
	not input.tool.annotations.readOnlyHint
}

# AuthZEN requests about documents (resource type "document"): private ones may not be read.
deny contains sprintf("document %s is private", [input.call.input.resource.id]) if {
	input.tool.name in {"read", "can_read"}
	input.call.input.resource.type == "document"
	input.call.input.resource.id in data.documents.private
}

approval_required contains sprintf("transfers over %d need approval", [data.transfers.approval_over]) if {
	input.tool.name == "transfer"
	input.call.input.amount > data.transfers.approval_over
}

approval_satisfied if {
	input.approval.approved == true
	some role in input.approval.approver.roles
	role in data.approvals.approver_roles
}

default decision := {"decision": "deny", "reasons": ["no rule allows this call"]}

decision := {"decision": "deny", "reasons": sort(deny)} if {
	count(deny) > 0
} else := {
	"decision": "user-approval",
	"reasons": sort(approval_required),
	"approval": {
		"reason": concat("; ", sort(approval_required)),
		"approver_roles": data.approvals.approver_roles,
		"ttl_s": data.approvals.ttl_s,
	},
} if {
	count(approval_required) > 0
	not approval_satisfied
} else := {"decision": "allow", "reasons": ["allowed by the test policy"]}
