# METADATA
# title: E-mail (family template)
# description: |
#   sendEmail v1 (to, subject, body, cc?). Copy this folder to policies/tools/<family>/,
#   replace family_template with the family's name, and adapt the rules.
#   - A body that carries a credential (an API key, a private key, a token) is denied.
#   - A link in the body to this machine or a private network is denied.
#   - A recipient outside the tenant's allowed_domains needs approval by a mail_approver.
#   - Anything else is allowed for the roles granted sendEmail in data.roles.
# custom:
#   governs:
#     sendEmail:
#       versions: ["1"]
#   approver_roles: [mail_approver]
package tools.family_template

import data.toolgate.lib

# The tools this family governs: only calls of these reach its rules.
governs["sendEmail"] := {"versions": ["1"]}

# The session facts its rules read (input.session / input.history members, docs/session.md
# "Facts on demand"): none. The gateway builds only these; `toolgate policy check` verifies it.
session_reads := set()

# Who may approve this family's approval_required rules.
approver_roles := ["mail_approver"]

# Values read by several rules are rules: OPA evaluates each once per call.
body := input.call.input.body

# cc is optional: read it with a default, never as input.call.input.cc.
recipients := array.concat([input.call.input.to], object.get(lib.args, "cc", []))

outside_recipients contains address if {
	some address in recipients
	not lib.email_in_domains(address, lib.tenant_strings("allowed_domains"))
}

carries_credential if lib.has_secret(body)

internal_links contains host if {
	some host in lib.link_hosts(body)
	lib.host_is_internal(host)
}

deny contains {"rule": "credential_in_body", "message": "the message carries a credential"} if {
	carries_credential
}

deny contains {"rule": "internal_link", "message": "the message links to an internal address"} if {
	count(internal_links) > 0
}

approval_required contains {
	"rule": "outside_recipient",
	"message": sprintf("%d recipient(s) outside the tenant's domains", [count(outside_recipients)]),
} if {
	count(outside_recipients) > 0
}

# An allow states what it checked, and matches only when that holds (a deny would win anyway,
# but the decision record lists every matched rule, and an allow that always matches says
# nothing).
allow contains {"rule": "message_checked", "message": "a message without credentials or internal links"} if {
	not carries_credential
	count(internal_links) == 0
}
