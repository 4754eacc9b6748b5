# The toolgate combining library (DESIGN §3).
#
# The gateway queries `data.toolgate.decision`. Tool-family packages under `policies/tools/`
# (package `tools.<family>`) contribute:
#
#   deny contains reason if { ... }               # a human sentence; deny always wins
#   approval_required contains reason if { ... }  # a human must approve first
#   allow if { ... }                              # the call is fine as it is
#   approver_roles := ["approver"]                # optional: who may approve this family's calls
#   limits contains lib.count_limit(...)          # optional: counts and budgets the gateway
#                                                 # reserves when the call is allowed
#
# Resolution: deny > user-approval > allow > default deny. A verified approval
# (`input.approval`, set only by the gateway after it verified a signed grant) satisfies
# `approval_required` when the approver holds one of the required approver roles; it never
# overrides a deny. Role grants (`data.roles[role].tools`) and unregistered (dynamic) tools are
# enforced here, so no family rule and no approval can bypass them.
#
# Identity comes from `input.subject` only (verified claims); `input.context` is caller-supplied
# and is never read by this library.
package toolgate

import rego.v1

import data.toolgate.lib

# --- subject and tool --------------------------------------------------------------------

# The subject's roles (verified JWT claims). Non-string entries are ignored.
subject_roles contains role if {
	is_array(input.subject.roles)
	some role in input.subject.roles
	is_string(role)
}

registered_tool if input.tool.registered == true

# A registered tool is usable only if one of the subject's roles lists it.
tool_granted if {
	some role in subject_roles
	input.tool.name in data.roles[role].tools
}

# Unregistered tools need a role with `dynamic_tools: true`.
dynamic_tools_granted if {
	some role in subject_roles
	data.roles[role].dynamic_tools == true
}

role_denial := sprintf("role %s may not use tool %v", [concat(", ", sort(subject_roles)), input.tool.name]) if {
	count(subject_roles) == 1
} else := sprintf("roles %s may not use tool %v", [concat(", ", sort(subject_roles)), input.tool.name]) if {
	count(subject_roles) > 1
} else := sprintf("a subject without roles may not use tool %v", [input.tool.name])

# --- the library's own rules ---------------------------------------------------------------

library_deny contains role_denial if {
	registered_tool
	not tool_granted
}

library_deny contains "unregistered tool is not permitted for this role" if {
	not registered_tool
	not dynamic_tools_granted
}

library_deny contains "the approver rejected this call" if input.approval.approved == false

library_approval contains "unregistered tool needs human approval" if {
	not registered_tool
	dynamic_tools_granted
}

# --- collected family rules ----------------------------------------------------------------

deny_reasons contains reason if some reason in library_deny

deny_reasons contains reason if {
	some family
	some reason in data.tools[family].deny
}

approval_reasons contains reason if some reason in library_approval

approval_reasons contains reason if {
	some family
	some reason in data.tools[family].approval_required
}

allowed if {
	some family
	data.tools[family].allow == true
}

# --- approvals -----------------------------------------------------------------------------

# data.approvals is read key by key: a reference to all of `data` would make every rule recursive.
default_approver_roles := data.approvals.default_approver_roles if {
	is_array(data.approvals.default_approver_roles)
} else := ["approver"]

# A positive whole number of seconds, else 900.
approval_ttl_s := data.approvals.default_ttl_s if {
	is_number(data.approvals.default_ttl_s)
	data.approvals.default_ttl_s == floor(data.approvals.default_ttl_s)
	data.approvals.default_ttl_s > 0
} else := 900

family_approver_roles(family) := data.tools[family].approver_roles if {
	data.tools[family].approver_roles
} else := default_approver_roles

# Roles that may approve this call: those of every family that asks for approval, plus the
# defaults when the library itself asks (dynamic tools).
required_approver_roles contains role if {
	some family
	count(data.tools[family].approval_required) > 0
	some role in family_approver_roles(family)
}

required_approver_roles contains role if {
	count(library_approval) > 0
	some role in default_approver_roles
}

# A verified, positive approval by someone holding a required approver role.
approval_satisfied if {
	input.approval.approved == true
	some role in input.approval.approver.roles
	role in required_approver_roles
}

approver_id := object.get(input.approval, ["approver", "id"], "an approver")

# --- the decision --------------------------------------------------------------------------

default verdict := {"decision": "deny", "reasons": ["no policy rule allows this call"]}

verdict := {"decision": "deny", "reasons": sort(deny_reasons)} if {
	count(deny_reasons) > 0
} else := {
	"decision": "user-approval",
	"reasons": sort(approval_reasons),
	"approval": {
		"reason": concat("; ", sort(approval_reasons)),
		"approver_roles": sort(required_approver_roles),
		"ttl_s": approval_ttl_s,
	},
} if {
	count(approval_reasons) > 0
	not approval_satisfied
} else := {
	"decision": "allow",
	"reasons": [sprintf("%s (approved by %v)", [reason, approver_id]) | some reason in sort(approval_reasons)],
} if {
	count(approval_reasons) > 0
	approval_satisfied
} else := {"decision": "allow", "reasons": ["allowed by policy"]} if {
	allowed
}

# --- what the gateway enforces (docs/session.md) -----------------------------------------------

# Counts and budgets of the families (`limits contains lib.count_limit(...)`), reserved
# atomically by the gateway when the call is allowed; rate limits from policy data
# (data.rate_limits), counted on every decision. Members appear only when there are some.
family_limits := sort([limit | some family; some limit in data.tools[family].limits])

rate_limit_list := sort([rate | some rate in lib.rate_limits])

limits_member := {"limits": family_limits} if {
	verdict.decision == "allow"
	count(family_limits) > 0
} else := {}

rate_limits_member := {"rate_limits": rate_limit_list} if count(rate_limit_list) > 0 else := {}

decision := object.union(verdict, object.union(limits_member, rate_limits_member))
