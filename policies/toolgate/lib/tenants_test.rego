package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

tenants := {"t1": {
	"counterparties": {"payees": ["GB29NWBK60161331926819", "SPOTIFY"], "contacts": ["Ann@Example.com"]},
	"allowed_domains": ["partner.org"],
	"limits": {"daily": 500, "bad": "500"},
	"features": {"on": true, "almost": "true"},
}}

as_t1 := fixtures.call(fixtures.subject("u", "t1", ["r"]), "t", {})

test_tenant_data if {
	fixtures.same(lib.tenant.limits.daily, 500) with input as as_t1 with data.tenants as tenants
	fixtures.same(lib.tenant, {}) with input as fixtures.call(fixtures.subject("u", "nobody", []), "t", {}) with data.tenants as tenants
	fixtures.same(lib.tenant, {}) with input as fixtures.call(fixtures.subject("u", 5, []), "t", {}) with data.tenants as tenants
	fixtures.same(lib.tenant, {}) with input as as_t1 with data.tenants as {"t1": "not an object"}
}

test_tenant_limits_and_features if {
	fixtures.same(lib.tenant_limit("daily", 0), 500) with input as as_t1 with data.tenants as tenants
	fixtures.same(lib.tenant_limit("bad", 0), 0) with input as as_t1 with data.tenants as tenants
	fixtures.same(lib.tenant_limit("missing", 7), 7) with input as as_t1 with data.tenants as tenants
	lib.tenant_feature("on") with input as as_t1 with data.tenants as tenants
	not lib.tenant_feature("almost") with input as as_t1 with data.tenants as tenants
	fixtures.same(lib.tenant_strings("allowed_domains"), {"partner.org"}) with input as as_t1 with data.tenants as tenants
	fixtures.same(lib.tenant_strings("limits"), set()) with input as as_t1 with data.tenants as tenants
	lib.tenant_allows_host("api.partner.org") with input as as_t1 with data.tenants as tenants
}

test_known_counterparties if {
	lib.known_counterparty("payees", "gb29 nwbk 6016 1331 9268 19") with input as as_t1 with data.tenants as tenants
	lib.known_counterparty("payees", "Spotify") with input as as_t1 with data.tenants as tenants
	not lib.known_counterparty("payees", "\u017fpotify") with input as as_t1 with data.tenants as tenants
	not lib.known_counterparty("contacts", "SPOTIFY") with input as as_t1 with data.tenants as tenants
	not lib.known_counterparty("payees", 42) with input as as_t1 with data.tenants as tenants
	lib.counterparty_lookalike("payees", "\u017fpotify") with input as as_t1 with data.tenants as tenants
	lib.counterparty_lookalike("payees", "GB29NWBK6016133192681\uff19") with input as as_t1 with data.tenants as tenants
	not lib.counterparty_lookalike("payees", "Spotify") with input as as_t1 with data.tenants as tenants
}

test_known_contacts if {
	lib.known_contact(" ann@example.com") with input as as_t1 with data.tenants as tenants
	lib.known_contact("bob@mail.partner.org") with input as as_t1 with data.tenants as tenants
	not lib.known_contact("bob@example.com") with input as as_t1 with data.tenants as tenants
	not lib.known_contact(7) with input as as_t1 with data.tenants as tenants
}

test_counterparty_problems if {
	fixtures.same(lib.counterparty_problems, {"t1: counterparties.payees: gb29 nwbk", "t1: counterparties.payees: 5"})
		with data.tenants as {"t1": {"counterparties": {"payees": ["gb29 nwbk", "GB29NWBK", 5], "contacts": ["a@b.c"]}}}
}
