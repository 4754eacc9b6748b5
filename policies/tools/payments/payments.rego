# METADATA
# title: Payments
# description: |
#   processPayment v1 (amount, currency ISO 4217, recipient). Only roles granted
#   processPayment in data.roles pay (admin). A payment above the approval amount
#   (default_approval_amount, per tenant limits.payment_approval_amount) needs approval; one
#   above the quorum amount (default_quorum_amount, limits.payment_quorum_amount) needs two
#   distinct approvers (approval_rules.quorum). A subject pays at most
#   limits.daily_payment_budget (default 50000) a day: a budget the gateway reserves atomically
#   when it allows a payment and gives back when the payment fails (docs/session.md).
# custom:
#   governs:
#     processPayment:
#       versions: ["1"]
#   approver_roles: [approver]
package tools.payments

import data.toolgate.lib

governs["processPayment"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand"): none.
session_reads := set()

approver_roles := ["approver"]

# Payments above this amount need approval, unless the tenant sets limits.payment_approval_amount.
default_approval_amount := 1000

approval_amount := lib.tenant_limit("payment_approval_amount", default_approval_amount)

# Payments above this amount need two approvers (a quorum), unless the tenant sets
# limits.payment_quorum_amount.
default_quorum_amount := 10000

quorum_amount := lib.tenant_limit("payment_quorum_amount", default_quorum_amount)

amount := object.get(lib.args, "amount", null)

amount_positive if {
	is_number(amount)
	amount > 0
}

deny contains {"rule": "amount_not_positive", "message": "payment amount must be a positive number"} if {
	not amount_positive
}

approval_required contains {
	"rule": "amount_over_threshold",
	"message": sprintf("payment over %v needs approval", [approval_amount]),
} if {
	amount_positive
	amount > approval_amount
}

approval_required contains {
	"rule": "amount_over_quorum_threshold",
	"message": sprintf("payment over %v needs two approvers", [quorum_amount]),
} if {
	amount_positive
	amount > quorum_amount
}

approval_rules := {"quorum": 2} if {
	amount_positive
	amount > quorum_amount
}

allow contains {
	"rule": "amount_within_threshold",
	"message": sprintf("a payment of at most %v", [approval_amount]),
} if {
	amount_positive
	amount <= approval_amount
}

# The daily budget: at most this much a day per subject, unless the tenant sets
# limits.daily_payment_budget.
default_daily_budget := 50000

daily_budget := lib.tenant_limit("daily_payment_budget", default_daily_budget)

limits contains lib.budget_limit("payments.daily_budget", "subject", 86400, daily_budget, "/amount") if {
	amount_positive
}
