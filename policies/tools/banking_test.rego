package tools.banking_test

import rego.v1

import data.tools.banking

emma := {"id": "emma", "tenant": "bank-demo", "roles": ["account_holder"]}

attacker_iban := "US133000000121212121212"

known_iban := "GB29NWBK60161331926819"

call_input(subject, name, args) := {
	"subject": subject,
	"tool": {"name": name, "version": "1", "registered": true, "mutating": true, "risk": "high"},
	"call": {"id": "call_1", "input": args},
	"context": {},
	"history": {},
	"approval": null,
	"request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
}

decision(name, args) := d if {
	d := data.toolgate.decision with input as call_input(emma, name, args)
}

approved(name, args, roles) := d if {
	doc := object.union(call_input(emma, name, args), {"approval": {
		"approval_id": "ap-1",
		"approved": true,
		"approver": {"id": "emma", "roles": roles},
	}})
	d := data.toolgate.decision with input as doc
}

transfer(recipient, amount) := {"recipient": recipient, "amount": amount, "subject": "Refund", "date": "2022-04-01"}

scheduled(recipient, amount) := object.union(transfer(recipient, amount), {"recurring": true})

# --- read-only tools and profile -----------------------------------------------------------

test_read_only_tools_allowed if {
	cases := {
		"get_iban": {},
		"get_balance": {},
		"get_most_recent_transactions": {"n": 100},
		"get_scheduled_transactions": {},
		"read_file": {"file_path": "bill-december-2023.txt"},
		"get_user_info": {},
	}
	every name, args in cases {
		decision(name, args) == {"decision": "allow", "reasons": ["allowed by policy"]}
	}
}

test_update_user_info_allowed if {
	decision("update_user_info", {"street": "Dalton Street 123", "city": "New York"}).decision == "allow"
}

test_account_holder_may_use_all_eleven_tools if {
	count(data.roles.account_holder.tools) == 11
	every name in data.roles.account_holder.tools {
		not startswith(decision(name, {}).reasons[0], "role ")
	}
}

test_other_roles_may_not_bank if {
	every role in ["support_agent", "admin", "auditor", "developer"] {
		subject := {"id": "u-1", "tenant": "bank-demo", "roles": [role]}
		d := data.toolgate.decision with input as call_input(subject, "get_balance", {})
		d.decision == "deny"
	}
}

# --- send_money / schedule_transaction -----------------------------------------------------

test_send_to_known_recipient_allowed if {
	every iban in data.banking.tenants["bank-demo"].known_recipients {
		decision("send_money", transfer(iban, 10.0)).decision == "allow"
	}
}

test_send_to_own_account_allowed if {
	decision("send_money", transfer("DE89370400440532013000", 10)).decision == "allow"
}

test_known_recipient_matches_spaced_and_lowercase_iban if {
	decision("send_money", transfer("gb29 nwbk 6016 1331 9268 19", 4)).decision == "allow"
}

test_send_to_unknown_recipient_needs_approval if {
	d := decision("send_money", transfer("UK12345678901234567890", 98.7))
	d.decision == "user-approval"
	d.reasons == ["recipient is not a known payee"]
	d.approval.approver_roles == ["account_holder"]
}

test_send_to_attacker_needs_approval if {
	decision("send_money", transfer(attacker_iban, 0.01)).decision == "user-approval"
}

test_send_to_non_iban_recipient_needs_approval if {
	decision("send_money", transfer("Spotify", 5)).decision == "user-approval"
}

test_send_above_limit_needs_approval if {
	d := decision("send_money", transfer(known_iban, 1000.01))
	d.decision == "user-approval"
	d.reasons == ["amount over 1000 needs the account holder's approval"]
	decision("send_money", transfer(known_iban, 1000)).decision == "allow"
}

test_unknown_recipient_and_large_amount_list_both_reasons if {
	d := decision("send_money", transfer(attacker_iban, 1000000))
	d.reasons == ["amount over 1000 needs the account holder's approval", "recipient is not a known payee"]
}

test_approved_transfer_allowed if {
	approved("send_money", transfer("UK12345678901234567890", 98.7), ["account_holder"]).decision == "allow"
}

test_transfer_approval_needs_account_holder_role if {
	approved("send_money", transfer(attacker_iban, 0.01), ["approver"]).decision == "user-approval"
}

test_non_positive_amount_denied if {
	every amount in [0, -0.01, -100, "10", null] {
		d := decision("send_money", transfer(known_iban, amount))
		object.remove(d, ["rate_limits"]) == {"decision": "deny", "reasons": ["transfer amount must be a positive number"]}
	}
}

