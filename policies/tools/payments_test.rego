package tools.payments_test

import rego.v1

import data.tools.payments

admin := {"id": "u-2", "tenant": "acme", "roles": ["admin"]}

payment(amount) := {"amount": amount, "currency": "EUR", "recipient": "acct_42"}

call_input(subject, args) := {
	"subject": subject,
	"tool": {"name": "processPayment", "version": "1", "registered": true, "mutating": true, "risk": "high"},
	"call": {"id": "call_7", "input": args},
	"context": {},
	"history": {},
	"approval": null,
	"request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
}

approved(doc) := object.union(doc, {"approval": {
	"approval_id": "ap-1",
	"approved": true,
	"approver": {"id": "u-9", "roles": ["approver"]},
}})

test_small_payment_allowed if {
	payments.allow with input as call_input(admin, payment(25.5))
	count(payments.approval_required) == 0 with input as call_input(admin, payment(25.5))
}

test_payment_at_threshold_allowed if {
	payments.allow with input as call_input(admin, payment(1000))
}

test_payment_above_threshold_needs_approval if {
	payments.approval_required == {"payment over 1000 needs approval"} with input as call_input(admin, payment(1000.01))
	not payments.allow with input as call_input(admin, payment(1000.01))
}

test_approver_role_is_approver if {
	payments.approver_roles == ["approver"]
	d := data.toolgate.decision with input as call_input(admin, payment(5000))
	d.approval.approver_roles == ["approver"]
}

test_large_payment_allowed_after_approval if {
	d := data.toolgate.decision with input as approved(call_input(admin, payment(5000)))
	d.decision == "allow"
}

test_zero_and_negative_amounts_denied if {
	every amount in [0, -1, -2000] {
		payments.deny == {"payment amount must be a positive number"} with input as call_input(admin, payment(amount))
	}
}

test_non_number_amount_denied if {
	payments.deny == {"payment amount must be a positive number"} with input as call_input(admin, payment("1500"))
	not payments.allow with input as call_input(admin, payment("1500"))
}

test_negative_amount_denied_even_with_approval if {
	d := data.toolgate.decision with input as approved(call_input(admin, payment(-5)))
	d.decision == "deny"
}

test_threshold_from_data if {
	payments.approval_required == {"payment over 100 needs approval"} with input as call_input(admin, payment(150))
		with data.thresholds.payment_approval_amount as 100
}

test_tenant_override_of_threshold if {
	payments.approval_required == {"payment over 50 needs approval"} with input as call_input(admin, payment(60))
		with data.tenants as {"acme": {"payment_approval_amount": 50}}
	payments.allow with input as call_input({"id": "u-5", "tenant": "other", "roles": ["admin"]}, payment(60))
		with data.tenants as {"acme": {"payment_approval_amount": 50}}
}

test_only_admin_pays if {
	every role in ["support_agent", "auditor", "approver", "account_holder", "developer"] {
		subject := {"id": "u-1", "tenant": "acme", "roles": [role]}
		d := data.toolgate.decision with input as approved(call_input(subject, payment(10)))
		d.decision == "deny"
	}
}

test_other_tools_untouched if {
	doc := object.union(call_input(admin, payment(5000)), {"tool": {"name": "createTicket"}})
	not payments.allow with input as doc
	count(payments.approval_required) == 0 with input as doc
	count(payments.deny) == 0 with input as doc
}

# --- the daily budget (docs/session.md) ------------------------------------------------------

test_an_allowed_payment_reserves_its_amount_under_the_daily_budget if {
	d := data.toolgate.decision with input as call_input(admin, payment(250))
	d.decision == "allow"
	d.limits == [{"id": "payments.daily_budget", "scope": "subject", "window_s": 86400, "max": 10000, "amount_field": "/amount"}]
}

test_a_tenant_sets_its_own_budget if {
	d := data.toolgate.decision with input as call_input(admin, payment(250))
		with data.tenants.acme.daily_payment_budget as 500
	d.limits[0].max == 500
}

test_a_payment_that_needs_approval_reserves_nothing_yet if {
	d := data.toolgate.decision with input as call_input(admin, payment(5000))
	d.decision == "user-approval"
	not d.limits
}
