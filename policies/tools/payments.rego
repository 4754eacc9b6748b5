# Payments: processPayment v1 (amount number, currency ISO 4217, recipient string).
#
# Only roles granted processPayment in data.roles may pay (admin). A payment above the
# approval threshold (data.thresholds.payment_approval_amount, overridable per tenant with
# data.tenants[<tenant>].payment_approval_amount) needs approval by role `approver`. Each
# subject pays at most data.thresholds.daily_payment_budget (overridable per tenant with
# data.tenants[<tenant>].daily_payment_budget) in 24 hours: a budget the gateway reserves
# atomically when a payment is allowed and gives back when it fails (docs/session.md).
package tools.payments

import rego.v1

import data.toolgate.lib

approver_roles := ["approver"]

call_of(name) if {
	input.tool.registered == true
	input.tool.name == name
	input.tool.version == "1"
}

approval_threshold := data.tenants[input.subject.tenant].payment_approval_amount if {
	is_number(data.tenants[input.subject.tenant].payment_approval_amount)
} else := data.thresholds.payment_approval_amount

amount := input.call.input.amount

positive_amount if {
	is_number(amount)
	amount > 0
}

deny contains "payment amount must be a positive number" if {
	call_of("processPayment")
	not positive_amount
}

approval_required contains sprintf("payment over %v needs approval", [approval_threshold]) if {
	call_of("processPayment")
	positive_amount
	amount > approval_threshold
}

allow if {
	call_of("processPayment")
	positive_amount
	amount <= approval_threshold
}

daily_budget := data.tenants[input.subject.tenant].daily_payment_budget if {
	is_number(data.tenants[input.subject.tenant].daily_payment_budget)
} else := data.thresholds.daily_payment_budget

limits contains lib.budget_limit("payments.daily_budget", "subject", 86400, daily_budget, "/amount") if {
	call_of("processPayment")
}
