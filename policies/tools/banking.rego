# Banking: the 11 AgentDojo banking tools (contracts/agentdojo-banking/).
#
# Per-tenant data in data.banking.tenants[<tenant>]: own_iban, known_recipients (IBANs the
# account has paid before) and auto_approve_limit (largest amount sent without approval;
# data.banking.default_auto_approve_limit for tenants without one).
#
# - Read-only tools and update_user_info: allow.
# - send_money / schedule_transaction: allow to a known recipient up to the limit; an unknown
#   recipient or a larger amount needs the account holder's approval (benign tasks pay IBANs
#   read from a bill, so unknown is not deny); an amount <= 0 is denied.
# - update_scheduled_transaction: a new recipient that is not known or a new amount above the
#   limit needs approval (as for send_money: raising a standing order moves money too); an
#   amount <= 0 is denied; anything else is allowed.
# - update_password: always needs the account holder's confirmation.
# - Provenance (docs/session.md): a recipient that a trusted tool result named in this
#   conversation (get_scheduled_transactions) counts as known; a transfer in a conversation
#   that holds untrusted content and private data needs approval (the rule of two).
package tools.banking

import rego.v1

import data.toolgate.lib

approver_roles := ["account_holder"]

read_only_tools := {
	"get_iban",
	"get_balance",
	"get_most_recent_transactions",
	"get_scheduled_transactions",
	"read_file",
	"get_user_info",
}

transfer_tools := {"send_money", "schedule_transaction"}

call_of(name) if {
	input.tool.registered == true
	input.tool.name == name
	input.tool.version == "1"
}

args := input.call.input

tenant := data.banking.tenants[input.subject.tenant] if {
	is_object(data.banking.tenants[input.subject.tenant])
} else := {}

auto_approve_limit := tenant.auto_approve_limit if {
	is_number(tenant.auto_approve_limit)
} else := data.banking.default_auto_approve_limit if {
	is_number(data.banking.default_auto_approve_limit)
} else := 0

normalize_iban(iban) := upper(replace(iban, " ", ""))

known_ibans contains normalize_iban(iban) if {
	some iban in object.get(tenant, "known_recipients", [])
	is_string(iban)
}

known_ibans contains normalize_iban(tenant.own_iban) if is_string(tenant.own_iban)

known_recipient(iban) if {
	is_string(iban)
	normalize_iban(iban) in known_ibans
}

known_recipient(iban) if {
	is_string(iban)
	some named in input.session.conversation.trusted_counterparties
	is_string(named)
	normalize_iban(named) == normalize_iban(iban)
}

positive(amount) if {
	is_number(amount)
	amount > 0
}

over_limit(amount) if {
	positive(amount)
	amount > auto_approve_limit
}

over_limit_reason := sprintf("amount over %v needs the account holder's approval", [auto_approve_limit])

transfer_call if {
	some name in transfer_tools
	call_of(name)
}

# --- read-only and profile -----------------------------------------------------------------

allow if {
	some name in read_only_tools
	call_of(name)
}

allow if call_of("update_user_info")

# --- transfers -----------------------------------------------------------------------------

deny contains "transfer amount must be a positive number" if {
	transfer_call
	not positive(args.amount)
}

approval_required contains "recipient is not a known payee" if {
	transfer_call
	not known_recipient(args.recipient)
}

approval_required contains over_limit_reason if {
	transfer_call
	over_limit(args.amount)
}

allow if {
	transfer_call
	known_recipient(args.recipient)
	positive(args.amount)
	args.amount <= auto_approve_limit
}

# --- scheduled transaction updates ---------------------------------------------------------

new_recipient_unknown if {
	args.recipient != null
	not known_recipient(args.recipient)
}

new_amount_invalid if {
	args.amount != null
	not positive(args.amount)
}

new_amount_over_limit if over_limit(args.amount)

deny contains "transfer amount must be a positive number" if {
	call_of("update_scheduled_transaction")
	new_amount_invalid
}

approval_required contains "new recipient is not a known payee" if {
	call_of("update_scheduled_transaction")
	new_recipient_unknown
}

approval_required contains over_limit_reason if {
	call_of("update_scheduled_transaction")
	new_amount_over_limit
}

allow if {
	call_of("update_scheduled_transaction")
	not new_recipient_unknown
	not new_amount_invalid
	not new_amount_over_limit
}

# --- credentials ---------------------------------------------------------------------------

approval_required contains "password change needs the account holder's confirmation" if {
	call_of("update_password")
}

# --- the rule of two (docs/session.md) -------------------------------------------------------

approval_required contains "untrusted content, private data and an outgoing transfer in one conversation" if {
	some name in {"send_money", "schedule_transaction", "update_scheduled_transaction"}
	call_of(name)
	lib.rule_of_two
}
