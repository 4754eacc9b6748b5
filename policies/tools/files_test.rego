package tools.files_test

import rego.v1

import data.tools.files

admin := {"id": "u-2", "tenant": "acme", "roles": ["admin"]}

agent := {"id": "u-1", "tenant": "acme", "roles": ["support_agent"]}

other_admin := {"id": "u-7", "tenant": "globex", "roles": ["admin"]}

call_input(subject, name, path) := {
	"subject": subject,
	"tool": {"name": name, "version": "1", "registered": true, "mutating": name == "deleteFile", "risk": "high"},
	"call": {"id": "call_1", "input": {"path": path}},
	"context": {},
	"history": {},
	"approval": null,
	"request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
}

approved(doc) := object.union(doc, {"approval": {
	"approval_id": "ap-1",
	"approved": true,
	"approver": {"id": "u-9", "roles": ["approver", "admin"]},
}})

# --- readFile ------------------------------------------------------------------------------

test_read_file_allowed if {
	files.allow with input as call_input(agent, "readFile", "/srv/support/notes.txt")
	count(files.deny) == 0 with input as call_input(agent, "readFile", "/srv/support/notes.txt")
}

test_read_file_roles if {
	every role in ["support_agent", "admin"] {
		subject := {"id": "u-1", "tenant": "acme", "roles": [role]}
		d := data.toolgate.decision with input as call_input(subject, "readFile", "/srv/notes/today.txt")
		d.decision == "allow"
	}
	d := data.toolgate.decision with input as call_input({"id": "u-1", "tenant": "acme", "roles": ["auditor"]}, "readFile", "/srv/a")
	d.decision == "deny"
}

test_read_file_traversal_denied if {
	every path in ["../etc/passwd", "/srv/../etc/passwd", "a/b/..", "..", "a\\..\\b"] {
		"path must not contain '..' segments" in files.deny with input as call_input(agent, "readFile", path)
	}
}

test_dots_inside_names_are_fine if {
	every path in ["/srv/a..b", "/srv/...", "/srv/notes..txt", "/srv/.hidden"] {
		count(files.deny) == 0 with input as call_input(agent, "readFile", path)
	}
}

test_read_secret_denied if {
	files.deny == {"path /etc/shadow is a protected secret (/etc/shadow)"} with input as call_input(admin, "readFile", "/etc/shadow")
}

test_read_secret_variants_denied if {
	every path in ["/etc//shadow", "/etc/./shadow", "//etc/shadow", "/etc/shadow/", "/etc/ssh/ssh_host_rsa_key", "/root/.ssh/id_ed25519"] {
		count(files.deny) == 1 with input as call_input(admin, "readFile", path)
	}
}

test_read_secret_prefix_is_not_a_match if {
	every path in ["/etc/shadowed.txt", "/etc/sshd", "/srv/etc/shadow"] {
		count(files.deny) == 0 with input as call_input(admin, "readFile", path)
	}
}

test_secret_list_is_case_insensitive if {
	files.deny == {"path /ETC/shadow is a protected secret (/etc/shadow)"} with input as call_input(admin, "readFile", "/ETC/shadow")
	every path in ["/Etc/Shadow", "/ETC/SHADOW/", "/etc/SSH/ssh_host_rsa_key", "/ROOT/.ssh/id_ed25519"] {
		count(files.deny) == 1 with input as call_input(admin, "readFile", path)
	}
	files.deny == {"path /srv/vault/key is a protected secret (/SRV/Vault)"} with input as call_input(admin, "readFile", "/srv/vault/key")
		with data.files.secret_paths as ["/SRV/Vault"]
}

test_pseudo_filesystems_denied if {
	files.deny == {"path /proc/1/environ is inside /proc, which may not be accessed"} with input as call_input(agent, "readFile", "/proc/1/environ")
	files.deny == {"path /proc/self/root/etc/shadow is inside /proc, which may not be accessed"} with input as call_input(admin, "readFile", "/proc/self/root/etc/shadow")
	files.deny == {"path /sys is inside /sys, which may not be accessed"} with input as call_input(agent, "readFile", "/sys")
	files.deny == {"path //dev/./mem is inside /dev, which may not be accessed"} with input as call_input(agent, "readFile", "//dev/./mem")
	every path in ["/proc", "/proc/", "/proc/self/cwd/x", "/sys/kernel/debug/x", "/dev/sda", "/dev/shm/x", "/PROC/1/environ", "/Dev/Mem"] {
		count(files.deny) == 1 with input as call_input(admin, "readFile", path)
		d := data.toolgate.decision with input as approved(call_input(admin, "readFile", path))
		d.decision == "deny"
	}
}

test_pseudo_filesystem_prefix_is_not_a_match if {
	every path in ["/process/1", "/system/x", "/devices", "/srv/proc/1/environ", "/srv/dev/null"] {
		count(files.deny) == 0 with input as call_input(agent, "readFile", path)
	}
}

test_relative_path_denied if {
	every path in ["etc/shadow", "./etc/shadow", "notes/today.txt", "a", "~/.ssh/id_rsa", " /etc/shadow"] {
		files.deny == {"path must be absolute"} with input as call_input(admin, "readFile", path)
		not data.toolgate.decision.decision == "allow" with input as call_input(admin, "readFile", path)
	}
}

test_control_characters_denied if {
	every path in ["/etc/shadow\n", "/srv/a\u0000b", "/srv/a\tb", "/srv/a\rb", "/srv/a\u001fb", "/srv/a\u007f", "/proc/1/environ\n", "/etc/shadow/\n"] {
		files.deny == {"path must not contain control characters"} with input as call_input(admin, "readFile", path)
		d := data.toolgate.decision with input as call_input(admin, "readFile", path)
		d.decision == "deny"
	}
}

