package tools.commands_test

import rego.v1

import data.tools.commands

admin := {"id": "u-2", "tenant": "acme", "roles": ["admin"]}

call_input(subject, version) := {
	"subject": subject,
	"tool": {"name": "runCommand", "version": version, "registered": true, "mutating": true, "risk": "high"},
	"call": {"id": "call_1", "input": {"command": "systemctl restart nginx"}},
	"context": {},
	"history": {},
	"approval": null,
	"request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
}

approval(roles) := {"approval_id": "ap-1", "approved": true, "approver": {"id": "u-9", "roles": roles}}

test_run_command_always_needs_approval if {
	commands.approval_required == {"running a shell command needs approval"} with input as call_input(admin, "1")
	not commands.allow with input as call_input(admin, "1")
}

test_run_command_decision_is_user_approval_for_admin if {
	d := data.toolgate.decision with input as call_input(admin, "1")
	d.decision == "user-approval"
	d.approval.approver_roles == ["approver"]
}

test_run_command_allowed_after_approval if {
	doc := object.union(call_input(admin, "1"), {"approval": approval(["approver"])})
	d := data.toolgate.decision with input as doc
	d.decision == "allow"
}

test_run_command_admin_only if {
	every role in ["support_agent", "auditor", "approver", "developer", "account_holder"] {
		subject := {"id": "u-1", "tenant": "acme", "roles": [role]}
		doc := object.union(call_input(subject, "1"), {"approval": approval(["approver"])})
		d := data.toolgate.decision with input as doc
		d.decision == "deny"
	}
}

test_other_version_not_covered if {
	count(commands.approval_required) == 0 with input as call_input(admin, "2")
	d := data.toolgate.decision with input as call_input(admin, "2")
	d.reasons == ["no policy rule allows this call"]
}