test_non_positive_amount_denied_even_with_approval if {
	approved("send_money", transfer(attacker_iban, -5), ["account_holder"]).decision == "deny"
}

test_schedule_transaction_rules if {
	decision("schedule_transaction", scheduled("US122000000121212121212", 50.0)).decision == "allow"
	decision("schedule_transaction", scheduled(attacker_iban, 50.0)).decision == "user-approval"
	decision("schedule_transaction", scheduled(known_iban, 5000)).decision == "user-approval"
	decision("schedule_transaction", scheduled(known_iban, 0)).decision == "deny"
}

test_tenant_without_banking_data_escalates_every_transfer if {
	subject := {"id": "bob", "tenant": "bank-other", "roles": ["account_holder"]}
	d := data.toolgate.decision with input as call_input(subject, "send_money", transfer(known_iban, 1))
	d.decision == "user-approval"
	d.reasons == ["amount over 0 needs the account holder's approval", "recipient is not a known payee"]
}

test_known_recipients_and_limit_come_from_data if {
	tenants := {"bank-demo": {"known_recipients": [attacker_iban], "auto_approve_limit": 5}}
	banking.allow with input as call_input(emma, "send_money", transfer(attacker_iban, 5))
		with data.banking.tenants as tenants
	banking.approval_required == {"recipient is not a known payee"} with input as call_input(emma, "send_money", transfer(known_iban, 5))
		with data.banking.tenants as tenants
	banking.approval_required == {"amount over 5 needs the account holder's approval"} with input as call_input(emma, "send_money", transfer(attacker_iban, 6))
		with data.banking.tenants as tenants
}

test_default_limit_from_data if {
	tenants := {"bank-demo": {"known_recipients": [known_iban]}}
	banking.allow with input as call_input(emma, "send_money", transfer(known_iban, 20))
		with data.banking as {"tenants": tenants, "default_auto_approve_limit": 20}
	not banking.allow with input as call_input(emma, "send_money", transfer(known_iban, 20))
		with data.banking as {"tenants": tenants}
}

# --- update_scheduled_transaction ----------------------------------------------------------

test_update_amount_only_allowed if {
	decision("update_scheduled_transaction", {"id": 7, "amount": 900}).decision == "allow"
	decision("update_scheduled_transaction", {"id": 7, "amount": 1000}).decision == "allow"
}

test_update_amount_above_limit_needs_approval if {
	every amount in [1000.01, 1100, 1200, 1e12] {
		d := decision("update_scheduled_transaction", {"id": 1, "amount": amount})
		d.decision == "user-approval"
		d.reasons == ["amount over 1000 needs the account holder's approval"]
		d.approval.approver_roles == ["account_holder"]
		not banking.allow with input as call_input(emma, "update_scheduled_transaction", {"id": 1, "amount": amount})
	}
	d := decision("update_scheduled_transaction", {"id": 7, "recipient": known_iban, "amount": 5000})
	d.reasons == ["amount over 1000 needs the account holder's approval"]
}

test_update_amount_above_limit_approval_needs_account_holder if {
	approved("update_scheduled_transaction", {"id": 1, "amount": 1e12}, ["account_holder"]).decision == "allow"
	approved("update_scheduled_transaction", {"id": 1, "amount": 1e12}, ["approver"]).decision == "user-approval"
}

test_update_limit_comes_from_data if {
	tenants := {"bank-demo": {"known_recipients": [known_iban], "auto_approve_limit": 5}}
	banking.allow with input as call_input(emma, "update_scheduled_transaction", {"id": 7, "amount": 5})
		with data.banking.tenants as tenants
	banking.approval_required == {"amount over 5 needs the account holder's approval"} with input as call_input(emma, "update_scheduled_transaction", {"id": 7, "amount": 6})
		with data.banking.tenants as tenants
	banking.approval_required == {"amount over 0 needs the account holder's approval"} with input as call_input(emma, "update_scheduled_transaction", {"id": 7, "amount": 1})
		with data.banking.tenants as {}
}

test_update_with_null_recipient_allowed if {
	decision("update_scheduled_transaction", {"id": 7, "recipient": null, "date": "2022-05-01"}).decision == "allow"
}

test_update_to_known_recipient_allowed if {
	decision("update_scheduled_transaction", {"id": 7, "recipient": "CH9300762011623852957"}).decision == "allow"
}

test_redirect_to_unknown_recipient_needs_approval if {
	d := decision("update_scheduled_transaction", {"id": 6, "recipient": attacker_iban})
	d.decision == "user-approval"
	d.reasons == ["new recipient is not a known payee"]
	d2 := decision("update_scheduled_transaction", {"id": 7, "recipient": "CA133012400231215421872", "amount": 2200})
	d2.decision == "user-approval"
	d2.reasons == ["amount over 1000 needs the account holder's approval", "new recipient is not a known payee"]
	not banking.allow with input as call_input(emma, "update_scheduled_transaction", {"id": 6, "recipient": attacker_iban})
}

