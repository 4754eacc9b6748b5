# Tests of the combining library: resolution order, decision shape, rule ids, scoping, shared
# and conflicting claims, malformed families, approvals, role grants, dynamic tools and
# untrusted context. Family packages are replaced with `with data.tools as` where a test is
# about the library alone.
package toolgate_test

import data.toolgate.fixtures_test as fixtures

ticket := {"title": "Printer", "description": "It is on fire", "priority": "high", "clientMutationId": "9f1c6f0e"}

big_payment := {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}

# A family that governs createTicket and contributes one rule of each kind.
fake_tools := {"fake": {
	"governs": {"createTicket": {}},
	"deny": {{"rule": "zeta", "message": "zeta reason"}, {"rule": "alpha", "message": "alpha reason"}},
	"approval_required": {{"rule": "look", "message": "needs a look"}},
	"allow": {{"rule": "fine", "message": "fine"}},
}}

fake(sets) := {"fake": object.union({"governs": {"createTicket": {}}}, sets)}

ticket_call := fixtures.call(fixtures.agent, "createTicket", ticket)

# --- resolution order and shape ------------------------------------------------------------

test_allow_shape if {
	fixtures.same(data.toolgate.decision, {
		"decision": "allow",
		"reasons": ["allowed by policy"],
		"matched_rules": [{"id": "tickets.valid_ticket", "effect": "allow", "message": "a ticket that matches its contract"}],
	}) with input as ticket_call
}

test_default_deny_when_no_family_allows if {
	fixtures.expect(ticket_call, {
		"decision": "deny",
		"reasons": ["no policy rule allows this call"],
		"rules": {"toolgate.no_rule_allows"},
	}) with data.tools as fake({"deny": set()})
}

test_default_deny_without_input if {
	fixtures.same(data.toolgate.decision, {
		"decision": "deny",
		"reasons": ["no policy rule allows this call"],
		"matched_rules": [{"id": "toolgate.no_rule_allows", "effect": "deny", "message": "no policy rule allows this call"}],
	})
}

test_deny_beats_approval_and_allow_with_sorted_reasons if {
	fixtures.expect(ticket_call, {
		"decision": "deny",
		"reasons": ["alpha reason", "zeta reason"],
		"rules": {"fake.alpha", "fake.zeta", "fake.look", "fake.fine"},
	}) with data.tools as fake_tools
}

test_matched_rules_sorted_by_effect_then_id if {
	d := data.toolgate.decision with input as ticket_call with data.tools as fake_tools
	fixtures.same([[r.effect, r.id] | some r in d.matched_rules], [
		["allow", "fake.fine"],
		["approval", "fake.look"],
		["deny", "fake.alpha"],
		["deny", "fake.zeta"],
	])
}

test_approval_beats_allow if {
	tools := fake({"approval_required": {{"rule": "look", "message": "needs a look"}}, "allow": {{"rule": "ok", "message": "ok"}}})
	fixtures.expect(ticket_call, {
		"decision": "user-approval",
		"reasons": ["needs a look"],
		"rules": {"fake.look", "fake.ok"},
	}) with data.tools as tools
}

test_user_approval_shape if {
	fixtures.same(data.toolgate.decision, {
		"decision": "user-approval",
		"reasons": ["payment over 1000 needs approval"],
		"matched_rules": [{
			"id": "payments.amount_over_threshold", "effect": "approval",
			"message": "payment over 1000 needs approval",
		}],
		"approval": {"reason": "payment over 1000 needs approval", "approver_roles": ["approver"], "ttl_s": 900},
	}) with input as fixtures.call(fixtures.admin, "processPayment", big_payment)
}

test_approval_reasons_joined_and_sorted if {
	tools := fake({"approval_required": {{"rule": "b", "message": "b second"}, {"rule": "a", "message": "a first"}}})
	d := data.toolgate.decision with input as ticket_call with data.tools as tools
	fixtures.same([d.reasons, d.approval.reason], [["a first", "b second"], "a first; b second"])
}

test_same_message_from_two_rules_is_one_reason if {
	tools := fake({"deny": {{"rule": "a", "message": "same"}, {"rule": "b", "message": "same"}}})
	fixtures.expect(ticket_call, {"reasons": ["same"], "rules": {"fake.a", "fake.b"}}) with data.tools as tools
}

