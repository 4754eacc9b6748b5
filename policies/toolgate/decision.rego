# METADATA
# title: toolgate combining library
# description: |
#   Combines the tool families under data.tools into one decision. A family (package
#   tools.<family>, folder policies/tools/<family>/) declares the tools it governs in
#   `governs` and contributes {"rule", "message"} objects to three sets: `deny`,
#   `approval_required` and `allow`. Only the families that declare the requested tool are
#   consulted. Resolution: deny > user-approval > allow > default deny. Role grants
#   (data.roles) and unregistered (dynamic) tools are enforced here, before any family.
#   Identity comes from input.subject only; input.context is never read.
#   Written for speed: every rule here is evaluated on every call (docs/policy-authors.md).
package toolgate

import data.toolgate.lib

# --- subject and tool --------------------------------------------------------------------

# A registered tool is usable only if one of the subject's roles (verified claims) lists it by
# its qualified name (lib.qualified_name: "travel/x" for tool x of namespace travel), so tools of
# one name in two namespaces never share a grant.
tool_granted if {
	some role in input.subject.roles
	lib.qualified_name in data.roles[role].tools
}

# Unregistered tools need a role with `dynamic_tools: true`.
dynamic_tools_granted if {
	some role in input.subject.roles
	data.roles[role].dynamic_tools == true
}

# The subject's roles that are strings, for messages.
subject_roles contains role if {
	some role in input.subject.roles
	is_string(role)
}

role_denial := sprintf("role %s may not use tool %v", [concat(", ", sort(subject_roles)), lib.qualified_name]) if {
	count(subject_roles) == 1
} else := sprintf("roles %s may not use tool %v", [concat(", ", sort(subject_roles)), lib.qualified_name]) if {
	count(subject_roles) > 1
} else := sprintf("a subject without roles may not use tool %v", [lib.qualified_name])

# --- scoping: the families that govern the requested tool ------------------------------------

# Each family declares the tools it governs, one rule per tool name:
#   governs.<tool> := {"versions"?: ["1"], "namespace"?: "<ns>", "shared_with"?: ["<family>"]}
# (no versions: every version; no namespace: ""). The declarations of the requested tool are
# found by one lookup per family (data.tools[family].governs[name]): a family that does not
# declare the tool has no such rule, and no other family rule is evaluated to find them.
default declarations := {}

declarations := {family: declaration |
	some family
	declaration := data.tools[family].governs[input.tool.name]
	declared_namespace := object.get(declaration, "namespace", "")
	requested_namespace := object.get(input.tool, "namespace", "")
	declared_namespace == requested_namespace
	input.tool.version in object.get(declaration, "versions", [input.tool.version])
} if {
	input.tool.registered == true
}

# --- log-only families -----------------------------------------------------------------------
#
# A family with `log_only := true` (and `log_only: true` under METADATA custom) is tried on
# real traffic without deciding anything: its claims are held back from the decision, and the
# decision document reports in `log_only` what the decision would be with every log-only family
# that claims the tool counted as an ordinary family (a decision of the same shape). The
# gateway records it as the call's shadow outcome and never acts on it.
log_only_claims contains family if {
	some family, _ in declarations
	data.tools[family].log_only == true
}

# The claims that count: every declaration but the log-only families'.
claims := object.remove(declarations, log_only_claims)

# Two claims of one tool are fine only when each names the other in `shared_with`.
unshared_claims contains [a, b] if {
	some a, claim_a in claims
	some b, claim_b in claims
	a < b
	not _mutual(claim_a, a, claim_b, b)
}

_mutual(claim_a, a, claim_b, b) if {
	b in object.get(claim_a, "shared_with", [])
	a in object.get(claim_b, "shared_with", [])
}

# The families consulted for this call: the claiming families, unless their claims conflict.
default families := set()

families := object.keys(claims) if count(claims) == 1

families := object.keys(claims) if {
	count(claims) > 1
	count(unshared_claims) == 0
}

# --- rules: every contribution as {"id", "effect": "deny"|"approval"|"allow", "message"} ----
#
# The library's own rules start with a condition on input that OPA indexes
# (input.tool.registered == true/false, input.approval.approved == false), so a call
# evaluates only the ones that apply; then the consulted families' contributions.

_rule(name, effect, message) := {"id": concat(".", ["toolgate", name]), "effect": effect, "message": message}

rules contains _rule("role_not_granted", "deny", role_denial) if {
	input.tool.registered == true
	not tool_granted
}

rules contains _rule("no_family", "deny", msg) if {
	input.tool.registered == true
	count(claims) == 0
	tool_granted
	msg := sprintf("no policy family governs tool %v version %v", [input.tool.name, input.tool.version])
}

rules contains _rule("family_conflict", "deny", msg) if {
	input.tool.registered == true
	count(claims) > 1
	some [a, b] in unshared_claims
	msg := sprintf("tool %v is claimed by families %s and %s without shared_with", [input.tool.name, a, b])
}

