package tools.files_test

import data.toolgate.fixtures_test as fixtures

import data.toolgate.lib
import data.tools.files

other_admin := fixtures.subject("u-7", "globex", ["admin"])

read(who, path) := fixtures.call(who, "readFile", {"path": path})

delete(who, path) := fixtures.call(who, "deleteFile", {"path": path})

# The rule ids of the decision for `doc`.
rules(doc) := fixtures.summary(doc).rules

# --- readFile: allow-list of roots ---------------------------------------------------------

test_read_under_a_root_allowed if {
	every path in ["/srv/reports/q1.csv", "/srv/support/notes.txt", "/srv", "/srv/", "//srv/./a", "/srv/a..b", "/srv/caf\u00e9.txt", "/srv/a b"] {
		fixtures.expect(read(fixtures.agent, path), {
			"decision": "allow",
			"reasons": ["allowed by policy"],
			"rules": {"files.read_under_root"},
		})
	}
}

test_read_roles if {
	every role in ["support_agent", "admin", "developer"] {
		fixtures.expect(read(fixtures.subject("u-1", "acme", [role]), "/srv/notes/today.txt"), {"decision": "allow"})
	}
	fixtures.expect(read(fixtures.auditor, "/srv/a"), {"decision": "deny", "denials": {"toolgate.role_not_granted"}})
}

test_read_outside_the_roots_denied if {
	every path in ["/home/u/notes.txt", "/tmp/x", "/var/log/syslog", "/etc/hostname", "/", "/srvx/a", "/SRV/a", "/opt/srv/a"] {
		fixtures.expect(read(fixtures.admin, path), {
			"decision": "deny",
			"reasons": [sprintf("path %s is outside the readable roots (/srv)", [path])],
			"rules": {"files.read_outside_roots"},
		})
	}
}

# Issue: the secret list was a deny-list only, so these were readable.
test_private_keys_and_cloud_credentials_are_not_readable if {
	every path in ["/etc/ssl/private/server.key", "/root/.aws/credentials", "/etc/ssh/ssh_host_rsa_key", "/root/.ssh/id_ed25519"] {
		fixtures.expect(read(fixtures.admin, path), {"decision": "deny"})
		not "files.read_outside_roots" in rules(read(fixtures.admin, path))
	}
}

test_secrets_inside_a_root_are_denied if {
	fixtures.expect(read(fixtures.admin, "/srv/app/.env"), {
		"decision": "deny",
		"reasons": ["path /srv/app/.env names a secret file (.env)"],
		"denials": {"files.secret_file_name"},
	})
	fixtures.expect(read(fixtures.admin, "/srv/app/.SSH/config"), {"reasons": ["path /srv/app/.SSH/config names a secret file (.ssh)"]})
	fixtures.expect(read(fixtures.admin, "/srv/certs/site.PEM"), {"reasons": ["path /srv/certs/site.PEM names a secret file (*.pem)"]})
	fixtures.expect(read(fixtures.admin, "/srv/home/id_rsa"), {"denials": {"files.secret_file_name"}})
}

test_names_that_only_resemble_secrets_are_fine if {
	every path in ["/srv/envoy.yaml", "/srv/.environment", "/srv/keys.txt", "/srv/pem", "/srv/id_rsa.pub.txt"] {
		fixtures.expect(read(fixtures.agent, path), {"decision": "allow"})
	}
}

test_read_secret_denied_with_its_reason if {
	fixtures.expect(read(fixtures.admin, "/etc/shadow"), {
		"decision": "deny",
		"reasons": ["path /etc/shadow is a protected secret (/etc/shadow)"],
		"rules": {"files.protected_secret"},
	})
}

test_read_secret_variants_denied if {
	every path in ["/etc//shadow", "/etc/./shadow", "//etc/shadow", "/etc/shadow/", "/ETC/shadow", "/Etc/Shadow"] {
		fixtures.expect(read(fixtures.admin, path), {"decision": "deny", "rules": {"files.protected_secret"}})
	}
}

test_secret_list_from_the_family_data if {
	fixtures.expect(read(fixtures.admin, "/srv/vault/key"), {
		"reasons": ["path /srv/vault/key is a protected secret (/srv/vault)"],
	}) with files.secret_paths as {"/srv/vault"}
}