test_approver_roles_and_ttl_from_data if {
	d := data.toolgate.decision with input as fixtures.call(fixtures.admin, "runCommand", {"command": "uptime"})
		with data.approvals as {"default_approver_roles": ["ops"], "default_ttl_s": 60}
	fixtures.same([d.decision, d.approval.approver_roles, d.approval.ttl_s], ["user-approval", ["ops"], 60])
}

test_approver_roles_and_ttl_fall_back_without_data if {
	d := data.toolgate.decision with input as fixtures.call(fixtures.admin, "runCommand", {"command": "uptime"})
		with data.approvals as {}
	fixtures.same([d.approval.approver_roles, d.approval.ttl_s], [["approver"], 900])
}

test_invalid_ttl_in_data_falls_back if {
	every ttl in [0, -5, 90.5, "60", null] {
		d := data.toolgate.decision with input as fixtures.call(fixtures.admin, "runCommand", {"command": "uptime"})
			with data.approvals.default_ttl_s as ttl
		fixtures.same(d.approval.ttl_s, 900)
	}
}

test_approver_roles_that_are_not_a_list_fall_back if {
	d := data.toolgate.decision with input as fixtures.call(fixtures.admin, "runCommand", {"command": "uptime"})
		with data.approvals.default_approver_roles as "ops"
	fixtures.same(d.approval.approver_roles, ["approver"])
}

test_family_approver_roles_override_default if {
	tools := fake({"approval_required": {{"rule": "look", "message": "needs a look"}}, "approver_roles": ["auditor"]})
	d := data.toolgate.decision with input as ticket_call with data.tools as tools
	fixtures.same(d.approval.approver_roles, ["auditor"])
}

# --- scoping -------------------------------------------------------------------------------

# The careless-family experiment: an unrelated family allows every high-risk call. It governs
# none of the shipped tools, so no shipped decision changes (also checked in Python over every
# decision case, tests/unit/test_policies_scoping.py).
careless := {"careless": {
	"governs": {"someOtherTool": {}},
	"allow": {{"rule": "high_risk", "message": "high risk is fine"}},
}}

careless_old_style := {"careless": {"allow": true}}

test_careless_family_changes_no_decision if {
	cases := [
		fixtures.call(fixtures.agent, "processPayment", {"amount": 5, "currency": "EUR", "recipient": "a"}),
		fixtures.call(fixtures.admin, "runCommand", {"command": "rm -rf /"}),
		fixtures.call(fixtures.admin, "readFile", {"path": "/etc/shadow"}),
		fixtures.call(fixtures.admin, "deleteFile", {"path": "/"}),
		fixtures.call(fixtures.emma, "send_money", {"recipient": "US133000000121212121212", "amount": 10}),
		fixtures.call(fixtures.emma, "update_password", {"password": "x"}),
		fixtures.call(fixtures.auditor, "exportReport", {"start_date": "2020-01-01", "end_date": "2026-01-01"}),
		fixtures.with_tool(ticket_call, {"version": "2"}),
	]
	every doc in cases {
		shipped := data.toolgate.decision with input as doc
		with_careless := data.toolgate.decision with input as doc
			with data.tools.careless as careless.careless
		with_old_style := data.toolgate.decision with input as doc
			with data.tools.careless as careless_old_style.careless
		fixtures.same(with_careless, shipped)
		fixtures.same(with_old_style, shipped)
	}
}

test_only_declaring_families_are_consulted if {
	tools := {
		"a": {"governs": {"createTicket": {}}, "allow": {{"rule": "ok", "message": "ok"}}},
		"b": {"governs": {"readFile": {}}, "deny": {{"rule": "no", "message": "b denies everything"}}},
	}
	fixtures.expect(ticket_call, {"decision": "allow", "rules": {"a.ok"}}) with data.tools as tools
}

test_registered_granted_tool_without_family_is_denied if {
	fixtures.expect(fixtures.with_tool(ticket_call, {"version": "2"}), {
		"decision": "deny",
		"reasons": ["no policy family governs tool createTicket version 2"],
		"rules": {"toolgate.no_family"},
	})
}

