# METADATA
# title: Files
# description: |
#   readFile v1 and deleteFile v1 (path string): an allow-list of roots with a deny-list
#   inside.
#   - readFile: the path must be at or under a read root (read_roots, compared exactly).
#   - deleteFile: the tenant must enable it (features.delete_files); the path must be under a
#     delete root (delete_roots) and must not be, nor be a parent of, a protected path (the
#     roots themselves, system_paths, secret_paths, the kernel pseudo-filesystems), so "/",
#     "/etc", "/root", "/run" and "/var/run" are never deleted. A second delete in one
#     conversation (input.session; limits.deletes_per_conversation) needs approval; the
#     unapproved deletes per conversation and limits.deletes_per_day (20) per subject a day are
#     limits the gateway reserves atomically (docs/session.md).
#   - Both: the path must be absolute, free of ".." segments, control characters,
#     backslashes, percent-encoded bytes and lookalike or invisible characters, and must not
#     be at or under a secret path or /proc, /sys, /dev, nor name a secret file
#     (secret_names, secret_extensions). Deny-lists ignore case.
#   Symbolic links are invisible to a policy: the tool service resolves the path first.
# custom:
#   governs:
#     readFile:
#       versions: ["1"]
#     deleteFile:
#       versions: ["1"]
#   approver_roles: default
package tools.files

import data.toolgate.lib

governs["readFile"] := {"versions": ["1"]}