test_traversal_denied if {
	every path in ["../etc/passwd", "/srv/../etc/passwd", "a/b/..", "..", "a\\..\\b", "/srv/.."] {
		"files.path_traversal" in rules(read(fixtures.agent, path))
		fixtures.expect(read(fixtures.agent, path), {"decision": "deny"})
	}
}

test_pseudo_filesystems_denied if {
	fixtures.expect(read(fixtures.agent, "/proc/1/environ"), {
		"reasons": ["path /proc/1/environ is inside /proc, which may not be accessed"],
		"rules": {"files.pseudo_filesystem"},
	})
	fixtures.expect(read(fixtures.agent, "//dev/./mem"), {"reasons": ["path //dev/./mem is inside /dev, which may not be accessed"]})
	every path in ["/proc", "/proc/", "/proc/self/root/etc/shadow", "/sys/kernel/debug/x", "/dev/sda", "/PROC/1/environ", "/Dev/Mem"] {
		fixtures.expect(fixtures.approved(read(fixtures.admin, path), "u-9", ["approver"]), {"decision": "deny"})
		"files.pseudo_filesystem" in rules(read(fixtures.admin, path))
	}
}

test_relative_path_denied if {
	every path in ["etc/shadow", "./etc/shadow", "notes/today.txt", "a", "~/.ssh/id_rsa", " /etc/shadow"] {
		"files.path_relative" in rules(read(fixtures.admin, path))
		fixtures.expect(read(fixtures.admin, path), {"decision": "deny"})
	}
}

test_control_characters_denied_without_quoting_the_path if {
	every path in ["/etc/shadow\n", "/srv/a\u0000b", "/srv/a\tb", "/srv/a\rb", "/srv/a\u001fb", "/srv/a\u007f", "/proc/1/environ\n"] {
		fixtures.expect(read(fixtures.admin, path), {
			"decision": "deny",
			"reasons": ["path must not contain control characters"],
			"denials": {"files.path_control_character"},
		})
	}
}

test_backslash_denied if {
	fixtures.expect(read(fixtures.agent, "/srv\\reports\\q1.csv"), {
		"reasons": ["path must not contain backslashes"],
		"rules": {"files.path_backslash"},
	})
	fixtures.expect(read(fixtures.admin, "C:\\Windows\\win.ini"), {
		"reasons": ["path must be absolute", "path must not contain backslashes"],
	})
}

test_invalid_path_denied if {
	every path in ["", 42, null] {
		fixtures.expect(read(fixtures.agent, path), {
			"decision": "deny",
			"reasons": ["path must be a non-empty string"],
			"rules": {"files.path_invalid"},
		})
	}
	fixtures.expect(fixtures.call(fixtures.agent, "readFile", {}), {"rules": {"files.path_invalid"}})
}

test_secret_read_denied_even_with_approval if {
	fixtures.expect(fixtures.approved(read(fixtures.admin, "/etc/shadow"), "u-9", ["approver"]), {"decision": "deny"})
}

# --- deleteFile ----------------------------------------------------------------------------

test_delete_under_a_root_allowed if {
	every path in ["/srv/tmp/old.log", "/srv/reports/q1.csv", "/tmp/x"] {
		fixtures.expect(delete(fixtures.admin, path), {
			"decision": "allow",
			"reasons": ["allowed by policy"],
			"rules": {"files.delete_under_root"},
		})
	}
}

# Issue: "/", "/etc", "/root", "/run" and "/var/run" (parents of protected paths) were deletable.
test_delete_of_a_protected_path_or_a_parent_of_one_denied if {
	cases := {
		"/": "/",
		"/etc": "/etc",
		"/run": "/run",
		"/var/run": "/var/run",
		"/var": "/var",
		"/etc/ssl": "/etc/ssl/private",
		"//ETC/": "/etc",
		"/srv": "/srv",
		"/tmp/": "/tmp",
	}
	every path, protected in cases {
		fixtures.expect(delete(fixtures.admin, path), {
			"decision": "deny",
			"reasons": [sprintf("path %s may not be deleted: it is or contains protected path %s", [path, protected])],
			"denials": {"files.delete_protected_path"},
		})
	}
}