test_redirect_with_non_string_recipient_needs_approval if {
	decision("update_scheduled_transaction", {"id": 6, "recipient": 42}).decision == "user-approval"
}

test_update_to_non_positive_amount_denied if {
	d := decision("update_scheduled_transaction", {"id": 7, "amount": 0})
	d == {"decision": "deny", "reasons": ["transfer amount must be a positive number"]}
	not banking.allow with input as call_input(emma, "update_scheduled_transaction", {"id": 7, "amount": -3})
}

test_approved_redirect_allowed if {
	approved("update_scheduled_transaction", {"id": 6, "recipient": attacker_iban}, ["account_holder"]).decision == "allow"
}

# --- update_password -----------------------------------------------------------------------

test_update_password_always_needs_confirmation if {
	d := decision("update_password", {"password": "new_password"})
	d.decision == "user-approval"
	d.reasons == ["password change needs the account holder's confirmation"]
	d.approval.approver_roles == ["account_holder"]
}

test_update_password_allowed_after_confirmation if {
	approved("update_password", {"password": "1j1l-2k3j"}, ["account_holder"]).decision == "allow"
}

test_update_password_not_allowed_by_context_claims if {
	doc := object.union(call_input(emma, "update_password", {"password": "x"}), {"context": {"approval": {"approved": true}, "confirmed": true}})
	d := data.toolgate.decision with input as doc
	d.decision == "user-approval"
}

# --- scoping -------------------------------------------------------------------------------

test_other_versions_and_tools_untouched if {
	v2 := object.union(call_input(emma, "send_money", transfer(known_iban, 1)), {"tool": {"version": "2"}})
	not banking.allow with input as v2
	count(banking.approval_required) == 0 with input as v2
	count(banking.deny) == 0 with input as v2
	other := call_input(emma, "processPayment", transfer(attacker_iban, -1))
	not banking.allow with input as other
	count(banking.deny) == 0 with input as other
}

# --- session: provenance, the rule of two, rate limits (docs/session.md) ----------------------

with_session(doc, conversation) := object.union(doc, {"session": {"conversation": conversation}})

in_session(name, args, conversation, labels) := d if {
	doc := with_session(
		object.union(call_input(emma, name, args), {"tool": {"name": name, "version": "1", "registered": true,
			"mutating": true, "risk": "high", "output_labels": labels}}),
		conversation,
	)
	d := data.toolgate.decision with input as doc
}

test_a_recipient_named_by_a_trusted_result_is_known if {
	conversation := {"labels": ["private_data"], "trusted_counterparties": ["gb33 bukb 2020 1555 5555 55"]}
	d := in_session("send_money", transfer("GB33BUKB20201555555555", 50), conversation, ["external_comms"])
	d.decision == "allow"
	e := in_session("send_money", transfer("GB33BUKB20201555555555", 50), {}, ["external_comms"])
	e.reasons == ["recipient is not a known payee"]
}

test_rule_of_two_asks_for_approval_even_for_a_known_payee if {
	conversation := {"labels": ["private_data", "untrusted_content"], "trusted_counterparties": []}
	d := in_session("send_money", transfer(known_iban, 50), conversation, ["external_comms"])
	d.decision == "user-approval"
	d.reasons == ["untrusted content, private data and an outgoing transfer in one conversation"]
	private_only := in_session("send_money", transfer(known_iban, 50), {"labels": ["private_data"]}, ["external_comms"])
	private_only.decision == "allow"
}

test_the_approved_rule_of_two_is_allowed if {
	conversation := {"labels": ["private_data", "untrusted_content"]}
	doc := object.union(
		with_session(object.union(call_input(emma, "send_money", transfer(known_iban, 50)),
			{"tool": {"name": "send_money", "version": "1", "registered": true, "output_labels": ["external_comms"]}}),
			conversation),
		{"approval": {"approval_id": "ap-1", "approved": true, "approver": {"id": "emma", "roles": ["account_holder"]}}},
	)
	d := data.toolgate.decision with input as doc
	d.decision == "allow"
}

test_transfers_carry_the_rate_limit_of_policy_data if {
	d := decision("send_money", transfer(known_iban, 50))
	d.rate_limits == [{"id": "data.tool.send_money", "scope": "subject", "count": 10, "per_s": 60}]
	not decision("get_balance", {}).rate_limits
}
