package tools.banking_test

import data.toolgate.fixtures_test as fixtures

attacker_iban := "US133000000121212121212"

known_iban := "GB29NWBK60161331926819"

own_iban := "DE89370400440532013000"

call(name, args) := fixtures.call(fixtures.emma, name, args)

# Confirmed by the account holder herself.
confirmed(doc) := fixtures.approved(doc, "emma", ["account_holder"])

transfer(recipient, amount) := {"recipient": recipient, "amount": amount, "subject": "Refund", "date": "2022-04-01"}

send(recipient, amount) := call("send_money", transfer(recipient, amount))

scheduled(recipient, amount) := call("schedule_transaction", object.union(transfer(recipient, amount), {"recurring": true}))

update(changes) := call("update_scheduled_transaction", object.union({"id": 7}, changes))

over_limit := "amount over 1000 needs the account holder's approval"

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
		fixtures.expect(call(name, args), {"decision": "allow", "reasons": ["allowed by policy"], "rules": {"banking.read_only"}})
	}
}

test_update_user_info_allowed if {
	fixtures.expect(call("update_user_info", {"street": "Dalton Street 123", "city": "New York"}), {
		"decision": "allow",
		"rules": {"banking.profile_update"},
	})
}

test_banking_governs_the_eleven_tools_granted_to_the_account_holder if {
	fixtures.same(object.keys(data.tools.banking.governs), {name | some name in data.roles.account_holder.tools})
	every name in data.roles.account_holder.tools {
		not "toolgate.role_not_granted" in fixtures.summary(call(name, {})).rules
		not "toolgate.no_family" in fixtures.summary(call(name, {})).rules
	}
}

test_other_roles_may_not_bank if {
	every role in ["support_agent", "admin", "auditor", "developer"] {
		doc := fixtures.call(fixtures.subject("u-1", "bank-demo", [role]), "get_balance", {})
		fixtures.expect(doc, {"decision": "deny", "denials": {"toolgate.role_not_granted"}})
	}
}

# --- send_money / schedule_transaction -----------------------------------------------------

test_send_to_known_recipient_allowed if {
	every iban in data.tenants["bank-demo"].counterparties.payees {
		fixtures.expect(send(iban, 10.0), {"decision": "allow", "rules": {"banking.known_recipient_within_limit"}})
	}
}

test_send_to_own_account_allowed if {
	fixtures.expect(send(own_iban, 10), {"decision": "allow"})
}

test_known_recipient_matches_spaced_and_lowercase_iban if {
	fixtures.expect(send("gb29 nwbk 6016 1331 9268 19", 4), {"decision": "allow"})
}

test_send_to_unknown_recipient_needs_approval if {
	d := fixtures.decide(send("UK12345678901234567890", 98.7))
	fixtures.same([d.decision, d.reasons, d.approval.approver_roles], ["user-approval", ["recipient is not a known payee"], ["account_holder"]])
	fixtures.expect(send("Spotify", 5), {"rules": {"banking.recipient_unknown"}})
	fixtures.expect(send(attacker_iban, 0.01), {"decision": "user-approval"})
}

test_send_above_limit_needs_approval if {
	fixtures.expect(send(known_iban, 1000.01), {
		"decision": "user-approval",
		"reasons": [over_limit],
		"rules": {"banking.amount_over_limit"},
	})
	fixtures.expect(send(known_iban, 1000), {"decision": "allow"})
}

test_unknown_recipient_and_large_amount_list_both_reasons if {
	fixtures.expect(send(attacker_iban, 1000000), {
		"reasons": [over_limit, "recipient is not a known payee"],
		"rules": {"banking.amount_over_limit", "banking.recipient_unknown"},
	})
}

test_approved_transfer_allowed if {
	fixtures.expect(confirmed(send("UK12345678901234567890", 98.7)), {"decision": "allow"})
}

test_transfer_approval_needs_account_holder_role if {
	fixtures.expect(fixtures.approved(send(attacker_iban, 0.01), "mallory", ["approver"]), {"decision": "user-approval"})
}

test_non_positive_amount_denied if {
	every amount in [0, -0.01, -100, "10", null] {
		fixtures.expect(send(known_iban, amount), {
			"decision": "deny",
			"reasons": ["transfer amount must be a positive number"],
			"rules": {"banking.amount_not_positive"},
		})
	}
	fixtures.expect(confirmed(send(attacker_iban, -5)), {"decision": "deny"})
}

test_schedule_transaction_rules if {
	fixtures.expect(scheduled("US122000000121212121212", 50.0), {"decision": "allow"})
	fixtures.expect(scheduled(attacker_iban, 50.0), {"decision": "user-approval"})
	fixtures.expect(scheduled(known_iban, 5000), {"decision": "user-approval"})
	fixtures.expect(scheduled(known_iban, -1), {"decision": "deny"})
}

