# METADATA
# title: Inbox (e-mail)
# description: |
#   read_inbox v1 and send_email v1 (contracts/email/). Tenant data (data.tenants[<tenant>]):
#   counterparties.contacts (addresses the user writes to) and allowed_domains
#   (the organisation's own domains).
#   - read_inbox: allow.
#   - send_email: a recipient taken from untrusted content (a message, a web page: its
#     provenance, docs/policy-authors.md "Provenance") that the user did not type and that is
#     not a contact nor in allowed_domains needs the user's approval; so does, once the
#     conversation holds untrusted content (traced or not), one that neither the user nor a
#     trusted result named ("mallory (at) evil (dot) example" is found as no value), or any
#     one the user did not type when the gateway built no provenance.
#     Anything else is allowed.
# custom:
#   governs:
#     read_inbox:
#       versions: ["1"]
#     send_email:
#       versions: ["1"]
#   approver_roles: [user]
package tools.inbox

import data.toolgate.lib

governs["read_inbox"] := {"versions": ["1"]}

governs["send_email"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand") and the provenance of
# the recipients.
session_reads := {"session.conversation.labels", "provenance"}

approver_roles := ["user"]

# The user confirms a message she asked for herself (step-up token, docs/approvers.md).
approval_rules := {"allow_self_approval": true}

default recipients := []

recipients := r if {
	r := lib.args.recipients
	is_array(r)
}

allow contains {"rule": "read_only", "message": "reading the user's own inbox"} if input.tool.name == "read_inbox"

# The recipient at index i came from untrusted content and not from the user; or the
# conversation holds untrusted content and neither the user nor a trusted result named the
# recipient, so that content may have, in a spelling no value was found in.
recipient_from_untrusted(i) if {
	pointer := sprintf("/recipients/%d", [i])
	lib.from_untrusted(pointer)
	not lib.user_supplied(pointer)
}

recipient_from_untrusted(i) if {
	pointer := sprintf("/recipients/%d", [i])
	lib.conversation_untrusted
	not lib.user_supplied(pointer)
	not lib.from_trusted_output(pointer)
}

recipient_from_untrusted(_) if {
	not lib.provenance_built
	lib.session_labelled("untrusted_content")
}

steered_recipients contains address if {
	some i, address in recipients
	recipient_from_untrusted(i)
	not lib.known_contact(address)
}

approval_required contains {
	"rule": "recipient_from_untrusted_content",
	"message": "a recipient was named by untrusted content, not by the user",
} if {
	input.tool.name == "send_email"
	count(steered_recipients) > 0
}

allow contains {"rule": "send", "message": "an e-mail to recipients the user or trusted content named"} if {
	input.tool.name == "send_email"
	count(recipients) > 0
	count(steered_recipients) == 0
}