test_parent_check_holds_for_roots_that_hold_protected_paths if {
	fixtures.expect(delete(fixtures.admin, "/srv/app"), {"denials": {"files.delete_protected_path"}})
		with files.secret_paths as {"/srv/app/secrets"}
	fixtures.expect(delete(fixtures.admin, "/srv/app2"), {"decision": "allow"})
		with files.secret_paths as {"/srv/app/secrets"}
}

test_delete_outside_the_roots_denied if {
	fixtures.expect(delete(fixtures.admin, "/home/u/old.log"), {
		"decision": "deny",
		"reasons": ["path /home/u/old.log is outside the deletable roots (/srv, /tmp)"],
		"rules": {"files.delete_outside_roots"},
	})
}

test_delete_denied_without_the_tenant_feature if {
	fixtures.expect(delete(other_admin, "/tmp/x"), {
		"decision": "deny",
		"reasons": ["deleting files is not enabled for tenant globex"],
		"rules": {"files.delete_not_enabled"},
	})
	fixtures.expect(fixtures.approved(delete(other_admin, "/tmp/x"), "u-9", ["approver"]), {"decision": "deny"})
}

test_tenant_feature_comes_from_tenant_data if {
	fixtures.expect(delete(other_admin, "/tmp/x"), {"decision": "allow"})
		with data.tenants as {"globex": {"features": {"delete_files": true}}}
	fixtures.expect(delete(fixtures.admin, "/tmp/x"), {"decision": "deny"})
		with data.tenants as {"acme": {"features": {"delete_files": "yes"}}}
}

test_delete_override_does_not_unlock_other_roles if {
	fixtures.expect(delete(fixtures.agent, "/tmp/x"), {
		"decision": "deny",
		"reasons": ["role support_agent may not use tool deleteFile"],
	})
}

test_delete_path_checks_apply if {
	fixtures.expect(delete(fixtures.admin, "/tmp/../etc/shadow"), {"reasons": ["path must not contain '..' segments"]})
	fixtures.expect(delete(fixtures.admin, "/etc/sudoers"), {"rules": {"files.protected_secret", "files.delete_protected_path"}})
	fixtures.expect(delete(fixtures.admin, "/dev/sda"), {"denials": {"files.pseudo_filesystem"}})
	fixtures.expect(delete(fixtures.admin, "/dev"), {"denials": {"files.pseudo_filesystem", "files.delete_protected_path"}})
	fixtures.expect(delete(fixtures.admin, "/root"), {
		"reasons": ["path /root is a protected secret (/root)", "path /root may not be deleted: it is or contains protected path /root"],
	})
	fixtures.expect(delete(fixtures.admin, "tmp/x"), {"reasons": ["path must be absolute"]})
	fixtures.expect(delete(fixtures.admin, "/tmp/x\n"), {"reasons": ["path must not contain control characters"]})
	fixtures.expect(delete(fixtures.admin, "/tmp\\x"), {"reasons": ["path must not contain backslashes"]})
}

# One delete per conversation without a human (input.session).
test_second_delete_in_a_conversation_needs_approval if {
	doc := fixtures.with_session(delete(fixtures.admin, "/tmp/y"), {"calls": {"24h": {"deleteFile": 1, "readFile": 3}}})
	fixtures.expect(doc, {
		"decision": "user-approval",
		"reasons": ["a second file deletion in one conversation needs approval"],
		"rules": {"files.second_delete_in_conversation", "files.delete_under_root"},
	})
	fixtures.expect(fixtures.approved(doc, "u-9", ["approver"]), {"decision": "allow"})
	fixtures.expect(fixtures.with_session(delete(fixtures.admin, "/tmp/y"), {"calls": {"24h": {"readFile": 3}}}), {"decision": "allow"})
}

# input.history is the caller's conversation only (empty without a conversation id): the rule
# reads the session, so a forged or empty history changes nothing.
test_history_is_not_what_counts if {
	fixtures.expect(fixtures.with_history(delete(fixtures.admin, "/tmp/y"), {"deleteFile": 3}), {"decision": "allow"})
}

