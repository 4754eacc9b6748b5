# METADATA
# title: toolgate policy library
# description: |
#   Helpers for tool-family policies: call matching, safe field access, paths, URLs, hosts and
#   domains, e-mail addresses, links in text, tenant data and counterparties, secret and PII
#   patterns, money, and Unicode lookalikes. Every helper is total: for any input it is true,
#   false/undefined or a value, and never raises a builtin error (the gateway evaluates with
#   strict builtin errors, where a raised error is a 503). See docs/policy-authors.md.
package toolgate.lib

# --- the tool of this call -----------------------------------------------------------------

# The tool's namespace: input.tool.namespace when it is a string, else "" (no namespace).
default namespace := ""

namespace := input.tool.namespace if is_string(input.tool.namespace)

# The requested tool as the library matches it against family declarations.
tool := {"name": input.tool.name, "version": input.tool.version, "namespace": namespace}

# The tool's name across namespaces, as role grants (data.roles.<role>.tools), records and
# grants name it: "namespace/name", or the bare name in the default namespace.
qualified_name := input.tool.name if namespace == ""

qualified_name := concat("/", [namespace, input.tool.name]) if namespace != ""

# A registered tool (one with a contract). Unregistered (dynamic) tools never reach a family.
registered if input.tool.registered == true

# The call is to the registered tool `name` (families are consulted only for the tools and
# versions they declare, so name alone tells a family's tools apart).
call_of(name) if {
	registered
	input.tool.name == name
}

# The call is to version `version` of the registered tool `name`.
call_of_version(name, version) if {
	call_of(name)
	input.tool.version == version
}

# The call is to the registered tool `name` in `ns` ("" for no namespace).
call_in_namespace(ns, name) if {
	call_of(name)
	namespace == ns
}

# The call is to one of `names` (a set or an array of tool names).
call_among(names) if {
	registered
	input.tool.name in names
}

# --- family declarations ---------------------------------------------------------------------

# A family declares the tools it governs in `governs`, an object keyed by tool name:
#   governs := {"<tool>": {"versions"?: [string], "namespace"?: string, "shared_with"?: [family]}}
# `versions` absent: every version; `namespace` absent: "". See docs/policy-authors.md.

# The declaration `declaration` of tool `name` covers `t` ({"name", "version", "namespace"}).
covers(name, declaration, t) if {
	name == t.name
	declared_namespace := object.get(declaration, "namespace", "")
	declared_namespace == t.namespace
	t.version in object.get(declaration, "versions", [t.version])
}

# A declaration is well formed: an object whose members are a string `namespace`, and string
# lists `versions` and `shared_with`, each optional.
well_formed_declaration(declaration) if {
	is_object(declaration)
	every key, value in declaration {
		_valid_declaration_member(key, value)
	}
}

_valid_declaration_member("namespace", value) if is_string(value)

_valid_declaration_member("versions", value) if _strings(value)

_valid_declaration_member("shared_with", value) if _strings(value)

_strings(values) if {
	_collection(values)
	every value in values {
		is_string(value)
	}
}

_collection(values) if is_array(values)

_collection(values) if is_set(values)

# The declaration of tool `name` with its defaults made explicit (versions: null means every
# version).
normalized_declaration(name, declaration) := {
	"name": name,
	"namespace": object.get(declaration, "namespace", ""),
	"versions": _sorted_or_null(object.get(declaration, "versions", null)),
	"shared_with": sort(object.get(declaration, "shared_with", [])),
} if {
	well_formed_declaration(declaration)
}

_sorted_or_null(null) := null

_sorted_or_null(values) := sort(values) if values != null