governs["deleteFile"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand").
session_reads := {"session.conversation.calls", "session.subject.calls", "session.windows"}

# --- settings (paths normalized; deny-lists in lowercase: files_test checks both) ----------

read_roots := {"/srv"}

delete_roots := {"/srv", "/tmp"}

secret_paths := {
	"/etc/gshadow",
	"/etc/gshadow-",
	"/etc/shadow",
	"/etc/shadow-",
	"/etc/ssh",
	"/etc/ssl/private",
	"/etc/sudoers",
	"/etc/sudoers.d",
	"/proc/self/environ",
	"/root",
	"/run/secrets",
	"/var/run/secrets",
}

# Kernel pseudo-filesystems: /proc/self/root/... reaches the whole file system.
pseudo_fs_roots := {"/proc", "/sys", "/dev"}

# Folder or file names that hold secrets wherever they are.
secret_names := {
	".aws", ".azure", ".docker", ".env", ".git-credentials", ".gnupg", ".kube", ".netrc", ".pgpass",
	".ssh", "id_dsa", "id_ecdsa", "id_ed25519", "id_rsa",
}

secret_extensions := {".jks", ".kdbx", ".key", ".keystore", ".p12", ".pem", ".pfx"}

# Folders whose deletion breaks the host.
system_paths := {
	"/", "/bin", "/boot", "/etc", "/home", "/lib", "/lib64", "/opt", "/root", "/run", "/sbin",
	"/usr", "/var", "/var/lib", "/var/log", "/var/run",
}

# --- the path ------------------------------------------------------------------------------

path := lib.string_arg("path", "")

valid_path if path != ""

control_character if lib.has_control_character(path)

# The path may be quoted in a reason (no control character reaches a reason or a log).
quotable if {
	valid_path
	not control_character
}

segments := lib.path_segments(path)

# The path and the folders above it, as deep as the listed paths they are compared with go:
# "/srv/a/b" -> {"/srv", "/srv/a", "/srv/a/b"}. Deeper prefixes can match none of them, and
# making every one of a long path's (2,000 segments in 4 KB) costs quadratic time.
prefixes contains concat("/", array.concat([""], array.slice(segments, 0, n))) if {
	lib.path_absolute(path)
	some n in numbers.range(1, min([count(segments), listed_depth]))
	n > 0
}

# The most segments of a path in the lists (roots, secret paths, pseudo-filesystems): a
# constant, not computed on every call; files_test.rego checks it against the lists.
listed_depth := 3

listed_paths := ((read_roots | delete_roots) | secret_paths) | pseudo_fs_roots

lower_prefixes contains lower(p) if some p in prefixes

# The normalized, lowercased path ("/" for the root).
path_key := lower(lib.path_normalize(path))

# --- deny-list: every file call ------------------------------------------------------------

# Every deny-list finding denies. The roots rules below stay silent when there is one, so
# that "/etc/shadow" is reported as a secret rather than as outside the roots.
deny contains problem if some problem in path_problems

path_problems contains {"rule": "path_invalid", "message": "path must be a non-empty string"} if not valid_path

path_problems contains {"rule": "path_traversal", "message": "path must not contain '..' segments"} if {
	valid_path
	lib.path_has_dot_dot(path)
}

path_problems contains {"rule": "path_relative", "message": "path must be absolute"} if {
	valid_path
	not lib.path_absolute(path)
}

path_problems contains {"rule": "path_control_character", "message": "path must not contain control characters"} if {
	control_character
}

path_problems contains {"rule": "path_backslash", "message": "path must not contain backslashes"} if {
	contains(path, "\\")
}

# A tool service that percent-decodes or NFKC-normalizes a path would open another file than
# the one judged here ("/srv/%2e%2e/etc/shadow", "/srv/\uFF0E\uFF0E/etc/shadow").
path_problems contains {"rule": "path_percent_encoded", "message": "path must not contain percent-encoded bytes"} if {
	valid_path
	regex.match(`%[0-9A-Fa-f]{2}`, path)
}

path_problems contains {
	"rule": "path_lookalike",
	"message": "path must not contain characters that look like ASCII ones or like nothing",
} if {
	valid_path
	_lookalike_path
}

_lookalike_path if lib.has_confusable(path)

# Dots and slashes of other code points (one-dot and two-dot leaders, ellipsis, small and
# full-width full stop, full-width solidus, division and fraction slashes, big solidus).
_lookalike_path if regex.match(`[\x{2024}\x{2025}\x{2026}\x{FE52}\x{FF0E}\x{FF0F}\x{2215}\x{2044}\x{29F8}]`, path)

path_problems contains {
	"rule": "protected_secret",
	"message": sprintf("path %s is a protected secret (%s)", [path, secret]),
} if {
	quotable
	some secret in (lower_prefixes & secret_paths)
}

path_problems contains {
	"rule": "pseudo_filesystem",
	"message": sprintf("path %s is inside %s, which may not be accessed", [path, fs_root]),
} if {
	quotable
	some fs_root in (lower_prefixes & pseudo_fs_roots)
}

path_problems contains {
	"rule": "secret_file_name",
	"message": sprintf("path %s names a secret file (%s)", [path, name]),
} if {
	quotable
	some name in ({lower(s) | some s in segments} & secret_names)
}

path_problems contains {
	"rule": "secret_file_name",
	"message": sprintf("path %s names a secret file (*%s)", [path, extension]),
} if {
	quotable
	name := lower(segments[count(segments) - 1])
	contains(name, ".")
	parts := split(name, ".")
	extension := concat("", [".", parts[count(parts) - 1]])
	extension in secret_extensions
}

# --- readFile: an allow-list of roots ------------------------------------------------------

under_read_root if count(prefixes & read_roots) > 0

deny contains {
	"rule": "read_outside_roots",
	"message": sprintf("path %s is outside the readable roots (%s)", [path, concat(", ", sort(read_roots))]),
} if {
	input.tool.name == "readFile"
	quotable
	count(path_problems) == 0
	not under_read_root
}

allow contains {"rule": "read_under_root", "message": "a readable path under a read root"} if {
	input.tool.name == "readFile"
	under_read_root
}

# --- deleteFile ----------------------------------------------------------------------------

under_delete_root if count(prefixes & delete_roots) > 0

# Unavailable whatever the input (the capability document leaves deleteFile out of the list).
unavailable contains {
	"rule": "delete_not_enabled",
	"message": sprintf("deleting files is not enabled for tenant %v", [input.subject.tenant]),
} if {
	input.tool.name == "deleteFile"
	not lib.tenant_feature("delete_files")
}

deny contains reason if some reason in unavailable

# Paths a delete may not remove: each protected path and every folder above one.
protected_paths := (((read_roots | delete_roots) | system_paths) | secret_paths) | pseudo_fs_roots

deletes_protected if path_key in protected_paths

deletes_protected if strings.any_prefix_match(protected_paths, concat("", [path_key, "/"]))

path_problems contains {
	"rule": "delete_protected_path",
	"message": sprintf("path %s may not be deleted: it is or contains protected path %s", [path, min(hit)]),
} if {
	input.tool.name == "deleteFile"
	quotable
	lib.path_absolute(path)
	deletes_protected
	hit := {p | some p in protected_paths; lib.path_at_or_under(p, path_key)}
}

deny contains {
	"rule": "delete_outside_roots",
	"message": sprintf("path %s is outside the deletable roots (%s)", [path, concat(", ", sort(delete_roots))]),
} if {
	input.tool.name == "deleteFile"
	quotable
	count(path_problems) == 0
	not under_delete_root
}

# One delete per conversation without a human (docs/session.md; a tenant may allow more with
# limits.deletes_per_conversation). The session counts this subject's executed deletes in the
# call's conversation (calls without a conversation id share one "no conversation"), so the
# next delete asks for approval; and since concurrent deletes read the same session, the
# unapproved deletes of a conversation are also a limit the gateway reserves atomically: of
# two at once, one is allowed and the other denied.
deletes_per_conversation := lib.tenant_limit("deletes_per_conversation", 1)

approval_required contains {
	"rule": "second_delete_in_conversation",
	"message": "a second file deletion in one conversation needs approval",
} if {
	input.tool.name == "deleteFile"
	lib.session_calls_in_session("conversation", "deleteFile") >= deletes_per_conversation
}

limits contains lib.count_limit("files.delete_per_conversation", "conversation", 86400, deletes_per_conversation) if {
	input.tool.name == "deleteFile"
	not input.approval.approved == true
}

# At most limits.deletes_per_day (default 20) deletes a day per subject, whatever the
# conversation ids: a new or absent id does not reset it.
limits contains lib.count_limit("files.deletes_per_day", "subject", 86400, lib.tenant_limit("deletes_per_day", 20)) if {
	input.tool.name == "deleteFile"
}

allow contains {"rule": "delete_under_root", "message": "a deletable path under a delete root"} if {
	input.tool.name == "deleteFile"
	lib.tenant_feature("delete_files")
	under_delete_root
}