test_versions_and_namespace_are_matched if {
	tools := {"mail": {
		"governs": {"send_email": {"namespace": "suite-a", "versions": ["1", "2"]}},
		"allow": {{"rule": "ok", "message": "ok"}},
	}}
	send := fixtures.call(fixtures.subject("u", "acme", ["mailer"]), "send_email", {})
	roles := {"mailer": {"tools": ["suite-a/send_email", "suite-b/send_email", "send_email"]}}
	fixtures.expect(fixtures.with_tool(send, {"namespace": "suite-a", "version": "2"}), {"decision": "allow"})
		with data.tools as tools with data.roles as roles
	fixtures.expect(fixtures.with_tool(send, {"namespace": "suite-a", "version": "3"}), {"rules": {"toolgate.no_family"}})
		with data.tools as tools with data.roles as roles
	fixtures.expect(fixtures.with_tool(send, {"namespace": "suite-b"}), {"rules": {"toolgate.no_family"}})
		with data.tools as tools with data.roles as roles
	fixtures.expect(send, {"rules": {"toolgate.no_family"}}) with data.tools as tools with data.roles as roles
	fixtures.expect(fixtures.with_tool(send, {"namespace": "suite-a"}), {"denials": {"toolgate.role_not_granted"}})
		with data.tools as tools with data.roles as {"mailer": {"tools": ["send_email"]}} # the default namespace only
}

test_two_suites_each_have_send_email if {
	tools := {
		"suite_a": {"governs": {"send_email": {"namespace": "a"}}, "allow": {{"rule": "ok", "message": "ok"}}},
		"suite_b": {"governs": {"send_email": {"namespace": "b"}}, "deny": {{"rule": "no", "message": "b says no"}}},
	}
	roles := {"mailer": {"tools": ["a/send_email", "b/send_email"]}, "a_mailer": {"tools": ["a/send_email"]}}
	send := fixtures.call(fixtures.subject("u", "acme", ["mailer"]), "send_email", {})
	fixtures.expect(fixtures.with_tool(send, {"namespace": "a"}), {"decision": "allow", "rules": {"suite_a.ok"}})
		with data.tools as tools with data.roles as roles
	fixtures.expect(fixtures.with_tool(send, {"namespace": "b"}), {"decision": "deny", "rules": {"suite_b.no"}})
		with data.tools as tools with data.roles as roles

	# A grant names the namespace of its tool: a/send_email grants nothing in b.
	a_only := fixtures.call(fixtures.subject("u", "acme", ["a_mailer"]), "send_email", {})
	fixtures.expect(fixtures.with_tool(a_only, {"namespace": "b"}), {"denials": {"suite_b.no", "toolgate.role_not_granted"}})
		with data.tools as tools with data.roles as roles
}

test_two_families_claiming_one_tool_without_shared_with_is_denied if {
	tools := {
		"a": {"governs": {"createTicket": {}}, "allow": {{"rule": "ok", "message": "ok"}}},
		"b": {"governs": {"createTicket": {"shared_with": ["a"]}}, "allow": {{"rule": "ok", "message": "ok"}}},
	}
	fixtures.expect(ticket_call, {
		"decision": "deny",
		"reasons": ["tool createTicket is claimed by families a and b without shared_with"],
		"rules": {"toolgate.family_conflict"},
	}) with data.tools as tools
}

shared := {
	"a": {"governs": {"createTicket": {"shared_with": ["b"]}}, "allow": {{"rule": "ok", "message": "a allows"}}},
	"b": {"governs": {"createTicket": {"shared_with": ["a"]}}, "allow": {{"rule": "ok", "message": "b allows"}}},
}

test_shared_tool_is_allowed_when_every_family_allows if {
	fixtures.expect(ticket_call, {"decision": "allow", "rules": {"a.ok", "b.ok"}}) with data.tools as shared
}

test_shared_tool_is_denied_when_one_family_does_not_allow if {
	tools := object.union(shared, {"b": {"allow": set()}})
	fixtures.expect(ticket_call, {"decision": "deny", "rules": {"a.ok", "toolgate.no_rule_allows"}}) with data.tools as tools
}

test_shared_tool_denial_by_either_family_wins if {
	tools := object.union(shared, {"b": {"deny": {{"rule": "no", "message": "b denies"}}}})
	fixtures.expect(ticket_call, {"decision": "deny", "reasons": ["b denies"]}) with data.tools as tools
}

