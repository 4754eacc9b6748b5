# METADATA
# title: Banking
# description: |
#   The 11 AgentDojo banking tools (contracts/agentdojo-banking/). Tenant data
#   (data.tenants[<tenant>]): counterparties.payees (recipients the account has paid before),
#   counterparties.own_accounts and limits.transfer_auto_approve_amount (largest amount sent
#   without approval; default_auto_approve_amount for tenants without one).
#   - Read-only tools and update_user_info: allow.
#   - send_money / schedule_transaction: allow to a known recipient up to the limit; an
#     unknown recipient or a larger amount needs the account holder's approval (benign tasks
#     pay IBANs read from a bill, so unknown is not deny); an amount <= 0 is denied; a
#     recipient that imitates a known one with lookalike characters is denied. A recipient
#     named by a trusted tool result of the conversation counts as known; a transfer in a
#     conversation with untrusted content and private data needs approval (docs/session.md).
#   - update_scheduled_transaction: a new recipient that is not known or a new amount above
#     the limit needs approval; an amount <= 0 or a lookalike recipient is denied; anything
#     else is allowed.
#   - update_password: always needs the account holder's confirmation.
# custom:
#   governs:
#     get_iban:
#       versions: ["1"]
#     get_balance:
#       versions: ["1"]
#     get_most_recent_transactions:
#       versions: ["1"]
#     get_scheduled_transactions:
#       versions: ["1"]
#     read_file:
#       versions: ["1"]
#     get_user_info:
#       versions: ["1"]
#     update_user_info:
#       versions: ["1"]
#     send_money:
#       versions: ["1"]
#     schedule_transaction:
#       versions: ["1"]
#     update_scheduled_transaction:
#       versions: ["1"]
#     update_password:
#       versions: ["1"]
#   approver_roles: [account_holder]
package tools.banking

import data.toolgate.lib

read_only_tools := {
	"get_iban",
	"get_balance",
	"get_most_recent_transactions",
	"get_scheduled_transactions",
	"read_file",
	"get_user_info",
}

transfer_tools := {"send_money", "schedule_transaction"}

governs["get_iban"] := {"versions": ["1"]}

governs["get_balance"] := {"versions": ["1"]}

governs["get_most_recent_transactions"] := {"versions": ["1"]}

governs["get_scheduled_transactions"] := {"versions": ["1"]}

governs["read_file"] := {"versions": ["1"]}

governs["get_user_info"] := {"versions": ["1"]}

governs["update_user_info"] := {"versions": ["1"]}

governs["send_money"] := {"versions": ["1"]}

governs["schedule_transaction"] := {"versions": ["1"]}

governs["update_scheduled_transaction"] := {"versions": ["1"]}

