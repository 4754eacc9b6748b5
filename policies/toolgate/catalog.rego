package toolgate

import data.toolgate.lib

# --- the catalog of families, for `toolgate policy check` ------------------------------------
#
# Evaluated without input (data.toolgate.catalog):
#   {"families": {<family>: {"governs": [{"name", "namespace", "versions" (null: every
#      version), "shared_with"}], "approver_roles": [role] | null (the library's default)}},
#    "problems": [sentence],
#    "findings": [{"kind", "family", "tool"?, "namespace"?, "other"?, "message"}],
#    "approval_sources": [sentence],
#    "tenant_custom": {<name>: {"schema": JSON Schema, "declared_by": [family or "toolgate.lib"]}}}
# A problem is a declaration the library cannot use or two families claiming one tool (same
# name and namespace, overlapping versions) without naming each other in shared_with; each is
# also a finding, which names its family and tool so that a check can point at the
# declaration. Kinds: malformed_declaration, malformed_approver_roles, unshared_claim,
# shared_with_not_claimant. The check adds what needs the contracts: a contract without a
# family, a family naming a tool without a contract, and the input fields each rule reads
# (from the parsed Rego). approval_sources names what can make a decision user-approval; the
# gateway's start-up check refuses production without TOOLGATE_APPROVAL_KEYS unless it is empty.
catalog := {
	"families": {family: _family_entry(family) | some family; data.tools[family].governs},
	"problems": sort({f.message | some f in catalog_findings}),
	"findings": sort(catalog_findings),
	"approval_sources": sort(approval_sources),
	"tenant_custom": tenant_custom,
}

# --- the tenant data's custom members -------------------------------------------------------
#
# A family (or the library) that reads data.tenants[<tenant>].custom.<name> declares its shape:
#   tenant_custom := {"<name>": <JSON Schema>}
# `toolgate tenant-data check` and pushes validate each tenant's custom members against these
# shapes, and refuse a member nobody declares. Two different shapes for one name are a finding
# (and neither is used, so that member is refused until they agree).
_custom_declarations contains [name, "toolgate.lib", schema] if {
	some name, schema in lib.tenant_custom
}

_custom_declarations contains [name, family, schema] if {
	some family
	data.tools[family].governs
	some name, schema in data.tools[family].tenant_custom
}

_custom_shapes(name) := {schema |
	some [declared, _, schema] in _custom_declarations
	declared == name
}

_custom_owners(name) := sort({owner |
	some [declared, owner, _] in _custom_declarations
	declared == name
})

tenant_custom[name] := {"schema": schema, "declared_by": _custom_owners(name)} if {
	some [name, _, _] in _custom_declarations
	[schema] := [s | some s in _custom_shapes(name)]
}

# A family asks for approval through its approval_required rule, the only way a family's
# contribution becomes an "approval" effect (decision.rego); approver_roles is optional (null:
# the library's default roles), so it cannot say which families ask. The rule is defined
# (possibly empty without input) exactly when the family writes one.
approval_sources contains sprintf("family %s (approval_required)", [family]) if {
	some family
	data.tools[family].governs
	data.tools[family].approval_required
}

# The library asks for approval of every unregistered tool of a role with dynamic_tools.
approval_sources contains sprintf("role %s (dynamic_tools: true)", [role]) if {
	some role
	data.roles[role].dynamic_tools == true
}

_family_entry(family) := {
	"governs": sort([lib.normalized_declaration(name, declaration) |
		some name, declaration in data.tools[family].governs
		lib.well_formed_declaration(declaration)
	]),
	"approver_roles": _approver_roles(family),
}

default _approver_roles(_) := null

_approver_roles(family) := data.tools[family].approver_roles

# Every well-formed declaration as [family, normalized declaration].
_declarations contains [family, lib.normalized_declaration(name, declaration)] if {
	some family, name
	declaration := data.tools[family].governs[name]
	lib.well_formed_declaration(declaration)
}

catalog_findings contains {
	"kind": "malformed_declaration",
	"family": family,
	"tool": name,
	"message": sprintf("family %s: governs.%s is not {versions?, namespace?, shared_with?}", [family, name]),
} if {
	some family, name
	declaration := data.tools[family].governs[name]
	not lib.well_formed_declaration(declaration)
}

catalog_findings contains {
	"kind": "malformed_approver_roles",
	"family": family,
	"message": sprintf("family %s: approver_roles is not a list of role names", [family]),
} if {
	some family
	roles := data.tools[family].approver_roles
	not _role_names(roles)
}

catalog_findings contains {
	"kind": "unshared_claim",
	"family": a,
	"other": b,
	"tool": da.name,
	"namespace": da.namespace,
	"message": sprintf(
		"tool %s (namespace %q) is claimed by families %s and %s without shared_with",
		[da.name, da.namespace, a, b],
	),
} if {
	some [a, da] in _declarations
	some [b, db] in _declarations
	a < b
	da.name == db.name
	da.namespace == db.namespace
	_versions_overlap(da.versions, db.versions)
	not _mutual(da, a, db, b)
}

catalog_findings contains {
	"kind": "shared_with_not_claimant",
	"family": family,
	"other": other,
	"tool": d.name,
	"namespace": d.namespace,
	"message": sprintf("family %s: shared_with of %s names %s, which does not claim it", [family, d.name, other]),
} if {
	some [family, d] in _declarations
	some other in d.shared_with
	not _claims(other, d)
}

catalog_findings contains {
	"kind": "conflicting_tenant_custom",
	"family": owners[0],
	"message": sprintf("tenant data custom.%s is declared with different shapes by %s", [name, concat(", ", owners)]),
} if {
	some [name, _, _] in _custom_declarations
	count(_custom_shapes(name)) > 1
	owners := _custom_owners(name)
}

_claims(family, d) if {
	some [claimant, other] in _declarations
	claimant == family
	other.name == d.name
	other.namespace == d.namespace
}

_role_names(roles) if {
	is_array(roles)
	every role in roles {
		is_string(role)
	}
}

_versions_overlap(null, _)

_versions_overlap(_, null)

_versions_overlap(a, b) if {
	some v in a
	v in b
}
