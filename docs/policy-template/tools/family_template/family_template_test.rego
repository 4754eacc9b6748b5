package tools.family_template_test

import data.toolgate.fixtures_test as fixtures

# A subject that holds the role granted sendEmail, and the tenant data the tests use.
sender := fixtures.subject("u-1", "acme", ["support_agent"])

roles := {"support_agent": {"tools": ["sendEmail"], "dynamic_tools": false}}

tenants := {"acme": {"allowed_domains": ["acme.example"]}}

mail(to, body) := fixtures.call(sender, "sendEmail", {"to": to, "subject": "Hello", "body": body})

test_mail_inside_the_tenant_allowed if {
	fixtures.expect(mail("bob@acme.example", "See https://wiki.acme.example/x"), {
		"decision": "allow",
		"reasons": ["allowed by policy"],
		"rules": {"family_template.message_checked"},
	}) with data.roles as roles with data.tenants as tenants
}

test_mail_outside_the_tenant_needs_approval if {
	fixtures.expect(mail("eve@elsewhere.example", "Hi"), {
		"decision": "user-approval",
		"reasons": ["1 recipient(s) outside the tenant's domains"],
		"approvals": {"family_template.outside_recipient"},
		"approval": {"reason": "1 recipient(s) outside the tenant's domains", "approver_roles": ["mail_approver"], "ttl_s": 900},
	}) with data.roles as roles with data.tenants as tenants
}

test_cc_counts_as_a_recipient if {
	doc := fixtures.call(sender, "sendEmail", {"to": "bob@acme.example", "subject": "s", "body": "b", "cc": ["eve@elsewhere.example"]})
	fixtures.expect(doc, {"decision": "user-approval"}) with data.roles as roles with data.tenants as tenants
}

test_credentials_and_internal_links_are_denied if {
	fixtures.expect(mail("bob@acme.example", "key AKIAIOSFODNN7EXAMPLE"), {
		"decision": "deny",
		"rules": {"family_template.credential_in_body"},
	}) with data.roles as roles with data.tenants as tenants
	fixtures.expect(mail("bob@acme.example", "metadata at http://169.254.169.254/latest"), {
		"decision": "deny",
		"rules": {"family_template.internal_link"},
	}) with data.roles as roles with data.tenants as tenants
}

test_approval_never_overrides_a_deny if {
	doc := fixtures.approved(mail("eve@elsewhere.example", "-----BEGIN RSA PRIVATE KEY-----"), "u-9", ["mail_approver"])
	fixtures.expect(doc, {"decision": "deny"}) with data.roles as roles with data.tenants as tenants
}
