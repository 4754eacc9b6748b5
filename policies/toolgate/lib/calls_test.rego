package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

doc := fixtures.call(fixtures.admin, "send_email", {})

test_namespace_defaults_to_empty if {
	fixtures.same(lib.namespace, "") with input as doc
	fixtures.same(lib.namespace, "") with input as fixtures.with_tool(doc, {"namespace": 7})
	fixtures.same(lib.namespace, "mail") with input as fixtures.with_tool(doc, {"namespace": "mail"})
	fixtures.same(lib.tool, {"name": "send_email", "version": "1", "namespace": ""}) with input as doc
}

test_call_matching if {
	lib.call_of("send_email") with input as doc
	not lib.call_of("send_mail") with input as doc
	not lib.call_of("send_email") with input as fixtures.with_tool(doc, {"registered": false})
	lib.call_of_version("send_email", "1") with input as doc
	not lib.call_of_version("send_email", "2") with input as doc
	lib.call_in_namespace("", "send_email") with input as doc
	lib.call_in_namespace("mail", "send_email") with input as fixtures.with_tool(doc, {"namespace": "mail"})
	not lib.call_in_namespace("mail", "send_email") with input as doc
	lib.call_among({"a", "send_email"}) with input as doc
	lib.call_among(["send_email"]) with input as doc
	not lib.call_among(set()) with input as doc
}

test_covers if {
	t := {"name": "x", "version": "2", "namespace": "ns"}
	lib.covers("x", {"namespace": "ns"}, t)
	lib.covers("x", {"namespace": "ns", "versions": ["1", "2"]}, t)
	not lib.covers("x", {"namespace": "ns", "versions": ["1"]}, t)
	not lib.covers("x", {}, t)
	not lib.covers("y", {"namespace": "ns"}, t)
}

test_well_formed_declaration if {
	every d in [{}, {"versions": ["1"]}, {"namespace": "a", "shared_with": ["b"]}, {"versions": {"1", "2"}}] {
		lib.well_formed_declaration(d)
	}
	every d in [[], "1", {"versions": "1"}, {"versions": [1]}, {"namespace": 1}, {"shared": ["b"]}] {
		not lib.well_formed_declaration(d)
	}
}

test_normalized_declaration if {
	fixtures.same(lib.normalized_declaration("x", {}), {"name": "x", "namespace": "", "versions": null, "shared_with": []})
	fixtures.same(lib.normalized_declaration("x", {"versions": ["2", "1"], "shared_with": {"b"}, "namespace": "n"}), {
		"name": "x", "namespace": "n", "versions": ["1", "2"], "shared_with": ["b"],
	})
}
