package tools.payments_test

import data.toolgate.fixtures_test as fixtures

payment(amount) := fixtures.call(fixtures.admin, "processPayment", {"amount": amount, "currency": "EUR", "recipient": "acct_42"})

test_small_payment_allowed if {
	fixtures.expect(payment(25.5), {
		"decision": "allow",
		"reasons": ["allowed by policy"],
		"rules": {"payments.amount_within_threshold"},
	})
}

test_payment_at_threshold_allowed if {
	fixtures.expect(payment(1000), {"decision": "allow"})
}

test_payment_above_threshold_needs_approval if {
	fixtures.expect(payment(1000.01), {
		"decision": "user-approval",
		"reasons": ["payment over 1000 needs approval"],
		"rules": {"payments.amount_over_threshold"},
	})
}

test_threshold_compares_decimals_exactly if {
	fixtures.expect(payment(999.99), {"decision": "allow"})
	fixtures.expect(payment(1000.001), {"decision": "user-approval"})
}

test_approver_role_is_approver if {
	d := fixtures.decide(payment(5000))
	fixtures.same(d.approval.approver_roles, ["approver"])
}

test_large_payment_allowed_after_approval if {
	fixtures.expect(fixtures.approved(payment(5000), "u-9", ["approver"]), {"decision": "allow"})
}

test_zero_and_negative_amounts_denied if {
	every amount in [0, -1, -2000] {
		fixtures.expect(payment(amount), {
			"decision": "deny",
			"reasons": ["payment amount must be a positive number"],
			"rules": {"payments.amount_not_positive"},
		})
	}
}

test_non_number_amount_denied if {
	every amount in ["1500", null, true, [1]] {
		fixtures.expect(payment(amount), {"decision": "deny", "rules": {"payments.amount_not_positive"}})
	}
}

test_missing_amount_denied if {
	fixtures.expect(fixtures.call(fixtures.admin, "processPayment", {"currency": "EUR"}), {"decision": "deny"})
}

test_negative_amount_denied_even_with_approval if {
	fixtures.expect(fixtures.approved(payment(-5), "u-9", ["approver"]), {"decision": "deny"})
}

test_default_threshold_from_the_family if {
	fixtures.expect(payment(150), {"reasons": ["payment over 100 needs approval"]})
		with data.tools.payments.default_approval_amount as 100
}

test_tenant_limit_overrides_the_threshold if {
	limits := {"acme": {"limits": {"payment_approval_amount": 50}}}
	fixtures.expect(payment(60), {"reasons": ["payment over 50 needs approval"]}) with data.tenants as limits
	other := fixtures.call(fixtures.subject("u-5", "other", ["admin"]), "processPayment", {"amount": 60, "currency": "EUR", "recipient": "a"})
	fixtures.expect(other, {"decision": "allow"}) with data.tenants as limits
}

test_tenant_limit_that_is_not_a_number_is_ignored if {
	fixtures.expect(payment(60), {"decision": "allow"}) with data.tenants as {"acme": {"limits": {"payment_approval_amount": "50"}}}
}

test_only_admin_pays if {
	every role in ["support_agent", "auditor", "approver", "account_holder", "developer"] {
		doc := fixtures.approved(fixtures.call(fixtures.subject("u-1", "acme", [role]), "processPayment", {"amount": 10}), "u-9", ["approver"])
		fixtures.expect(doc, {"decision": "deny", "denials": {"toolgate.role_not_granted"}})
	}
}

test_other_versions_are_not_governed if {
	fixtures.expect(fixtures.with_tool(payment(10), {"version": "2"}), {"rules": {"toolgate.no_family"}})
}

# --- the daily budget (docs/session.md) ------------------------------------------------------

test_an_allowed_payment_reserves_its_amount_under_the_daily_budget if {
	d := fixtures.decide(payment(250))
	fixtures.same(d.decision, "allow")
	fixtures.same(d.limits, [{"id": "payments.daily_budget", "scope": "subject", "window_s": 86400, "max": 50000, "amount_field": "/amount"}])
}

test_a_tenant_sets_its_own_daily_budget if {
	d := fixtures.decide(payment(250)) with data.tenants.acme.limits.daily_payment_budget as 500
	fixtures.same(d.limits[0].max, 500)
}

test_a_payment_that_needs_approval_reserves_nothing_until_approved if {
	fixtures.expect(payment(5000), {"decision": "user-approval", "limits": set()})
	fixtures.expect(fixtures.approved(payment(5000), "u-9", ["approver"]), {"decision": "allow", "limits": {"payments.daily_budget"}})
}

test_a_payment_over_the_quorum_amount_needs_two_approvers if {
	d := fixtures.decide(payment(20000))
	d.decision == "user-approval"
	d.approval.quorum == 2
	"payment over 10000 needs two approvers" in d.reasons
	not d.approval.allow_self_approval
	not d.approval.requester_only
}

test_a_payment_below_the_quorum_amount_has_no_quorum if {
	d := fixtures.decide(payment(5000))
	d.decision == "user-approval"
	not d.approval.quorum
}