test_non_control_unicode_allowed if {
	every path in ["/srv/caf\u00e9.txt", "/srv/a\u0080b", "/srv/a b"] {
		count(files.deny) == 0 with input as call_input(agent, "readFile", path)
	}
}

test_backslash_denied if {
	files.deny == {"path must not contain backslashes"} with input as call_input(agent, "readFile", "/srv\\reports\\q1.csv")
	files.deny == {"path must be absolute", "path must not contain backslashes"} with input as call_input(admin, "readFile", "\\etc\\shadow")
	files.deny == {"path must be absolute", "path must not contain backslashes"} with input as call_input(admin, "readFile", "C:\\Windows\\win.ini")
}

test_review_paths_allowed_for_granted_roles if {
	every path in ["/srv/reports/q1.csv", "/srv/tmp/old.log", "/srv/a"] {
		every role in ["support_agent", "admin", "developer"] {
			subject := {"id": "u-1", "tenant": "acme", "roles": [role]}
			d := data.toolgate.decision with input as call_input(subject, "readFile", path)
			d == {"decision": "allow", "reasons": ["allowed by policy"]}
		}
		d := data.toolgate.decision with input as call_input(admin, "deleteFile", path)
		object.remove(d, ["limits"]) == {"decision": "allow", "reasons": ["allowed by policy"]}
	}
}

test_a_delete_is_allowed_under_its_limits if {
	d := data.toolgate.decision with input as call_input(admin, "deleteFile", "/srv/tmp/old.log")
	d.limits == [
		{"id": "files.delete_per_conversation", "scope": "conversation", "window_s": 86400, "max": 1},
		{"id": "files.deletes_per_day", "scope": "subject", "window_s": 86400, "max": 20},
	]
	e := data.toolgate.decision with input as call_input(admin, "deleteFile", "/srv/tmp/old.log")
		with data.files.deletes_per_day as 3
	e.limits[1].max == 3
	f := data.toolgate.decision with input as call_input(admin, "deleteFile", "/srv/tmp/old.log")
		with data.files.deletes_per_conversation as 2
	f.limits[0].max == 2
}

test_a_denied_delete_reserves_nothing if {
	d := data.toolgate.decision with input as call_input(admin, "deleteFile", "/etc/shadow")
	d.decision == "deny"
	not d.limits
}

test_a_read_has_no_limits if {
	d := data.toolgate.decision with input as call_input(admin, "readFile", "/srv/a")
	not d.limits
}

test_secret_list_from_data if {
	files.deny == {"path /srv/vault/key is a protected secret (/srv/vault)"} with input as call_input(admin, "readFile", "/srv/vault/key")
		with data.files.secret_paths as ["/srv/vault"]
}

test_secret_read_denied_even_with_approval if {
	d := data.toolgate.decision with input as approved(call_input(admin, "readFile", "/etc/shadow"))
	d.decision == "deny"
}

test_invalid_path_denied if {
	every path in ["", 42, null] {
		files.deny == {"path must be a non-empty string"} with input as call_input(agent, "readFile", path)
		not files.allow with input as call_input(agent, "readFile", path)
	}
}

# --- deleteFile ----------------------------------------------------------------------------

test_delete_denied_without_tenant_override if {
	files.deny == {"deleting files is not enabled for tenant globex"} with input as call_input(other_admin, "deleteFile", "/tmp/x")
	not files.allow with input as call_input(other_admin, "deleteFile", "/tmp/x")
}

test_delete_denied_without_tenant_override_even_with_approval if {
	d := data.toolgate.decision with input as approved(call_input(other_admin, "deleteFile", "/tmp/x"))
	d == {"decision": "deny", "reasons": ["deleting files is not enabled for tenant globex"]}
}

test_delete_allowed_for_admin_with_tenant_override if {
	d := data.toolgate.decision with input as call_input(admin, "deleteFile", "/tmp/x")
	d.decision == "allow"
}

test_tenant_override_comes_from_data if {
	files.allow with input as call_input(other_admin, "deleteFile", "/tmp/x")
		with data.tenants as {"globex": {"allow_delete_file": true}}
	not files.allow with input as call_input(admin, "deleteFile", "/tmp/x")
		with data.tenants as {"acme": {"allow_delete_file": "yes"}}
}

test_delete_override_does_not_unlock_other_roles if {
	d := data.toolgate.decision with input as call_input(agent, "deleteFile", "/tmp/x")
	d == {"decision": "deny", "reasons": ["role support_agent may not use tool deleteFile"]}
}

test_delete_path_checks_apply if {
	d := data.toolgate.decision with input as call_input(admin, "deleteFile", "/tmp/../etc/shadow")
	d.decision == "deny"
	d.reasons == ["path must not contain '..' segments"]
	files.deny == {"path /etc/sudoers is a protected secret (/etc/sudoers)"} with input as call_input(admin, "deleteFile", "/etc/sudoers")
	files.deny == {"path /Etc/Sudoers is a protected secret (/etc/sudoers)"} with input as call_input(admin, "deleteFile", "/Etc/Sudoers")
	files.deny == {"path /dev/sda is inside /dev, which may not be accessed"} with input as call_input(admin, "deleteFile", "/dev/sda")
	files.deny == {"path must be absolute"} with input as call_input(admin, "deleteFile", "tmp/x")
	files.deny == {"path must not contain control characters"} with input as call_input(admin, "deleteFile", "/tmp/x\n")
	files.deny == {"path must not contain backslashes"} with input as call_input(admin, "deleteFile", "/tmp\\x")
}

test_other_tools_untouched if {
	doc := call_input(admin, "runCommand", "/etc/shadow")
	count(files.deny) == 0 with input as doc
	not files.allow with input as doc
}