test_tenant_without_data_has_no_known_payees_and_no_limit if {
	other := fixtures.call(fixtures.subject("u-1", "bank-other", ["account_holder"]), "send_money", transfer(known_iban, 1))
	fixtures.expect(other, {
		"decision": "user-approval",
		"reasons": ["amount over 0 needs the account holder's approval", "recipient is not a known payee"],
	})
}

test_payees_and_limit_come_from_tenant_data if {
	tenants := {"bank-demo": {"counterparties": {"payees": [attacker_iban]}, "limits": {"transfer_auto_approve_amount": 10}}}
	fixtures.expect(send(attacker_iban, 10), {"decision": "allow"}) with data.tenants as tenants
	fixtures.expect(send(known_iban, 10), {"decision": "user-approval"}) with data.tenants as tenants
	fixtures.expect(send(attacker_iban, 11), {"reasons": ["amount over 10 needs the account holder's approval"]})
		with data.tenants as tenants
}

# --- lookalike recipients (issue: "ſ" for "S" passed as a known payee) -------------------------

# "SE35..." with the S written as U+017F (long s), which upper() turns into "S".
long_s_iban := "\u017fE3550000000054910000003"

# "CH93..." with a Cyrillic "С" (U+0421) and "Н" (U+041D).
cyrillic_iban := "\u0421\u041d9300762011623852957"

# "GB29..." with full-width digits "２９" (U+FF12, U+FF19).
full_width_iban := "GB\uff12\uff19NWBK60161331926819"

test_lookalike_of_a_known_payee_is_denied if {
	every iban in [long_s_iban, cyrillic_iban, full_width_iban] {
		fixtures.expect(send(iban, 10), {
			"decision": "deny",
			"reasons": ["recipient imitates a known payee with lookalike characters"],
			"rules": {"banking.recipient_lookalike", "banking.recipient_unknown"},
		})
		fixtures.expect(confirmed(send(iban, 10)), {"decision": "deny"})
		fixtures.expect(update({"recipient": iban}), {"decision": "deny", "rules": {"banking.new_recipient_lookalike", "banking.new_recipient_unknown"}})
	}
}

test_lookalike_of_the_own_account_is_denied if {
	# "DE89..." with a Cyrillic "Е" (U+0415).
	fixtures.expect(send("D\u041589370400440532013000", 10), {"rules": {"banking.recipient_lookalike", "banking.recipient_unknown"}})
}

test_non_ascii_recipient_that_imitates_nobody_needs_approval if {
	fixtures.expect(send("\u017fpotify", 5), {"decision": "user-approval", "rules": {"banking.recipient_unknown"}})
}

# --- scheduled transaction updates ---------------------------------------------------------

test_update_within_limit_allowed if {
	fixtures.expect(update({"amount": 900}), {"decision": "allow", "rules": {"banking.update_within_limits"}})
	fixtures.expect(update({"subject": "Rent", "date": "2022-05-01"}), {"decision": "allow"})
	fixtures.expect(update({"recipient": known_iban, "amount": 1000}), {"decision": "allow"})
	fixtures.expect(update({"recipient": null, "amount": null}), {"decision": "allow"})
}

test_update_over_limit_needs_approval if {
	fixtures.expect(update({"amount": 1200}), {
		"decision": "user-approval",
		"reasons": [over_limit],
		"rules": {"banking.new_amount_over_limit"},
	})
}

test_redirect_to_unknown_recipient_needs_approval if {
	fixtures.expect(update({"recipient": attacker_iban}), {
		"decision": "user-approval",
		"reasons": ["new recipient is not a known payee"],
		"rules": {"banking.new_recipient_unknown"},
	})
	fixtures.expect(update({"recipient": "CA133012400231215421872", "amount": 2200}), {
		"reasons": [over_limit, "new recipient is not a known payee"],
	})
	fixtures.expect(update({"recipient": 42}), {"decision": "user-approval"})
}

test_update_to_non_positive_amount_denied if {
	every amount in [0, -3, "5"] {
		fixtures.expect(update({"amount": amount}), {
			"decision": "deny",
			"reasons": ["transfer amount must be a positive number"],
			"rules": {"banking.new_amount_not_positive"},
		})
	}
}

test_approved_redirect_allowed if {
	fixtures.expect(confirmed(update({"recipient": attacker_iban})), {"decision": "allow"})
}

# --- update_password -----------------------------------------------------------------------

