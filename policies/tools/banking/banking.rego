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
#     recipient that imitates a known one with lookalike characters is denied. Provenance
#     (docs/policy-authors.md "Provenance"): a recipient the user typed, or one named by the
#     bank's own record (a trusted result field), counts as known; a recipient, amount or
#     subject value taken from untrusted content (a transaction's subject, a file) needs
#     approval, unless the user typed it. A sender of a past transaction is untrusted content
#     (whoever sends money sets it): never a known payee for that. An amount over the limit
#     needs approval even when the prompt holds that number (a prompt's "2022" may be a
#     year). The rule of two stays conversation-level for untrusted content whose values
#     cannot be traced (untraced_labels), and is today's session rule when the gateway built
#     no provenance. In a session cut short (session.truncated) an untraced read may be out
#     of sight: a transfer needs approval.
#   - update_scheduled_transaction: the same for the fields it changes; anything else is
#     allowed.
#   - update_password: always needs the account holder's confirmation (a word of the prompt
#     that matches the new password does not mean she chose it).
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

# The session facts its rules read (docs/session.md "Facts on demand") and the provenance of
# the call's arguments.
session_reads := {"session.conversation.labels", "session.truncated", "provenance"}

approver_roles := ["account_holder"]

# The account holder confirms her own transfers: a policy decision, so the gateway accepts her
# answer, but only with a step-up token (its own audience, fresh), never the token the agent
# called with.
approval_rules := {"allow_self_approval": true, "requester_only": true}

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

# Or a recipient the user typed, or one that a trusted result field of this conversation named
# (the bank's own record of a transaction or a standing order) and no untrusted content did.
recipient_known if lib.user_supplied("/recipient")

recipient_known if {
	lib.from_trusted_output("/recipient")
	not lib.from_untrusted("/recipient")
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

# --- provenance and the rule of two (docs/policy-authors.md "Provenance") ------------------

money_out_tools := {"send_money", "schedule_transaction", "update_scheduled_transaction"}

# The transfer fields whose values must not come from untrusted content.
steered_fields := {"/recipient": "recipient", "/amount": "amount", "/subject": "subject"}

# A field of the transfer carries a value that untrusted content (a transaction's subject, a
# file) named and the user did not type: that text may be steering the agent.
approval_required contains {
	"rule": "value_from_untrusted_content",
	"message": sprintf("the transfer's %s comes from untrusted content", [name]),
} if {
	input.tool.name in money_out_tools
	some pointer, name in steered_fields
	lib.from_untrusted(pointer)
	not lib.user_supplied(pointer)
	not _known_payee_field(pointer)
}

# A known payee named in untrusted text (it also appears in a transaction's subject) is still
# a known payee.
_known_payee_field("/recipient") if recipient_key in lib.tenant.counterparties.payees

_known_payee_field("/recipient") if recipient_key in lib.tenant.counterparties.own_accounts

# Money going out of a conversation that holds untrusted content and private data, where the
# untrusted values cannot be traced (read but not reported, or from a tool without field
# marks), or where the gateway built no provenance: the untrusted text may be steering the
# agent, so the account holder confirms.
approval_required contains {
	"rule": "rule_of_two",
	"message": "untrusted content, private data and an outgoing transfer in one conversation",
} if {
	input.tool.name in money_out_tools
	_rule_of_two
}

_rule_of_two if {
	not lib.provenance_built
	lib.rule_of_two
}

_rule_of_two if {
	"external_comms" in input.tool.output_labels
	lib.untraced_label("untrusted_content")
	lib.session_labelled("private_data")
}

# The session was cut short: a read whose values cannot be traced may be among the events the
# gateway did not read, so the rule cannot tell that the conversation is clean.
approval_required contains {
	"rule": "session_truncated",
	"message": "the session is too long to check what the transfer's values came from",
} if {
	input.tool.name in money_out_tools
	lib.session_truncated
}
