package tools.commands_test

import data.toolgate.fixtures_test as fixtures

command(who) := fixtures.call(who, "runCommand", {"command": "systemctl restart nginx"})

test_run_command_always_needs_approval if {
	fixtures.expect(command(fixtures.admin), {
		"decision": "user-approval",
		"reasons": ["running a shell command needs approval"],
		"rules": {"commands.shell_command"},
		"approval": {"reason": "running a shell command needs approval", "approver_roles": ["approver"], "ttl_s": 900},
	})
}

test_run_command_allowed_after_approval if {
	fixtures.expect(fixtures.approved(command(fixtures.admin), "u-9", ["approver"]), {
		"decision": "allow",
		"reasons": ["running a shell command needs approval (approved by u-9)"],
	})
}

test_run_command_admin_only if {
	every role in ["support_agent", "auditor", "approver", "developer", "account_holder"] {
		doc := fixtures.approved(command(fixtures.subject("u-1", "acme", [role])), "u-9", ["approver"])
		fixtures.expect(doc, {"decision": "deny", "denials": {"toolgate.role_not_granted"}})
	}
}

test_other_version_not_governed if {
	fixtures.expect(fixtures.with_tool(command(fixtures.admin), {"version": "2"}), {
		"reasons": ["no policy family governs tool runCommand version 2"],
	})
}