test_the_session_does_not_limit_reads if {
	doc := fixtures.with_session(read(fixtures.agent, "/srv/a"), {"calls": {"24h": {"deleteFile": 5, "readFile": 50}}})
	fixtures.expect(doc, {"decision": "allow", "limits": set()})
}

# The gateway reserves them atomically (docs/session.md): the first unapproved delete of a
# conversation, and the subject's deletes of the day.
test_a_delete_carries_its_limits if {
	fixtures.expect(delete(fixtures.admin, "/tmp/y"), {
		"decision": "allow",
		"limits": {"files.delete_per_conversation", "files.deletes_per_day"},
	})
	d := fixtures.decide(delete(fixtures.admin, "/tmp/y"))
	fixtures.same(d.limits, [
		{"id": "files.delete_per_conversation", "scope": "conversation", "window_s": 86400, "max": 1},
		{"id": "files.deletes_per_day", "scope": "subject", "window_s": 86400, "max": 20},
	])
}

test_an_approved_delete_is_limited_per_day_only if {
	doc := fixtures.approved(fixtures.with_session(delete(fixtures.admin, "/tmp/y"), {"calls": {"24h": {"deleteFile": 1}}}), "u-9", ["approver"])
	fixtures.expect(doc, {"decision": "allow", "limits": {"files.deletes_per_day"}})
}

test_a_denied_delete_reserves_nothing if {
	fixtures.expect(delete(fixtures.admin, "/etc/shadow"), {"decision": "deny", "limits": set()})
}

test_a_tenant_sets_its_daily_deletes if {
	d := fixtures.decide(delete(fixtures.admin, "/tmp/y")) with data.tenants.acme.limits.deletes_per_day as 3
	fixtures.same(d.limits[1].max, 3)
}

# --- the family's settings -------------------------------------------------------------------

# Deny-lists are compared in lowercase and every path is in its normalized form.
test_settings_are_normalized if {
	every p in files.protected_paths {
		fixtures.same([p, lower(p)], [p, p])
		fixtures.same([p, lib.path_normalize(p)], [p, p])
	}
	every name in files.secret_names | files.secret_extensions {
		fixtures.same([name, lower(name)], [name, name])
	}
}

test_percent_encoded_and_lookalike_paths_denied if {
	every path in ["/srv/reports/%2e%2e/%2e%2e/etc/shadow", "/srv/reports/q1%2Ecsv", "/srv/%2F"] {
		"files.path_percent_encoded" in rules(read(fixtures.agent, path))
		fixtures.expect(read(fixtures.agent, path), {"decision": "deny"})
	}
	every path in ["/srv/reports/\uFF0E\uFF0E/etc/shadow", "/srv/reports/\u2025/etc", "/srv/reports/q1.csv\u200B", "/srv/reports\uFF0Fq1.csv"] {
		"files.path_lookalike" in rules(read(fixtures.agent, path))
		fixtures.expect(read(fixtures.agent, path), {"decision": "deny"})
	}
	fixtures.expect(read(fixtures.agent, "/srv/reports/r\u00E9sum\u00E9 100%.csv"), {"decision": "allow"})
}

# --- cost: a long path ---------------------------------------------------------------------

# A path of many segments is compared with the lists down to their depth only (its prefixes
# below cannot match), so its cost grows with its length, not with its length squared.
test_listed_depth_is_the_depth_of_the_deepest_listed_path if {
	files.listed_depth == max({count(lib.path_segments(p)) | some p in files.listed_paths})
}

test_a_deep_path_makes_no_more_prefixes_than_the_lists_are_deep if {
	deep := concat("", ["/srv/", concat("/", [format_int(n, 10) | some n in numbers.range(1, 2000)]), "/x.txt"])
	found := files.prefixes with input as read(fixtures.agent, deep)
	count(found) == files.listed_depth
	found == {"/srv", "/srv/1", "/srv/1/2"}
	fixtures.expect(read(fixtures.agent, deep), {"decision": "allow", "rules": {"files.read_under_root"}})
	fixtures.expect(read(fixtures.agent, concat("", [deep, "/id_rsa"])), {"decision": "deny"})
}
