package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

session_fixture := {
	"windows": {"1m": 60, "1h": 3600, "24h": 86400},
	"conversation": {
		"id": "c-1",
		"calls": {"1m": {}, "1h": {"deleteFile": 1}, "24h": {"deleteFile": 1, "readFile": 2}},
		"denied": {"1m": {}, "1h": {"send_money": 3}, "24h": {"send_money": 3}},
		"amounts": {"1m": {}, "1h": {}, "24h": {"send_money": {"/amount": 250.5}}},
		"counterparties": {"1m": [], "1h": [], "24h": ["GB29", "SE35"]},
		"approved_tools": ["send_money"],
		"resources": {"read": ["/srv/a"], "written": []},
		"labels": ["private_data", "untrusted_content"],
		"trusted_counterparties": ["GB29"],
	},
	"subject": {"calls": {"24h": {"deleteFile": 4}}},
	"recent": [],
	"truncated": false,
}

session_doc(tool, labels) := {"tool": {"name": tool, "output_labels": labels}, "session": session_fixture, "subject": {"tenant": "acme"}}

test_counts_and_sums_read_the_session if {
	lib.session_calls("conversation", "24h", "deleteFile") == 1 with input as session_doc("x", [])
	lib.session_calls("subject", "24h", "deleteFile") == 4 with input as session_doc("x", [])
	lib.session_denied("conversation", "1h", "send_money") == 3 with input as session_doc("x", [])
	lib.session_amount("conversation", "24h", "send_money", "/amount") == 250.5 with input as session_doc("x", [])
	lib.session_counterparties("conversation", "24h") == 2 with input as session_doc("x", [])
}

test_the_longest_window_counts_the_whole_session if {
	lib.session_longest_window == "24h" with input as session_doc("x", [])
	lib.session_calls_in_session("subject", "deleteFile") == 4 with input as session_doc("x", [])
	lib.session_calls_in_session("subject", "deleteFile") == 0 with input as {}
}

test_missing_parts_are_zero_never_an_error if {
	lib.session_calls("conversation", "1m", "deleteFile") == 0 with input as session_doc("x", [])
	lib.session_calls("nowhere", "24h", "deleteFile") == 0 with input as session_doc("x", [])
	lib.session_amount("subject", "24h", "send_money", "/amount") == 0 with input as session_doc("x", [])
	lib.session_calls("subject", "24h", "x") == 0 with input as {}
	lib.session_counterparties("subject", "24h") == 0 with input as {}
	not lib.rule_of_two with input as {}
}

test_provenance_helpers if {
	lib.trusted_counterparty("GB29") with input as session_doc("x", [])
	not lib.trusted_counterparty("SE35") with input as session_doc("x", [])
	lib.read_before("/srv/a") with input as session_doc("x", [])
	lib.approved_before("send_money") with input as session_doc("x", [])
	lib.session_labelled("private_data") with input as session_doc("x", [])
}

test_rule_of_two_needs_the_external_channel_and_both_labels if {
	lib.rule_of_two with input as session_doc("send_money", ["external_comms"])
	not lib.rule_of_two with input as session_doc("get_balance", ["private_data"])
	one_label := object.union(session_fixture, {"conversation": object.union(session_fixture.conversation, {"labels": ["private_data"]})})
	not lib.rule_of_two with input as object.union(session_doc("send_money", ["external_comms"]), {"session": one_label})
}

test_limit_builders if {
	fixtures.same(lib.count_limit("a", "conversation", 86400, 1), {"id": "a", "scope": "conversation", "window_s": 86400, "max": 1})
	lib.budget_limit("b", "subject", 60, 10, "/amount").amount_field == "/amount"
}

test_rate_limits_from_data if {
	rates := lib.rate_limits with input as session_doc("send_money", [])
		with data.rate_limits as {
			"tenants": {"acme": {"count": 100, "per_s": 60}, "other": {"count": 1, "per_s": 1}},
			"subject": {"count": 30, "per_s": 60},
			"tools": {"send_money": {"count": 5, "per_s": 60}, "get_balance": {"count": 1, "per_s": 1}},
		}
	rates == {
		{"id": "data.tenant", "scope": "tenant", "count": 100, "per_s": 60},
		{"id": "data.subject", "scope": "subject", "count": 30, "per_s": 60},
		{"id": "data.tool.send_money", "scope": "subject", "count": 5, "per_s": 60},
	}
}

test_malformed_rate_data_is_passed_on_for_the_gateway_to_refuse if {
	rates := lib.rate_limits with input as session_doc("send_money", [])
		with data.rate_limits as {"subject": 30, "tools": {"send_money": {"count": "many"}}}
	rates == {
		{"id": "data.subject", "scope": "subject", "malformed": 30},
		{"id": "data.tool.send_money", "scope": "subject", "count": "many", "per_s": null},
	}
}
