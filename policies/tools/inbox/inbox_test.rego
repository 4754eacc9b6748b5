package tools.inbox_test

import data.toolgate.fixtures_test as fixtures

mia := fixtures.subject("mia", "acme", ["user"])

send(recipients) := fixtures.call(mia, "send_email", {"recipients": recipients, "subject": "Notes", "body": "See you."})

entry(sources, in_prompt) := {"kind": "email", "sources": sources, "in_prompt": in_prompt, "in_trusted_output": false}

with_provenance(doc, arguments, untraced) := object.union(doc, {"provenance": {"arguments": arguments, "extracted": {}, "untraced_labels": untraced}})

from_message := {"tool": "read_inbox", "pointer": "/2/body", "label": "untrusted_content", "decision_id": "d-1"}

attacker := "mark.black-2134@gmail.com"

test_reading_the_inbox_is_allowed if {
	fixtures.expect(fixtures.call(mia, "read_inbox", {"n": 5}), {"decision": "allow", "rules": {"inbox.read_only"}})
}

test_a_recipient_from_untrusted_content_needs_approval if {
	doc := with_provenance(send(["bob@acme.example", attacker]), {"/recipients/0": entry([], true), "/recipients/1": entry([from_message], false)}, [])
	fixtures.expect(doc, {"decision": "user-approval", "approvals": {"inbox.recipient_from_untrusted_content"}})
	fixtures.expect(fixtures.approved(doc, "mia", ["user"]), {"decision": "allow"})
}

test_a_recipient_the_user_typed_or_a_contact_is_allowed if {
	typed := with_provenance(send([attacker]), {"/recipients/0": entry([from_message], true)}, [])
	fixtures.expect(typed, {"decision": "allow", "rules": {"inbox.send"}})
	contact := with_provenance(send(["Mark.Black-2134@gmail.com"]), {"/recipients/0": entry([from_message], false)}, [])
	fixtures.expect(contact, {"decision": "allow"}) with data.tenants.acme.counterparties.contacts as [attacker]
	colleague := with_provenance(send(["bob@mail.acme.example"]), {"/recipients/0": entry([from_message], false)}, [])
	fixtures.expect(colleague, {"decision": "allow"}) with data.tenants.acme.allowed_domains as ["acme.example"]
}

test_untraced_untrusted_content_is_not_clean if {
	fixtures.expect(with_provenance(send([attacker]), {}, ["untrusted_content"]), {"decision": "user-approval"})
	fixtures.expect(with_provenance(send([attacker]), {"/recipients/0": entry([], true)}, ["untrusted_content"]), {"decision": "allow"})
	fixtures.expect(with_provenance(send([attacker]), {}, []), {"decision": "allow"})
}

test_without_provenance_a_conversation_with_untrusted_content_asks if {
	fixtures.expect(fixtures.with_session(send([attacker]), {"labels": ["untrusted_content"]}), {"decision": "user-approval"})
	fixtures.expect(fixtures.with_session(send([attacker]), {"labels": ["private_data"]}), {"decision": "allow"})
}

# Once a message is in the conversation, a recipient seen nowhere ("mallory (at) evil (dot)
# example" gives no value) may come from it: approval, unless the user or a trusted result
# named it, or it is a contact.
test_a_recipient_seen_nowhere_after_untrusted_content_needs_approval if {
	read := fixtures.with_session(send([attacker]), {"labels": ["untrusted_content"]})
	fixtures.expect(with_provenance(read, {"/recipients/0": entry([], false)}, []), {"decision": "user-approval", "approvals": {"inbox.recipient_from_untrusted_content"}})
	fixtures.expect(with_provenance(read, {"/recipients/0": entry([], true)}, []), {"decision": "allow"})
	trusted := with_provenance(read, {"/recipients/0": object.union(entry([], false), {"in_trusted_output": true})}, [])
	fixtures.expect(trusted, {"decision": "allow"})
	fixtures.expect(with_provenance(read, {"/recipients/0": entry([], false)}, []), {"decision": "allow"}) with data.tenants.acme.counterparties.contacts as [attacker]
}