rules contains _rule("approval_rejected", "deny", "the approver rejected this call") if {
	input.approval.approved == false
}

# A tool without a contract (registered: false; the gateway always sends the flag, and a call
# without it matches no rule at all: the default denial).
rules contains _rule(
	"dynamic_tool_not_permitted", "deny",
	"unregistered tool is not permitted for this role",
) if {
	input.tool.registered == false
	not dynamic_tools_granted
}

rules contains _rule(
	"dynamic_tool_needs_approval", "approval",
	"unregistered tool needs human approval",
) if {
	input.tool.registered == false
	dynamic_tools_granted
}

# The consulted families' contributions ({"rule": string, "message": string}) by effect.
rules contains {"id": concat(".", [family, c.rule]), "effect": "deny", "message": c.message} if {
	some family in families
	some c in data.tools[family].deny
	is_string(c.rule)
	is_string(c.message)
}

rules contains {"id": concat(".", [family, c.rule]), "effect": "approval", "message": c.message} if {
	some family in families
	some c in data.tools[family].approval_required
	is_string(c.rule)
	is_string(c.message)
}

rules contains {"id": concat(".", [family, c.rule]), "effect": "allow", "message": c.message} if {
	some family in families
	some c in data.tools[family].allow
	is_string(c.rule)
	is_string(c.message)
}

# A contribution that is not {"rule", "message"}, or a set rule that is not a set (`allow if`
# instead of `allow contains`), denies: it cannot be told apart from a deny written wrongly.
# An absent set is well formed (a family without approvals); a present one is the set of its
# {"rule": string, "message": string} members.
# (Each set is named: a reference data.tools[family][name] with a variable name would depend
# on every rule under data.tools, the test packages included.)
rules contains _malformed(family, "deny") if {
	some family in families
	contributions := data.tools[family].deny
	contributions != {c | some c in contributions; is_string(c.rule); is_string(c.message)}
}

rules contains _malformed(family, "approval_required") if {
	some family in families
	contributions := data.tools[family].approval_required
	contributions != {c | some c in contributions; is_string(c.rule); is_string(c.message)}
}

rules contains _malformed(family, "allow") if {
	some family in families
	contributions := data.tools[family].allow
	contributions != {c | some c in contributions; is_string(c.rule); is_string(c.message)}
}

_malformed(family, set_name) := _rule(
	"malformed_rule", "deny",
	sprintf("policy family %s has a malformed %s rule", [family, set_name]),
)

# The effects among the rules.
effects contains r.effect if some r in rules

# Allowed when every consulted family allows (one family for a tool that is not shared).
allowed if {
	count(families) == 1
	"allow" in effects
}

allowed if {
	count(families) > 1
	every family in families {
		some r in _allowances
		startswith(r.id, concat("", [family, "."]))
	}
}

_allowances contains r if {
	some r in rules
	r.effect == "allow"
}

no_rule_allows := _rule("no_rule_allows", "deny", "no policy rule allows this call")

# --- approvals -----------------------------------------------------------------------------

# data.approvals is read key by key: a reference to all of `data` would make every rule recursive.
default default_approver_roles := ["approver"]

default_approver_roles := data.approvals.default_approver_roles if {
	is_array(data.approvals.default_approver_roles)
}

# A positive whole number of seconds, else 900.
default approval_ttl_s := 900

approval_ttl_s := data.approvals.default_ttl_s if {
	is_number(data.approvals.default_ttl_s)
	data.approvals.default_ttl_s == floor(data.approvals.default_ttl_s)
	data.approvals.default_ttl_s > 0
}

# Roles that may approve this call: those of every family that asks for approval, plus the
# defaults when the library itself asks (dynamic tools).
# The families that ask for approval, and the approver roles each names (when it names them).
_asking_families contains family if {
	some family in families
	asks := data.tools[family].approval_required
	is_set(asks)
	count(asks) > 0
}

_family_approver_roles[family] := roles if {
	some family in _asking_families
	roles := data.tools[family].approver_roles
	is_array(roles)
}

# The library asks for approval of an unregistered tool.
_library_asks if {
	input.tool.registered == false
	dynamic_tools_granted
}

required_approver_roles contains role if {
	some family in _asking_families
	some role in _family_approver_roles[family]
}

required_approver_roles contains role if {
	some family in _asking_families
	not _family_approver_roles[family]
	some role in default_approver_roles
}

required_approver_roles contains role if {
	_library_asks
	some role in default_approver_roles
}

# Approval rules a family may declare beside its approver roles, for the calls it asks about
# (`approval_rules := {"quorum": n, "allow_self_approval": true}`): of the asking families, the
# largest quorum counts, and the requester may confirm her own call (the gateway then accepts
# only her step-up token) only when every asking family allows it and the library itself does
# not ask.
_family_quorums contains quorum if {
	some family in _asking_families
	quorum := data.tools[family].approval_rules.quorum
	is_number(quorum)
}

