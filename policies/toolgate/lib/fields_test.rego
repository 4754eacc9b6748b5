package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

fields := fixtures.call(fixtures.admin, "t", {"s": "text", "n": 3, "a": [1], "z": null, "o": {"city": "Bern"}})

test_args if {
	fixtures.same(lib.args, {}) with input as object.union(fields, {"call": {"input": "not an object"}})
	fixtures.same(lib.args.n, 3) with input as fields
}

test_arg_with_defaults if {
	fixtures.same(lib.arg("n", 0), 3) with input as fields
	fixtures.same(lib.arg("missing", 0), 0) with input as fields
	fixtures.same(lib.arg(["o", "city"], ""), "Bern") with input as fields
	fixtures.same(lib.arg("z", 0), null) with input as fields
}

test_typed_args if {
	fixtures.same(lib.string_arg("s", ""), "text") with input as fields
	fixtures.same(lib.string_arg("n", ""), "") with input as fields
	fixtures.same(lib.number_arg("n", 0), 3) with input as fields
	fixtures.same(lib.number_arg("s", 0), 0) with input as fields
	fixtures.same(lib.array_arg("a", []), [1]) with input as fields
	fixtures.same(lib.array_arg("s", []), []) with input as fields
}

test_has_arg if {
	lib.has_arg("s") with input as fields
	not lib.has_arg("z") with input as fields
	not lib.has_arg("missing") with input as fields
}

test_conversation_calls if {
	fixtures.same(lib.conversation_calls("deleteFile"), 2) with input as fixtures.with_history(fields, {"deleteFile": 2})
	fixtures.same(lib.conversation_calls("deleteFile"), 0) with input as fields
	fixtures.same(lib.conversation_calls("deleteFile"), 0) with input as object.union(fields, {"history": {"tools": {"deleteFile": "2"}}})
}
