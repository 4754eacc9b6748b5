package toolgate_test

import data.toolgate.fixtures_test as fixtures

test_session_reads_of_a_tool_join_every_declaring_family if {
	tools := {
		"a": {"governs": {"x": {"versions": ["1"]}}, "session_reads": {"history"}},
		"b": {"governs": {"x": {"versions": ["2"]}}, "session_reads": {"session.conversation.labels"}},
		"c": {"governs": {"y": {}}, "session_reads": {"session.recent"}},
	}
	fixtures.same(
		data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": "x", "version": "1"}},
		["history", "session.conversation.labels"],
	)
}

test_session_reads_of_a_tool_no_family_reads_are_empty if {
	tools := {"a": {"governs": {"x": {}}, "session_reads": set()}}
	fixtures.same(data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": "x"}}, [])
	fixtures.same(data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": "z"}}, [])
}

test_session_reads_without_a_well_formed_declaration_are_everything if {
	tools := {
		"a": {"governs": {"x": {}}},
		"b": {"governs": {"y": {}}, "session_reads": ["history"]},
		"c": {"governs": {"z": {}}, "session_reads": {1}},
	}
	every name in {"x", "y", "z"} {
		fixtures.same(data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": name}}, ["*"])
	}
}

test_session_reads_of_the_shipped_families if {
	fixtures.same(data.toolgate.session_reads with input as {"tool": {"name": "exportReport"}}, [])
	fixtures.same(data.toolgate.session_reads with input as {"tool": {"name": "processPayment"}}, [])
	fixtures.same(
		data.toolgate.session_reads with input as {"tool": {"name": "deleteFile"}},
		["session.conversation.calls", "session.subject.calls", "session.windows"],
	)
	fixtures.same(
		data.toolgate.session_reads with input as {"tool": {"name": "send_money"}},
		["session.conversation.labels", "session.conversation.trusted_counterparties"],
	)
}
