# Tests of the combining library: resolution order, decision shape, approvals, role grants,
# dynamic tools and untrusted context. Family packages are replaced with `with data.tools as`
# where a test is about the library alone.
package toolgate_test

import rego.v1

import data.toolgate

agent := {"id": "u-1", "tenant": "acme", "roles": ["support_agent"]}

admin := {"id": "u-2", "tenant": "acme", "roles": ["admin"]}

developer := {"id": "u-3", "tenant": "acme", "roles": ["developer"]}

call_input(subject, name, args) := {
	"subject": subject,
	"tool": {"name": name, "version": "1", "registered": true, "mutating": true, "risk": "high"},
	"call": {"id": "call_7", "input": args},
	"context": {},
	"history": {},
	"approval": null,
	"request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
}

dynamic_input(subject, name) := object.union(
	call_input(subject, name, {"anything": 1}),
	{"tool": {"name": name, "version": "1", "registered": false, "mutating": true, "risk": "high"}},
)

approval_by(roles) := {"approval_id": "ap-1", "approved": true, "approver": {"id": "u-9", "roles": roles}}

with_approval(doc, approval) := object.union(doc, {"approval": approval})

ticket := {"title": "Printer", "description": "It is on fire", "priority": "high", "clientMutationId": "9f1c6f0e-6d3b-4b8e-9a43-2f0d9b1f7a10"}

big_payment := {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}

# A family that contributes one rule of each kind, to test the library alone.
fake_tools := {"fake": {
	"deny": {"zeta reason", "alpha reason"},
	"approval_required": {"needs a look"},
	"allow": true,
}}

# --- resolution order and shape ------------------------------------------------------------

test_allow_shape if {
	d := toolgate.decision with input as call_input(agent, "createTicket", ticket)
	d == {"decision": "allow", "reasons": ["allowed by policy"]}
}

test_default_deny_when_no_rule_allows if {
	d := toolgate.decision with input as call_input(agent, "createTicket", ticket)
		with data.tools as {}
	d == {"decision": "deny", "reasons": ["no policy rule allows this call"]}
}

test_default_deny_for_unknown_version if {
	doc := object.union(call_input(admin, "createTicket", ticket), {"tool": {"version": "2"}})
	d := toolgate.decision with input as doc
	d == {"decision": "deny", "reasons": ["no policy rule allows this call"]}
}

test_default_deny_without_input if {
	d := toolgate.decision
	d.decision == "deny"
}

test_deny_beats_approval_and_allow_with_sorted_reasons if {
	d := toolgate.decision with input as call_input(agent, "createTicket", ticket)
		with data.tools as fake_tools
	d == {"decision": "deny", "reasons": ["alpha reason", "zeta reason"]}
}

test_approval_beats_allow if {
	tools := {"fake": {"approval_required": {"needs a look"}, "allow": true}}
	d := toolgate.decision with input as call_input(agent, "createTicket", ticket)
		with data.tools as tools
	d.decision == "user-approval"
	d.reasons == ["needs a look"]
}

test_allow_needs_true_not_truthy if {
	d := toolgate.decision with input as call_input(agent, "createTicket", ticket)
		with data.tools as {"fake": {"allow": "yes"}}
	d.decision == "deny"
}

test_user_approval_shape if {
	d := toolgate.decision with input as call_input(admin, "processPayment", big_payment)
	d == {
		"decision": "user-approval",
		"reasons": ["payment over 1000 needs approval"],
		"approval": {"reason": "payment over 1000 needs approval", "approver_roles": ["approver"], "ttl_s": 900},
	}
}

test_approval_reasons_joined_and_sorted if {
	tools := {"fake": {"approval_required": {"b second", "a first"}}}
	d := toolgate.decision with input as call_input(agent, "createTicket", ticket)
		with data.tools as tools
	d.reasons == ["a first", "b second"]
	d.approval.reason == "a first; b second"
}

test_approver_roles_and_ttl_from_data if {
	d := toolgate.decision with input as call_input(admin, "runCommand", {"command": "uptime"})
		with data.approvals as {"default_approver_roles": ["ops"], "default_ttl_s": 60}
	d.decision == "user-approval"
	d.approval.approver_roles == ["ops"]
	d.approval.ttl_s == 60
}