test_update_password_always_needs_confirmation if {
	fixtures.expect(call("update_password", {"password": "new_password"}), {
		"decision": "user-approval",
		"reasons": ["password change needs the account holder's confirmation"],
		"rules": {"banking.password_change"},
	})
	fixtures.expect(confirmed(call("update_password", {"password": "1j1l-2k3j"})), {"decision": "allow"})
}

test_update_password_not_allowed_by_context_claims if {
	doc := fixtures.with_context(call("update_password", {"password": "x"}), {"approval": {"approved": true}, "confirmed": true})
	fixtures.expect(doc, {"decision": "user-approval"})
}

# --- tenant data ---------------------------------------------------------------------------

test_counterparties_in_tenant_data_are_in_identifier_form if {
	fixtures.same(data.toolgate.lib.counterparty_problems, set())
}

# --- provenance, the rule of two, rate limits (docs/policy-authors.md "Provenance") -----------

external(doc) := fixtures.with_tool(doc, {"output_labels": ["external_comms"]})

new_iban := "FR7630006000011234567890189"

# input.provenance with the given argument entries (pointer -> entry) and untraced labels.
with_provenance(doc, arguments, untraced) := object.union(doc, {"provenance": {"arguments": arguments, "extracted": {}, "untraced_labels": untraced}})

source(tool, pointer, label) := {"tool": tool, "pointer": pointer, "label": label, "decision_id": "d-1"}

from_subject := source("get_most_recent_transactions", "/4/subject", "untrusted_content")

from_record := source("get_scheduled_transactions", "/1/recipient", "private_data")

from_file := source("read_file", "", "untrusted_content")

entry(sources, in_prompt, trusted) := {"kind": "iban", "sources": sources, "in_prompt": in_prompt, "in_trusted_output": trusted}

untouched := entry([], false, false)

test_a_recipient_from_a_trusted_record_or_typed_by_the_user_is_known if {
	fixtures.expect(with_provenance(external(send(new_iban, 50)), {"/recipient": entry([from_record], false, true)}, []), {"decision": "allow"})
	fixtures.expect(with_provenance(external(send(new_iban, 50)), {"/recipient": entry([], true, false)}, []), {"decision": "allow"})
	fixtures.expect(with_provenance(external(send(new_iban, 50)), {"/recipient": untouched}, []), {"decision": "user-approval", "reasons": ["recipient is not a known payee"]})
}

test_a_recipient_from_untrusted_content_needs_approval_even_when_a_record_names_it_too if {
	doc := with_provenance(external(send(new_iban, 50)), {"/recipient": entry([from_subject], false, false)}, [])
	fixtures.expect(doc, {"decision": "user-approval", "approvals": {"banking.recipient_unknown", "banking.value_from_untrusted_content"}})
	both := with_provenance(external(send(new_iban, 50)), {"/recipient": entry([from_subject, from_record], false, true)}, [])
	fixtures.expect(both, {"decision": "user-approval", "reasons": ["recipient is not a known payee", "the transfer's recipient comes from untrusted content"]})
	typed := with_provenance(external(send(new_iban, 50)), {"/recipient": entry([from_subject], true, false)}, [])
	fixtures.expect(typed, {"decision": "allow"})
}

test_a_known_payee_named_in_untrusted_text_is_still_known if {
	doc := with_provenance(external(send(known_iban, 4)), {"/recipient": entry([from_subject, from_record], false, true)}, [])
	fixtures.expect(doc, {"decision": "allow"})
}

test_an_amount_or_subject_from_untrusted_content_needs_approval_even_to_a_known_payee if {
	amount := with_provenance(external(send(known_iban, 98.7)), {"/amount": {"kind": "amount", "sources": [from_file], "in_prompt": false, "in_trusted_output": false}}, [])
	fixtures.expect(amount, {"decision": "user-approval", "reasons": ["the transfer's amount comes from untrusted content"]})
	subject := object.union(with_provenance(external(send(known_iban, 5)), {}, []), {"provenance": {"extracted": {"/subject": [{"kind": "url", "index": 0, "sources": [from_subject], "in_prompt": false, "in_trusted_output": false}]}}})
	fixtures.expect(subject, {"decision": "user-approval", "reasons": ["the transfer's subject comes from untrusted content"]})
	changed := with_provenance(external(update({"amount": 1200})), {"/amount": {"kind": "amount", "sources": [from_file], "in_prompt": false, "in_trusted_output": false}}, [])
	fixtures.expect(changed, {"decision": "user-approval", "approvals": {"banking.new_amount_over_limit", "banking.value_from_untrusted_content"}})
}