_self_approval_allowed if {
	count(_asking_families) > 0
	not _library_asks
	every family in _asking_families {
		data.tools[family].approval_rules.allow_self_approval == true
	}
}

default _quorum_member := {}

_quorum_member := {"quorum": max(_family_quorums)} if count(_family_quorums) > 0

default _self_approval_member := {}

_self_approval_member := {"allow_self_approval": true} if _self_approval_allowed

# An asking family that lets only the requester answer (`"requester_only": true`: her own
# account, say) makes the approval hers alone: no other holder of the role sees or answers it.
_requester_only if {
	some family in _asking_families
	data.tools[family].approval_rules.requester_only == true
}

default _requester_only_member := {}

_requester_only_member := {"requester_only": true} if _requester_only

approval_document := object.union_n([
	{
		"reason": concat("; ", approval_reasons),
		"approver_roles": sort(required_approver_roles),
		"ttl_s": approval_ttl_s,
	},
	_quorum_member,
	_self_approval_member,
	_requester_only_member,
])

# A verified, positive approval by someone holding a required approver role.
approval_satisfied if {
	input.approval.approved == true
	some role in input.approval.approver.roles
	role in required_approver_roles
}

approver_id := object.get(input.approval, ["approver", "id"], "an approver")

# The approval that satisfied the approval rules, as an allow.
default approval_granted := set()

approval_granted := {_rule("approval_granted", "allow", sprintf("approved by %v", [approver_id]))} if {
	"approval" in effects
	approval_satisfied
}

approval_reasons := sort({r.message | some r in rules; r.effect == "approval"})

# --- the decision --------------------------------------------------------------------------

# METADATA
# title: The decision for one tool call
# description: |
#   {"decision": "allow"|"deny"|"user-approval", "reasons": [string],
#    "matched_rules": [{"id", "effect": "deny"|"approval"|"allow", "message"}],
#    "approval"?: {"reason", "approver_roles", "ttl_s", "quorum"?, "allow_self_approval"?},
#    "limits"?: [limit] (an allow's), "rate_limits"?: [rate limit] (docs/session.md),
#    "log_only"?: <the same shape, with the log-only families that claim the tool counted>}
# entrypoint: true
# scope: document
decision := _decision if not _log_only_view

else := object.union(_decision, {"log_only": _log_only_view})

# The whole decision again, log-only families counted: only for calls a log-only family claims.
_log_only_view := view if {
	count(log_only_claims) > 0

	# regal ignore:with-outside-test-context
	view := _decision with log_only_claims as set()
}

default _decision := {
	"decision": "deny",
	"reasons": ["no policy rule allows this call"],
	"matched_rules": [{"id": "toolgate.no_rule_allows", "effect": "deny", "message": "no policy rule allows this call"}],
}

# An allow carries the limits and the rate limits, a deny or a user-approval the rate limits.
_decision := object.union_n([verdict, limits_member, rate_limits_member]) if {
	verdict.decision == "allow"
} else := object.union(verdict, rate_limits_member)

# Resolution: deny > user-approval > allow > default deny. matched_rules holds every rule that
# matched, whatever the outcome, sorted by effect (allow, approval, deny), then id.
verdict := {
	"decision": "deny",
	"reasons": sort({r.message | some r in rules; r.effect == "deny"}),
	"matched_rules": sort(rules | approval_granted),
} if {
	"deny" in effects
} else := {
	"decision": "user-approval",
	"reasons": approval_reasons,
	"matched_rules": sort(rules),
	"approval": approval_document,
} if {
	"approval" in effects
	not approval_satisfied
} else := {
	"decision": "allow",
	"reasons": [sprintf("%s (approved by %v)", [reason, approver_id]) | some reason in approval_reasons],
	"matched_rules": sort(rules | approval_granted),
} if {
	"approval" in effects
} else := {"decision": "allow", "reasons": ["allowed by policy"], "matched_rules": sort(rules)} if {
	allowed
} else := {
	"decision": "deny",
	"reasons": ["no policy rule allows this call"],
	"matched_rules": sort(rules | {no_rule_allows}),
}

# --- what the gateway enforces (docs/session.md) -----------------------------------------------

# The consulted families' counts and budgets (`limits contains lib.count_limit(...)`), which
# the gateway reserves atomically when it answers allow, and the rate limits of policy data
# (lib.rate_limits), which count every decision: members of the decision (above) only when
# they have entries.
default limits_member := {}

limits_member := {"limits": sort(family_limits)} if {
	family_limits := [limit | some family in families; some limit in data.tools[family].limits]
	count(family_limits) > 0
}

default rate_limits_member := {}

rate_limits_member := {"rate_limits": sort(lib.rate_limits)} if count(lib.rate_limits) > 0
