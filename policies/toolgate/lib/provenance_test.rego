package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

# The agreed shape of input.provenance: a recipient from a transaction's subject (untrusted),
# an amount the user typed, a subject with no source, a payee from the bank's own record, and a
# message body with two URLs (one the user typed, one from a web page).
provenance_fixture := {
	"arguments": {
		"/recipient": {
			"kind": "iban",
			"sources": [{"tool": "get_most_recent_transactions", "pointer": "/3/subject", "label": "untrusted_content", "decision_id": "d-1"}],
			"in_prompt": false, "in_trusted_output": false,
		},
		"/amount": {"kind": "amount", "sources": [], "in_prompt": true, "in_trusted_output": false},
		"/subject": {"kind": "text", "sources": [], "in_prompt": false, "in_trusted_output": false},
		"/payee": {
			"kind": "iban",
			"sources": [
				{"tool": "get_scheduled_transactions", "pointer": "/0/recipient", "label": "private_data", "decision_id": "d-2"},
				{"tool": "get_most_recent_transactions", "pointer": "/1/recipient", "label": "private_data", "decision_id": "d-1"},
			],
			"in_prompt": false, "in_trusted_output": true,
		},
		"/body": {"kind": "text", "sources": [], "in_prompt": false, "in_trusted_output": false},
		"/note": {"kind": "text", "sources": [], "in_prompt": false, "in_trusted_output": false},
	},
	"extracted": {
		"/body": [
			{"kind": "url", "index": 0, "sources": [], "in_prompt": true, "in_trusted_output": false},
			{"kind": "url", "index": 1, "sources": [{"tool": "get_webpage", "pointer": "", "label": "untrusted_content", "decision_id": "d-3"}], "in_prompt": false, "in_trusted_output": false},
		],
		"/note": [{"kind": "url", "index": 0, "sources": [], "in_prompt": true, "in_trusted_output": false}],
	},
	"untraced_labels": ["private_data"],
}

# A send_money call of the fixtures with input.provenance as the gateway builds it.
with_provenance := object.union(
	fixtures.call(fixtures.emma, "send_money", {"recipient": "GB29NWBK60161331926819", "amount": 98.7}),
	{"provenance": provenance_fixture},
)

test_from_untrusted_finds_an_untrusted_source_of_the_argument_or_of_a_value_extracted_from_it if {
	lib.from_untrusted("/recipient") with input as with_provenance
	lib.from_untrusted("/body") with input as with_provenance
	not lib.from_untrusted("/amount") with input as with_provenance
	not lib.from_untrusted("/payee") with input as with_provenance
	not lib.from_untrusted("/note") with input as with_provenance
	not lib.from_untrusted("/absent") with input as with_provenance
}

test_only_from_needs_a_source_and_every_source_labelled_as_given if {
	lib.only_from("/payee", {"private_data"}) with input as with_provenance
	lib.only_from("/payee", ["private_data", "external_comms"]) with input as with_provenance
	lib.only_from("/recipient", {"untrusted_content"}) with input as with_provenance
	not lib.only_from("/recipient", {"private_data"}) with input as with_provenance
	not lib.only_from("/amount", {"private_data"}) with input as with_provenance # no source at all
	not lib.only_from("/absent", {"private_data"}) with input as with_provenance
}

test_user_supplied_is_the_argument_in_the_prompt_or_every_extracted_value_in_it if {
	lib.user_supplied("/amount") with input as with_provenance
	lib.user_supplied("/note") with input as with_provenance
	not lib.user_supplied("/body") with input as with_provenance # one of its URLs came from a web page
	not lib.user_supplied("/recipient") with input as with_provenance
	not lib.user_supplied("/subject") with input as with_provenance # no extracted value: the text itself
	not lib.user_supplied("/absent") with input as with_provenance
}

test_trusted_output_and_untraced_labels if {
	lib.from_trusted_output("/payee") with input as with_provenance
	not lib.from_trusted_output("/recipient") with input as with_provenance
	lib.untraced_label("private_data") with input as with_provenance
	not lib.untraced_label("untrusted_content") with input as with_provenance
}

test_without_provenance_every_helper_is_undefined if {
	not lib.provenance_built with input as {}
	lib.provenance_built with input as with_provenance
	not lib.from_untrusted("/recipient") with input as {}
	not lib.only_from("/recipient", {"untrusted_content"}) with input as {}
	not lib.user_supplied("/recipient") with input as {}
	not lib.from_trusted_output("/recipient") with input as {}
	not lib.untraced_label("untrusted_content") with input as {}
}

# Malformed members (a caller cannot send input.provenance, but the helpers stay total).
test_malformed_provenance_never_raises if {
	odd := {"provenance": {"arguments": {"/r": {"sources": "x", "in_prompt": "true"}, "/s": 3}, "extracted": {"/r": {"a": 1}}, "untraced_labels": "untrusted_content"}}
	not lib.from_untrusted("/r") with input as odd
	not lib.from_untrusted("/s") with input as odd
	not lib.user_supplied("/r") with input as odd
	not lib.only_from("/r", {"x"}) with input as odd
	not lib.untraced_label("untrusted_content") with input as odd
}