test_approver_roles_and_ttl_fall_back_without_data if {
	d := toolgate.decision with input as call_input(admin, "runCommand", {"command": "uptime"})
		with data.approvals as {}
	d.approval.approver_roles == ["approver"]
	d.approval.ttl_s == 900
}

test_invalid_ttl_in_data_falls_back if {
	every ttl in [0, -5, 90.5, "60", null] {
		d := toolgate.decision with input as call_input(admin, "runCommand", {"command": "uptime"})
			with data.approvals.default_ttl_s as ttl
		d.approval.ttl_s == 900
	}
}

test_approver_roles_that_are_not_a_list_fall_back if {
	d := toolgate.decision with input as call_input(admin, "runCommand", {"command": "uptime"})
		with data.approvals.default_approver_roles as "ops"
	d.approval.approver_roles == ["approver"]
}

test_family_approver_roles_override_default if {
	tools := {"fake": {"approval_required": {"needs a look"}, "approver_roles": ["auditor"]}}
	d := toolgate.decision with input as call_input(agent, "createTicket", ticket)
		with data.tools as tools
	d.approval.approver_roles == ["auditor"]
}

# --- approvals -----------------------------------------------------------------------------

test_verified_approval_satisfies_approval_required if {
	doc := with_approval(call_input(admin, "processPayment", big_payment), approval_by(["approver"]))
	d := toolgate.decision with input as doc
	object.remove(d, ["limits"]) == {"decision": "allow", "reasons": ["payment over 1000 needs approval (approved by u-9)"]}
	d.limits == [{"id": "payments.daily_budget", "scope": "subject", "window_s": 86400, "max": 10000, "amount_field": "/amount"}]
}

test_approval_by_a_role_that_may_not_approve_is_not_enough if {
	doc := with_approval(call_input(admin, "processPayment", big_payment), approval_by(["support_agent"]))
	d := toolgate.decision with input as doc
	d.decision == "user-approval"
}

test_approval_without_approver_roles_is_not_enough if {
	approval := {"approval_id": "ap-1", "approved": true}
	d := toolgate.decision with input as with_approval(call_input(admin, "runCommand", {"command": "id"}), approval)
	d.decision == "user-approval"
}

test_approval_that_is_not_exactly_true_is_not_enough if {
	approval := {"approval_id": "ap-1", "approved": "true", "approver": {"id": "u-9", "roles": ["approver"]}}
	d := toolgate.decision with input as with_approval(call_input(admin, "runCommand", {"command": "id"}), approval)
	d.decision == "user-approval"
}

test_approver_roles_that_are_not_a_list_are_not_enough if {
	approval := {"approval_id": "ap-1", "approved": true, "approver": {"id": "u-9", "roles": "approver"}}
	d := toolgate.decision with input as with_approval(call_input(admin, "runCommand", {"command": "id"}), approval)
	d.decision == "user-approval"
}

test_rejected_approval_denies if {
	approval := {"approval_id": "ap-1", "approved": false, "approver": {"id": "u-9", "roles": ["approver"]}}
	d := toolgate.decision with input as with_approval(call_input(admin, "processPayment", big_payment), approval)
	d == {"decision": "deny", "reasons": ["the approver rejected this call"]}
}

test_approval_never_overrides_family_deny if {
	doc := with_approval(call_input(agent, "createTicket", ticket), approval_by(["approver"]))
	d := toolgate.decision with input as doc
		with data.tools as fake_tools
	d.decision == "deny"
}

test_approval_never_overrides_real_deny if {
	doc := with_approval(call_input(admin, "readFile", {"path": "/etc/shadow"}), approval_by(["approver"]))
	d := toolgate.decision with input as doc
	d.decision == "deny"
}

test_approval_on_an_allowed_call_keeps_allow if {
	doc := with_approval(call_input(agent, "createTicket", ticket), approval_by(["approver"]))
	d := toolgate.decision with input as doc
	d == {"decision": "allow", "reasons": ["allowed by policy"]}
}

# --- role grants ---------------------------------------------------------------------------

test_role_without_grant_is_denied if {
	d := toolgate.decision with input as call_input(agent, "processPayment", {"amount": 5, "currency": "EUR", "recipient": "a"})
	d == {"decision": "deny", "reasons": ["role support_agent may not use tool processPayment"]}
}

