package toolgate_test

import data.toolgate.fixtures_test as fixtures

test_catalog_lists_the_shipped_families if {
	shipped := {"banking", "commands", "files", "payments", "reports", "tickets"}
	fixtures.same(shipped - object.keys(data.toolgate.catalog.families), set())
	fixtures.same(data.toolgate.catalog.families.files, {
		"governs": [
			{"name": "deleteFile", "namespace": "", "versions": ["1"], "shared_with": []},
			{"name": "readFile", "namespace": "", "versions": ["1"], "shared_with": []},
		],
		"approver_roles": null,
	})
	fixtures.same(data.toolgate.catalog.families.banking.approver_roles, ["account_holder"])
	fixtures.same(data.toolgate.catalog.problems, [])
}

test_catalog_reports_unusable_declarations_and_conflicts if {
	tools := {
		"a": {"governs": {"x": {"versions": ["1", "2"]}, "y": {"versions": "1"}}, "approver_roles": "approver"},
		"b": {"governs": {"x": {"versions": ["2"]}, "z": {"shared_with": ["c"]}}},
		"c": {"governs": {"x": {"versions": ["3"]}}},
		"d": {"governs": {"w": {"namespace": "n1", "shared_with": ["e"]}}},
		"e": {"governs": {"w": {"namespace": "n1", "shared_with": ["d"]}}},
	}
	fixtures.same(data.toolgate.catalog.problems, [
		"family a: approver_roles is not a list of role names",
		"family a: governs.y is not {versions?, namespace?, shared_with?}",
		"family b: shared_with of z names c, which does not claim it",
		"tool x (namespace \"\") is claimed by families a and b without shared_with",
	]) with data.tools as tools
}

test_catalog_findings_name_the_family_and_tool_of_each_problem if {
	tools := {
		"a": {"governs": {"x": {"versions": ["1", "2"]}, "y": {"versions": "1"}}, "approver_roles": "approver"},
		"b": {"governs": {"x": {"versions": ["2"]}, "z": {"shared_with": ["c"]}}},
	}
	findings := data.toolgate.catalog.findings with data.tools as tools
	fixtures.same({[f.kind, f.family, object.get(f, "tool", null), object.get(f, "other", null)] | some f in findings}, {
		["malformed_approver_roles", "a", null, null],
		["malformed_declaration", "a", "y", null],
		["shared_with_not_claimant", "b", "z", "c"],
		["unshared_claim", "a", "x", "b"],
	})
	fixtures.same({f.message | some f in findings}, {m | some m in data.toolgate.catalog.problems}) with data.tools as tools
}

test_catalog_names_what_can_ask_for_approval if {
	sources := {s | some s in data.toolgate.catalog.approval_sources}
	asking := {
		"family banking (approval_required)",
		"family commands (approval_required)",
		"family files (approval_required)",
		"family payments (approval_required)",
		"role developer (dynamic_tools: true)",
	}
	fixtures.same(asking - sources, set())
	fixtures.same({"family reports (approval_required)", "family tickets (approval_required)"} & sources, set())
	tools := {
		"asks": {"governs": {"x": {}}, "approval_required": set()},
		"decides": {"governs": {"y": {}}, "deny": set(), "allow": set()},
	}
	roles := {"agent": {"tools": ["x", "y"], "dynamic_tools": false}}
	fixtures.same(data.toolgate.catalog.approval_sources, ["family asks (approval_required)"]) with data.tools as tools
		with data.roles as roles
	fixtures.same(data.toolgate.catalog.approval_sources, []) with data.tools as {"decides": tools.decides}
		with data.roles as roles
}

test_catalog_collects_the_declared_tenant_custom_shapes if {
	fixtures.same(data.toolgate.catalog.tenant_custom.secret_patterns.declared_by, ["toolgate.lib"])
	tools := {
		"a": {"governs": {"x": {}}, "tenant_custom": {"aliases": {"type": "array"}, "secret_patterns": {"type": "object"}}},
		"b": {"governs": {"y": {}}, "tenant_custom": {"aliases": {"type": "array"}}},
	}
	custom := data.toolgate.catalog.tenant_custom with data.tools as tools
	fixtures.same(custom.aliases, {"schema": {"type": "array"}, "declared_by": ["a", "b"]})
	not custom.secret_patterns # declared by the library and by a with different shapes: neither is used
	fixtures.same(data.toolgate.catalog.problems, ["tenant data custom.secret_patterns is declared with different shapes by a, toolgate.lib"])
		with data.tools as tools
}
