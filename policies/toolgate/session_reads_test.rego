package toolgate_test

import data.toolgate.fixtures_test as fixtures

test_session_reads_of_a_tool_join_every_declaring_family if {
	tools := {
		"a": {"governs": {"x": {"versions": ["1"]}}, "session_reads": {"history"}},
		"b": {"governs": {"x": {"versions": ["2"]}}, "session_reads": {"session.conversation.labels"}},
		"c": {"governs": {"y": {}}, "session_reads": {"session.recent"}},
	}
	reads := data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": "x", "version": "1"}}
	fixtures.same(reads, ["history", "session.conversation.labels"])
}

test_session_reads_are_empty_when_no_family_reads_or_none_governs if {
	tools := {"a": {"governs": {"x": {}}, "session_reads": set()}}
	declared := data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": "x"}}
	fixtures.same(declared, [])
	ungoverned := data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": "z"}}
	fixtures.same(ungoverned, [])
}

test_session_reads_without_a_well_formed_declaration_are_everything if {
	tools := {
		"a": {"governs": {"x": {}}},
		"b": {"governs": {"y": {}}, "session_reads": ["history"]},
		"c": {"governs": {"z": {}}, "session_reads": {1}},
	}
	every name in {"x", "y", "z"} {
		reads := data.toolgate.session_reads with data.tools as tools with input as {"tool": {"name": name}}
		fixtures.same(reads, ["*"])
	}
}

test_session_reads_of_the_shipped_families if {
	every name in {"exportReport", "processPayment", "runCommand", "createTicket"} {
		reads := data.toolgate.session_reads with input as {"tool": {"name": name}}
		fixtures.same(reads, [])
	}
	delete := data.toolgate.session_reads with input as {"tool": {"name": "deleteFile"}}
	fixtures.same(delete, ["session.conversation.calls", "session.subject.calls", "session.windows"])
	transfer := data.toolgate.session_reads with input as {"tool": {"name": "send_money"}}
	fixtures.same(transfer, ["provenance", "session.conversation.labels", "session.truncated"])
	every name in {"get_webpage", "send_email"} {
		reads := data.toolgate.session_reads with input as {"tool": {"name": name}}
		fixtures.same(reads, ["provenance", "session.conversation.labels"])
	}
}