test_role_denial_cannot_be_bypassed_by_approval if {
	doc := with_approval(call_input(agent, "runCommand", {"command": "id"}), approval_by(["approver", "admin"]))
	d := toolgate.decision with input as doc
	d == {"decision": "deny", "reasons": ["role support_agent may not use tool runCommand"]}
}

test_role_denial_lists_every_role_sorted if {
	subject := {"id": "u-1", "tenant": "acme", "roles": ["support_agent", "auditor"]}
	d := toolgate.decision with input as call_input(subject, "runCommand", {"command": "id"})
	d.reasons == ["roles auditor, support_agent may not use tool runCommand"]
}

test_subject_without_roles_is_denied if {
	subject := {"id": "u-1", "tenant": "acme", "roles": []}
	d := toolgate.decision with input as call_input(subject, "createTicket", ticket)
	d == {"decision": "deny", "reasons": ["a subject without roles may not use tool createTicket"]}
}

test_roles_that_are_not_a_list_grant_nothing if {
	subject := {"id": "u-1", "tenant": "acme", "roles": "admin"}
	d := toolgate.decision with input as call_input(subject, "createTicket", ticket)
	d.decision == "deny"
}

test_unknown_role_grants_nothing if {
	subject := {"id": "u-1", "tenant": "acme", "roles": ["superuser"]}
	d := toolgate.decision with input as call_input(subject, "createTicket", ticket)
	d.reasons == ["role superuser may not use tool createTicket"]
}

test_roles_in_context_are_ignored if {
	doc := object.union(call_input(agent, "processPayment", {"amount": 5, "currency": "EUR", "recipient": "a"}), {"context": {
		"roles": ["admin"],
		"subject": {"id": "u-2", "roles": ["admin"]},
		"approval": approval_by(["approver"]),
	}})
	d := toolgate.decision with input as doc
	d.decision == "deny"
}

test_role_grant_comes_from_data if {
	d := toolgate.decision with input as call_input(agent, "processPayment", {"amount": 5, "currency": "EUR", "recipient": "a"})
		with data.roles.support_agent as {"tools": ["processPayment"], "dynamic_tools": false}
	d.decision == "allow"
}

# --- dynamic (unregistered) tools ----------------------------------------------------------

test_dynamic_tool_needs_approval_for_dynamic_role if {
	d := toolgate.decision with input as dynamic_input(developer, "searchWeb")
	d == {
		"decision": "user-approval",
		"reasons": ["unregistered tool needs human approval"],
		"approval": {"reason": "unregistered tool needs human approval", "approver_roles": ["approver"], "ttl_s": 900},
	}
}

test_dynamic_tool_allowed_after_approval if {
	d := toolgate.decision with input as with_approval(dynamic_input(developer, "searchWeb"), approval_by(["approver"]))
	d.decision == "allow"
}

test_dynamic_tool_denied_for_other_roles if {
	d := toolgate.decision with input as dynamic_input(agent, "searchWeb")
	d == {"decision": "deny", "reasons": ["unregistered tool is not permitted for this role"]}
}

test_dynamic_tool_denied_for_other_roles_even_with_approval if {
	d := toolgate.decision with input as with_approval(dynamic_input(admin, "searchWeb"), approval_by(["approver"]))
	d.decision == "deny"
}

test_missing_registered_flag_is_treated_as_dynamic if {
	doc := object.remove(call_input(agent, "createTicket", ticket), ["tool"])
	d := toolgate.decision with input as object.union(doc, {"tool": {"name": "createTicket", "version": "1"}})
	d == {"decision": "deny", "reasons": ["unregistered tool is not permitted for this role"]}
}

test_dynamic_role_does_not_unlock_registered_tools if {
	d := toolgate.decision with input as call_input(developer, "runCommand", {"command": "id"})
	d.reasons == ["role developer may not use tool runCommand"]
}

test_dynamic_tool_with_a_registered_name_skips_family_allow if {
	doc := object.union(call_input(developer, "createTicket", ticket), {"tool": {"registered": false}})
	d := toolgate.decision with input as doc
	d.decision == "user-approval"
}