# --- log-only families ----------------------------------------------------------------------

# A log-only family that would deny ticket calls, shared with the tickets family.
strict_tickets := {"strict": {
	"governs": {"createTicket": {"shared_with": ["tickets"]}},
	"log_only": true,
	"deny": {{"rule": "no_fire", "message": "fires go to facilities"}},
}}

shared_tickets := {"governs": {"createTicket": {"shared_with": ["strict"]}}, "allow": {{"rule": "valid_ticket", "message": "ok"}}}

test_log_only_family_changes_no_decision if {
	d := data.toolgate.decision with input as ticket_call
		with data.tools as object.union(strict_tickets, {"tickets": shared_tickets})
	fixtures.same([d.decision, d.reasons, [r.id | some r in d.matched_rules]], ["allow", ["allowed by policy"], ["tickets.valid_ticket"]])
}

test_log_only_view_counts_the_family if {
	d := data.toolgate.decision with input as ticket_call
		with data.tools as object.union(strict_tickets, {"tickets": shared_tickets})
	fixtures.same([d.log_only.decision, d.log_only.reasons, [r.id | some r in d.log_only.matched_rules]], [
		"deny", ["fires go to facilities"],
		["tickets.valid_ticket", "strict.no_fire"],
	])
}

test_no_log_only_member_without_a_log_only_claim if {
	d := data.toolgate.decision with input as ticket_call
	not d.log_only
	d2 := data.toolgate.decision with input as fixtures.call(fixtures.admin, "runCommand", {"command": "uptime"})
		with data.tools.strict as strict_tickets.strict
	not d2.log_only
}

test_log_only_family_alone_is_held_back if {
	alone := {"newfam": {"governs": {"createTicket": {}}, "log_only": true, "allow": {{"rule": "ok", "message": "ok"}}}}
	d := data.toolgate.decision with input as ticket_call with data.tools as alone
	fixtures.same([d.decision, [r.id | some r in d.matched_rules]], ["deny", ["toolgate.no_family"]])
	fixtures.same([d.log_only.decision, [r.id | some r in d.log_only.matched_rules]], ["allow", ["newfam.ok"]])
}

test_log_only_false_is_an_ordinary_family if {
	tools := {"strict": object.union(strict_tickets.strict, {"log_only": false}), "tickets": shared_tickets}
	d := data.toolgate.decision with input as ticket_call with data.tools as tools
	fixtures.same([d.decision, d.reasons], ["deny", ["fires go to facilities"]])
	not d.log_only
}

# --- malformed families fail closed --------------------------------------------------------

test_malformed_contributions_deny if {
	cases := {
		"string deny": {"deny": {"a reason as a string"}},
		"string approval": {"approval_required": {"needs a look"}, "allow": {{"rule": "ok", "message": "ok"}}},
		"boolean allow": {"allow": true},
		"missing message": {"allow": {{"rule": "ok"}}},
		"number rule": {"deny": {{"rule": 1, "message": "m"}}},
	}
	every name, sets in cases {
		d := data.toolgate.decision with input as ticket_call with data.tools as fake(sets)
		fixtures.same([name, d.decision, {r.id | some r in d.matched_rules; r.effect == "deny"} - {"toolgate.no_rule_allows"}], [
			name, "deny",
			{"toolgate.malformed_rule"},
		])
	}
}

# The common-case allow and the full resolution answer alike: two contributions that give one
# rule are one matched rule, a malformed one beside a good one still denies.
test_the_common_allow_matches_the_full_resolution if {
	twice := {"allow": {{"rule": "ok", "message": "ok"}, {"rule": "ok", "message": "ok", "note": 1}}}
	d := data.toolgate.decision with input as ticket_call with data.tools as fake(twice)
	fixtures.same([d.decision, d.matched_rules], ["allow", [{"id": "fake.ok", "effect": "allow", "message": "ok"}]])
	bad := {"allow": {{"rule": "ok", "message": "ok"}, {"rule": "ok"}}}
	fixtures.expect(ticket_call, {"decision": "deny", "rules": {"fake.ok", "toolgate.malformed_rule"}}) with data.tools as fake(bad)
}