governs["update_password"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand").
session_reads := {"session.conversation.labels", "session.conversation.trusted_counterparties"}

approver_roles := ["account_holder"]

# The account holder confirms her own transfers: a policy decision, so the gateway accepts her
# answer, but only with a step-up token (its own audience, fresh), never the token the agent
# called with.
approval_rules := {"allow_self_approval": true}

# Rule bodies test input.tool.name against constants first: OPA indexes such conditions, so a
# call evaluates the rules of its own tool only. Values read more than once are rules, which
# OPA evaluates once per query.

amount := object.get(lib.args, "amount", null)

recipient := object.get(lib.args, "recipient", null)

amount_positive if {
	is_number(amount)
	amount > 0
}

# Largest amount sent without approval for tenants without limits.transfer_auto_approve_amount.
default_auto_approve_amount := 0

auto_approve_limit := lib.tenant_limit("transfer_auto_approve_amount", default_auto_approve_amount)

over_limit if {
	amount_positive
	amount > auto_approve_limit
}

over_limit_reason := sprintf("amount over %v needs the account holder's approval", [auto_approve_limit])

# A recipient is known when it is one of the tenant's payees or own accounts, compared as an
# ASCII identifier (lib.identifier_key): "ſE35..." or a Cyrillic lookalike never matches.
recipient_key := lib.identifier_key(recipient)

recipient_known if recipient_key in lib.tenant.counterparties.payees

recipient_known if recipient_key in lib.tenant.counterparties.own_accounts

# Or a recipient that a trusted tool result named in this conversation (docs/session.md:
# e.g. get_scheduled_transactions; never one from untrusted content such as a transaction's
# subject or a file).
recipient_known if {
	some named in input.session.conversation.trusted_counterparties
	lib.identifier_key(named) == recipient_key
}

# A recipient that is not ASCII but reads as a known payee or own account.
recipient_lookalike if {
	not recipient_key
	some kind in ["payees", "own_accounts"]
	lib.counterparty_lookalike(kind, recipient)
}

# --- read-only and profile -----------------------------------------------------------------

allow contains {"rule": "read_only", "message": "a read-only banking tool"} if input.tool.name in read_only_tools

allow contains {"rule": "profile_update", "message": "a change of the account holder's profile"} if {
	input.tool.name == "update_user_info"
}

# --- send_money / schedule_transaction -----------------------------------------------------

deny contains {"rule": "amount_not_positive", "message": "transfer amount must be a positive number"} if {
	input.tool.name in transfer_tools
	not amount_positive
}

lookalike_message := "recipient imitates a known payee with lookalike characters"

deny contains {"rule": "recipient_lookalike", "message": lookalike_message} if {
	input.tool.name in transfer_tools
	recipient_lookalike
}

approval_required contains {"rule": "recipient_unknown", "message": "recipient is not a known payee"} if {
	input.tool.name in transfer_tools
	not recipient_known
}

approval_required contains {"rule": "amount_over_limit", "message": over_limit_reason} if {
	input.tool.name in transfer_tools
	over_limit
}

allow contains {"rule": "known_recipient_within_limit", "message": "a transfer to a known payee within the limit"} if {
	input.tool.name in transfer_tools
	recipient_known
	amount_positive
	not over_limit
}

# --- update_scheduled_transaction (recipient and amount optional: null when unchanged) -----

new_recipient_unknown if {
	recipient != null
	not recipient_known
}

new_amount_invalid if {
	amount != null
	not amount_positive
}

deny contains {"rule": "new_amount_not_positive", "message": "transfer amount must be a positive number"} if {
	input.tool.name == "update_scheduled_transaction"
	new_amount_invalid
}

deny contains {"rule": "new_recipient_lookalike", "message": lookalike_message} if {
	input.tool.name == "update_scheduled_transaction"
	recipient_lookalike
}

approval_required contains {"rule": "new_recipient_unknown", "message": "new recipient is not a known payee"} if {
	input.tool.name == "update_scheduled_transaction"
	new_recipient_unknown
}

approval_required contains {"rule": "new_amount_over_limit", "message": over_limit_reason} if {
	input.tool.name == "update_scheduled_transaction"
	over_limit
}

allow contains {"rule": "update_within_limits", "message": "an update to a known payee and within the limit"} if {
	input.tool.name == "update_scheduled_transaction"
	not new_recipient_unknown
	not new_amount_invalid
	not over_limit
}

# --- credentials ---------------------------------------------------------------------------

approval_required contains {
	"rule": "password_change",
	"message": "password change needs the account holder's confirmation",
} if {
	input.tool.name == "update_password"
}

# --- the rule of two (docs/session.md) -------------------------------------------------------

# Money going out of a conversation that holds untrusted content and private data: the
# untrusted text may be steering the agent, so the account holder confirms.
approval_required contains {
	"rule": "rule_of_two",
	"message": "untrusted content, private data and an outgoing transfer in one conversation",
} if {
	input.tool.name in {"send_money", "schedule_transaction", "update_scheduled_transaction"}
	lib.rule_of_two
}