# The prompt's numbers are not told apart from its amounts ("2022" may be a year): an amount
# over the limit needs approval even when the prompt holds it.
test_an_amount_over_the_limit_needs_approval_even_when_the_prompt_holds_it if {
	typed := with_provenance(external(update({"recipient": new_iban, "amount": 2022})), {"/recipient": entry([], true, false), "/amount": {"kind": "amount", "sources": [], "in_prompt": true, "in_trusted_output": false}}, [])
	fixtures.expect(typed, {"decision": "user-approval", "approvals": {"banking.new_amount_over_limit"}})
	fixtures.expect(confirmed(typed), {"decision": "allow"})
	fixtures.expect(with_provenance(external(update({"amount": 2200})), {}, []), {"decision": "user-approval", "reasons": [over_limit]})
}

test_reading_the_history_no_longer_taints_every_later_payment if {
	# The history was read and reported (traced): private data and untrusted subjects in the
	# conversation, but none of the transfer's values comes from a subject.
	doc := fixtures.with_session(external(send(known_iban, 4)), {"labels": ["private_data", "untrusted_content"]})
	fixtures.expect(with_provenance(doc, {"/recipient": entry([from_record], true, true)}, []), {"decision": "allow"})
}

test_the_rule_of_two_holds_for_untraced_untrusted_content if {
	doc := fixtures.with_session(external(send(known_iban, 50)), {"labels": ["private_data", "untrusted_content"]})
	untraced := with_provenance(doc, {}, ["untrusted_content"])
	fixtures.expect(untraced, {"decision": "user-approval", "reasons": ["untrusted content, private data and an outgoing transfer in one conversation"]})
	fixtures.expect(confirmed(untraced), {"decision": "allow"})
	fixtures.expect(with_provenance(fixtures.with_session(external(send(known_iban, 50)), {"labels": ["untrusted_content"]}), {}, ["untrusted_content"]), {"decision": "allow"})
}

test_without_provenance_the_rule_of_two_is_conversation_level if {
	both := fixtures.with_session(external(send(known_iban, 50)), {"labels": ["private_data", "untrusted_content"]})
	fixtures.expect(both, {
		"decision": "user-approval",
		"reasons": ["untrusted content, private data and an outgoing transfer in one conversation"],
	})
	fixtures.expect(confirmed(both), {"decision": "allow"})
	fixtures.expect(fixtures.with_session(external(send(known_iban, 50)), {"labels": ["private_data"]}), {"decision": "allow"})
	fixtures.expect(fixtures.with_session(send(known_iban, 50), {"labels": ["private_data", "untrusted_content"]}), {"decision": "allow"})
}

# A word of the prompt that matches the new password ("my" in "pay my rent") does not mean the
# account holder chose it: she confirms every change.
test_a_password_in_the_prompt_still_needs_confirmation if {
	doc := call("update_password", {"password": "my"})
	typed := with_provenance(doc, {"/password": {"kind": "text", "sources": [from_subject], "in_prompt": true, "in_trusted_output": false}}, [])
	fixtures.expect(typed, {"decision": "user-approval", "rules": {"banking.password_change"}})
	fixtures.expect(confirmed(typed), {"decision": "allow"})
}

# A transaction's sender is set by whoever sent the money (get_most_recent_transactions marks
# it untrusted_content): an IBAN it names is not a known payee, whatever private field holds it too.
test_a_sender_named_by_an_incoming_transaction_is_not_a_known_payee if {
	from_sender := source("get_most_recent_transactions", "/0/sender", "untrusted_content")
	doc := with_provenance(external(send(attacker_iban, 900)), {"/recipient": entry([from_sender], false, false)}, [])
	fixtures.expect(doc, {"decision": "user-approval", "approvals": {"banking.recipient_unknown", "banking.value_from_untrusted_content"}})
}

# Past the events the gateway reads, an untraced read may hide: every transfer needs approval.
test_a_transfer_in_a_truncated_session_needs_approval if {
	doc := object.union(with_provenance(external(send(known_iban, 50)), {}, []), {"session": {"truncated": true}})
	fixtures.expect(doc, {"decision": "user-approval", "approvals": {"banking.session_truncated"}})
	fixtures.expect(with_provenance(external(send(known_iban, 50)), {}, []), {"decision": "allow"})
	fixtures.expect(confirmed(doc), {"decision": "allow"})
}

test_transfers_carry_the_rate_limit_of_policy_data if {
	fixtures.expect(send(known_iban, 50), {"rate_limits": {"data.tool.send_money"}})
	fixtures.expect(send(known_iban, -1), {"decision": "deny", "rate_limits": {"data.tool.send_money"}})
	fixtures.expect(call("get_balance", {}), {"rate_limits": set()})
}

test_the_account_holder_and_no_one_else_may_confirm_her_own_transfer if {
	d := fixtures.decide(send("UK12345678901234567890", 98.7))
	d.decision == "user-approval"
	d.approval.allow_self_approval == true
	d.approval.requester_only == true
}
