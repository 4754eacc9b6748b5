package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

# Every kind's key; tests/unit/test_value_keys.py checks the shared vectors against the gateway.
test_value_key if {
	fixtures.same(lib.value_key("url", "HTTPS://Example.COM.:443/a#x"), "https://example.com/a")
	fixtures.same(lib.value_key("domain", "https://%65vil.com/x"), "evil.com")
	fixtures.same(lib.value_key("email", "Bob <Bob@Example.com>"), "bob@example.com")
	fixtures.same(lib.value_key("iban", "de89 3704 0044 0532 0130 00"), "DE89370400440532013000")
	fixtures.same(lib.value_key("phone", "0049 30 1234567"), "+49301234567")
	fixtures.same(lib.value_key("path", "/a//./b"), "/a/b")
	fixtures.same(lib.value_key("amount", "1.234,50 €"), "1234.5")
	fixtures.same(lib.value_key("number", 100.5), "100.5")
	fixtures.same(lib.value_key("text", " Pizza\n PARTY "), "pizza party")
}

test_value_key_refuses_lookalikes_and_non_values if {
	not lib.value_key("domain", "pаypal.com")
	not lib.value_key("iban", "DЕ89370400440532013000")
	not lib.value_key("amount", "twelve")
	not lib.value_key("url", "/relative")
}
