package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

test_secrets_in_text if {
	github := concat("", ["ghp_", "abcdefghijklmnopqrstuvwxyz0123456789"])
	cases := {
		"aws_access_key_id": "key AKIAIOSFODNN7EXAMPLE here",
		"github_token": sprintf("token=%s", [github]),
		"private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==",
		"jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		"bearer_token": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
		"slack_token": "xoxb-1234567890-abcdefghij",
		"google_api_key": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
		"verification_code": "Your security code 463820 expires in 10 minutes",
	}
	every kind, text in cases {
		fixtures.same([kind, lib.secrets_in(text)], [kind, {kind}])
		lib.has_secret(text)
	}
	fixtures.same(lib.secrets_in("an ordinary sentence about keys and tokens"), set())
	every text in ["PIN: 1234", "the verification code is 482913", "CVV 123", "one-time passcode 55120"] {
		fixtures.same([text, lib.secrets_in(text)], [text, {"verification_code"}])
	}
	every text in ["the code is 1234", "access 2024 reports", "pinned 3 issues", "2fa is on since 2023"] {
		fixtures.same([text, lib.secrets_in(text)], [text, set()])
	}
	not lib.has_secret(42)
}

test_luhn if {
	every n in ["4111111111111111", "4242424242424242", "5555555555554444", "378282246310005"] {
		lib.luhn_valid(n)
	}
	every n in ["4111111111111112", "1234567890123", "411111111111", "4111-1111-1111-1111", 4111111111111111] {
		not lib.luhn_valid(n)
	}
}

test_card_numbers_in_text if {
	fixtures.same(lib.card_numbers_in("pay with 4111 1111 1111 1111 or 4242-4242-4242-4242, not 4111 1111 1111 1112"), {
		"4111111111111111",
		"4242424242424242",
	})
	fixtures.same(lib.card_numbers_in("order 1234567890123 shipped"), set())
}

test_iban_checksum if {
	every iban in ["GB29NWBK60161331926819", "DE89370400440532013000", "de89 3704 0044 0532 0130 00", "CH9300762011623852957"] {
		lib.iban_valid(iban)
	}
	every bad in ["GB29NWBK60161331926818", "UK12345678901234567890", "US133000000121212121212", "Spotify", "\u017fE3550000000054910000003", "GB29", 7] {
		not lib.iban_valid(bad)
	}
	fixtures.same(lib.iban_compact("gb29 nwbk 6016 1331 9268 19"), "GB29NWBK60161331926819")
	not lib.iban_compact("\u017fE35")
}

test_ibans_and_pii_in_text if {
	text := "send to DE89 3704 0044 0532 0130 00 or GB29NWBK60161331926818; mail ann@example.com"
	fixtures.same(lib.ibans_in(text), {"DE89370400440532013000"})
	fixtures.same(lib.pii_in(text), {"iban", "email"})
	fixtures.same(lib.pii_in("card 4111111111111111"), {"card_number"})
	fixtures.same(lib.pii_in("nothing"), set())
}

test_a_tenants_own_secret_patterns if {
	tenants := {"t1": {"custom": {"secret_patterns": {"badge": `\bT1-[0-9]{6}\b`, "broken": `(?<=x)y`, "number": 7}}}}
	as_t1 := {"subject": {"tenant": "t1"}}
	fixtures.same(lib.secrets_in("badge T1-123456 and xy"), {"badge"}) with input as as_t1 with data.tenants as tenants
	fixtures.same(lib.secrets_in("badge T1-123456"), set()) with input as {"subject": {"tenant": "t2"}}
		with data.tenants as tenants
	fixtures.same(lib.secrets_in("AKIAIOSFODNN7EXAMPLE"), {"aws_access_key_id"}) with input as as_t1
		with data.tenants as tenants

	# The shipped example: acme's badge ids (policies/tenants/acme/data.json).
	fixtures.same(lib.secrets_in("my badge is ACME-004211"), {"acme_badge_id"}) with input as {"subject": {"tenant": "acme"}}
}