test_malformed_message_names_family_and_set if {
	fixtures.expect(ticket_call, {"reasons": ["policy family fake has a malformed allow rule"]})
		with data.tools as fake({"allow": true})
}

# --- approvals -----------------------------------------------------------------------------

test_verified_approval_satisfies_approval_required if {
	doc := fixtures.approved(fixtures.call(fixtures.admin, "processPayment", big_payment), "u-9", ["approver"])
	fixtures.expect(doc, {
		"decision": "allow",
		"reasons": ["payment over 1000 needs approval (approved by u-9)"],
		"rules": {"payments.amount_over_threshold", "toolgate.approval_granted"},
	})
}

test_approval_granted_message_names_the_approver if {
	doc := fixtures.approved(fixtures.call(fixtures.admin, "runCommand", {"command": "id"}), "u-9", ["approver"])
	d := data.toolgate.decision with input as doc
	fixtures.same({r | some r in d.matched_rules; r.effect == "allow"}, {{"id": "toolgate.approval_granted", "effect": "allow", "message": "approved by u-9"}})
}

test_approval_by_a_role_that_may_not_approve_is_not_enough if {
	doc := fixtures.approved(fixtures.call(fixtures.admin, "processPayment", big_payment), "u-9", ["support_agent"])
	fixtures.expect(doc, {"decision": "user-approval"})
}

test_approval_without_approver_roles_is_not_enough if {
	doc := object.union(fixtures.call(fixtures.admin, "runCommand", {"command": "id"}), {"approval": {"approval_id": "ap-1", "approved": true}})
	fixtures.expect(doc, {"decision": "user-approval"})
}

test_approval_that_is_not_exactly_true_is_not_enough if {
	approval := {"approval_id": "ap-1", "approved": "true", "approver": {"id": "u-9", "roles": ["approver"]}}
	doc := object.union(fixtures.call(fixtures.admin, "runCommand", {"command": "id"}), {"approval": approval})
	fixtures.expect(doc, {"decision": "user-approval"})
}

test_approver_roles_that_are_not_a_list_are_not_enough if {
	approval := {"approval_id": "ap-1", "approved": true, "approver": {"id": "u-9", "roles": "approver"}}
	doc := object.union(fixtures.call(fixtures.admin, "runCommand", {"command": "id"}), {"approval": approval})
	fixtures.expect(doc, {"decision": "user-approval"})
}

test_rejected_approval_denies if {
	fixtures.expect(fixtures.rejected(fixtures.call(fixtures.admin, "processPayment", big_payment)), {
		"decision": "deny",
		"reasons": ["the approver rejected this call"],
		"denials": {"toolgate.approval_rejected"},
	})
}

test_approval_never_overrides_family_deny if {
	doc := fixtures.approved(ticket_call, "u-9", ["approver"])
	fixtures.expect(doc, {"decision": "deny"}) with data.tools as fake_tools
}

test_approval_never_overrides_real_deny if {
	doc := fixtures.approved(fixtures.call(fixtures.admin, "readFile", {"path": "/etc/shadow"}), "u-9", ["approver"])
	fixtures.expect(doc, {"decision": "deny"})
}

test_approval_on_an_allowed_call_keeps_allow if {
	doc := fixtures.approved(ticket_call, "u-9", ["approver"])
	fixtures.expect(doc, {"decision": "allow", "reasons": ["allowed by policy"], "rules": {"tickets.valid_ticket"}})
}

# --- role grants ---------------------------------------------------------------------------

test_role_without_grant_is_denied if {
	fixtures.expect(fixtures.call(fixtures.agent, "processPayment", {"amount": 5, "currency": "EUR", "recipient": "a"}), {
		"decision": "deny",
		"reasons": ["role support_agent may not use tool processPayment"],
		"denials": {"toolgate.role_not_granted"},
	})
}

test_role_denial_cannot_be_bypassed_by_approval if {
	doc := fixtures.approved(fixtures.call(fixtures.agent, "runCommand", {"command": "id"}), "u-9", ["approver", "admin"])
	fixtures.expect(doc, {"decision": "deny", "reasons": ["role support_agent may not use tool runCommand"]})
}

