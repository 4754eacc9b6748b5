# Files: deleteFile v1 and readFile v1 (path string).
#
# - readFile: allowed for the roles granted it in data.roles (support_agent, admin).
# - deleteFile: denied unless the tenant enables it (data.tenants[<tenant>].allow_delete_file);
#   then allowed for the roles granted it (admin).
# - deleteFile: at most data.files.deletes_per_conversation (default 1) per conversation and
#   data.files.deletes_per_day (default 20) per subject in 24 hours, as limits the gateway reserves atomically (docs/session.md): a new or
#   absent conversation id does not reset the daily count.
# - Both: the path must be absolute and free of control characters (U+0000-U+001F, U+007F)
#   and backslashes; paths with `..` segments, paths at or under /proc, /sys or /dev
#   (kernel pseudo-filesystems: /proc/self/root/... reaches the whole filesystem) and paths at
#   or under a protected secret (data.files.secret_paths, e.g. /etc/shadow) are denied. Both
#   lists are compared case-insensitively, as some filesystems are case-insensitive.
package tools.files

import rego.v1

import data.toolgate.lib

file_tools := {"deleteFile", "readFile"}

call_of(name) if {
	input.tool.registered == true
	input.tool.name == name
	input.tool.version == "1"
}

file_call if {
	some name in file_tools
	call_of(name)
}

path := input.call.input.path

# "/a//b/./c" -> "/a/b/c"; relative paths stay relative.
normalize(p) := concat("", [root(p), concat("/", [seg | some seg in split(p, "/"); seg != ""; seg != "."])])

root(p) := "/" if {
	startswith(p, "/")
} else := ""

traversal if {
	valid_path
	regex.match(`(^|[/\\])\.\.([/\\]|$)`, path)
}

# The secrets (data.files.secret_paths) the path is, or lies under.
protected_secret contains secret if {
	valid_path
	some secret in data.files.secret_paths
	is_string(secret)
	at_or_under(path, secret)
}

# Kernel pseudo-filesystems: nothing at or under them may be read or deleted.
pseudo_fs_roots := ["/proc", "/sys", "/dev"]

pseudo_fs_root contains fs_root if {
	valid_path
	some fs_root in pseudo_fs_roots
	at_or_under(path, fs_root)
}

# p is dir or lies under it, compared after normalizing and ignoring case.
at_or_under(p, dir) if same_or_below(lower(normalize(p)), lower(normalize(dir)))

same_or_below(p, dir) if p == dir

same_or_below(p, dir) if startswith(p, concat("", [dir, "/"]))

# U+0000-U+001F and U+007F.
has_control_character if {
	valid_path
	regex.match(`[\x00-\x1f\x7f]`, path)
}

tenant_allows_delete if data.tenants[input.subject.tenant].allow_delete_file == true

deny contains "path must be a non-empty string" if {
	file_call
	not valid_path
}

valid_path if {
	is_string(path)
	path != ""
}

deny contains "path must not contain '..' segments" if {
	file_call
	valid_path
	traversal
}

deny contains "path must be absolute" if {
	file_call
	valid_path
	not startswith(path, "/")
}

deny contains "path must not contain control characters" if {
	file_call
	valid_path
	has_control_character
}

deny contains "path must not contain backslashes" if {
	file_call
	valid_path
	contains(path, "\\")
}

# The two reasons below quote the path, so they are left to the control-character rule
# when the path holds one (no raw newlines in reasons and audit logs).
deny contains sprintf("path %s is a protected secret (%s)", [path, secret]) if {
	file_call
	valid_path
	not has_control_character
	some secret in protected_secret
}

deny contains sprintf("path %s is inside %s, which may not be accessed", [path, fs_root]) if {
	file_call
	valid_path
	not has_control_character
	some fs_root in pseudo_fs_root
}

deny contains sprintf("deleting files is not enabled for tenant %v", [input.subject.tenant]) if {
	call_of("deleteFile")
	not tenant_allows_delete
}

allow if {
	call_of("readFile")
	valid_path
}

allow if {
	call_of("deleteFile")
	valid_path
	tenant_allows_delete
}

# --- session limits (docs/session.md) -----------------------------------------------------

deletes_per_day := data.files.deletes_per_day if is_number(data.files.deletes_per_day) else := 20

deletes_per_conversation := data.files.deletes_per_conversation if {
	is_number(data.files.deletes_per_conversation)
} else := 1

limits contains lib.count_limit("files.delete_per_conversation", "conversation", 86400, deletes_per_conversation) if {
	call_of("deleteFile")
}

limits contains lib.count_limit("files.deletes_per_day", "subject", 86400, deletes_per_day) if call_of("deleteFile")
