# Files: deleteFile v1 and readFile v1 (path string).
#
# - readFile: allowed for the roles granted it in data.roles (support_agent, admin).
# - deleteFile: denied unless the tenant enables it (data.tenants[<tenant>].allow_delete_file);
#   then allowed for the roles granted it (admin).
# - Both: paths with `..` segments and paths at or under a protected secret
#   (data.files.secret_paths, e.g. /etc/shadow) are denied.
package tools.files

import rego.v1

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
	matches_secret(normalize(path), normalize(secret))
}

matches_secret(p, secret) if p == secret

matches_secret(p, secret) if startswith(p, concat("", [secret, "/"]))

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

deny contains sprintf("path %s is a protected secret (%s)", [path, secret]) if {
	file_call
	valid_path
	some secret in protected_secret
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