test_role_denial_lists_every_role_sorted if {
	subject := fixtures.subject("u-1", "acme", ["support_agent", "auditor"])
	fixtures.expect(fixtures.call(subject, "runCommand", {"command": "id"}), {
		"reasons": ["roles auditor, support_agent may not use tool runCommand"],
	})
}

test_subject_without_roles_is_denied if {
	fixtures.expect(fixtures.call(fixtures.subject("u-1", "acme", []), "createTicket", ticket), {
		"decision": "deny",
		"reasons": ["a subject without roles may not use tool createTicket"],
	})
}

test_roles_that_are_not_a_list_grant_nothing if {
	fixtures.expect(fixtures.call(fixtures.subject("u-1", "acme", "admin"), "createTicket", ticket), {"decision": "deny"})
}

test_unknown_role_grants_nothing if {
	fixtures.expect(fixtures.call(fixtures.subject("u-1", "acme", ["superuser"]), "createTicket", ticket), {
		"reasons": ["role superuser may not use tool createTicket"],
	})
}

test_roles_in_context_are_ignored if {
	doc := fixtures.with_context(fixtures.call(fixtures.agent, "processPayment", {"amount": 5, "currency": "EUR", "recipient": "a"}), {
		"roles": ["admin"],
		"subject": {"id": "u-2", "roles": ["admin"]},
		"approval": {"approved": true, "approver": {"id": "u-9", "roles": ["approver"]}},
	})
	fixtures.expect(doc, {"decision": "deny"})
}

test_role_grant_comes_from_data if {
	doc := fixtures.call(fixtures.agent, "processPayment", {"amount": 5, "currency": "EUR", "recipient": "a"})
	fixtures.expect(doc, {"decision": "allow"}) with data.roles.support_agent as {"tools": ["processPayment"], "dynamic_tools": false}
}

# --- dynamic (unregistered) tools ----------------------------------------------------------

test_dynamic_tool_needs_approval_for_dynamic_role if {
	fixtures.same(data.toolgate.decision, {
		"decision": "user-approval",
		"reasons": ["unregistered tool needs human approval"],
		"matched_rules": [{
			"id": "toolgate.dynamic_tool_needs_approval", "effect": "approval",
			"message": "unregistered tool needs human approval",
		}],
		"approval": {"reason": "unregistered tool needs human approval", "approver_roles": ["approver"], "ttl_s": 900},
	}) with input as fixtures.dynamic(fixtures.developer, "searchWeb", {"q": "x"})
}

test_dynamic_tool_allowed_after_approval if {
	doc := fixtures.approved(fixtures.dynamic(fixtures.developer, "searchWeb", {}), "u-9", ["approver"])
	fixtures.expect(doc, {"decision": "allow"})
}

test_dynamic_tool_denied_for_other_roles if {
	fixtures.expect(fixtures.dynamic(fixtures.agent, "searchWeb", {}), {
		"decision": "deny",
		"reasons": ["unregistered tool is not permitted for this role"],
		"rules": {"toolgate.dynamic_tool_not_permitted"},
	})
}

test_dynamic_tool_denied_for_other_roles_even_with_approval if {
	doc := fixtures.approved(fixtures.dynamic(fixtures.admin, "searchWeb", {}), "u-9", ["approver"])
	fixtures.expect(doc, {"decision": "deny"})
}

# The gateway always sends input.tool.registered; without it no rule applies: the default deny.
test_missing_registered_flag_gets_the_default_deny if {
	doc := object.union(object.remove(ticket_call, ["tool"]), {"tool": {"name": "createTicket", "version": "1"}})
	fixtures.expect(doc, {"decision": "deny", "rules": {"toolgate.no_rule_allows"}})
}

test_dynamic_role_does_not_unlock_registered_tools if {
	fixtures.expect(fixtures.call(fixtures.developer, "runCommand", {"command": "id"}), {
		"reasons": ["role developer may not use tool runCommand"],
	})
}

test_dynamic_tool_with_a_registered_name_skips_family_allow if {
	fixtures.expect(fixtures.with_tool(fixtures.call(fixtures.developer, "createTicket", ticket), {"registered": false}), {
		"decision": "user-approval",
		"rules": {"toolgate.dynamic_tool_needs_approval"},
	})
}
