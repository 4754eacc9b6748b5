package tools.web_test

import data.toolgate.fixtures_test as fixtures

mia := fixtures.subject("mia", "acme", ["user"])

fetch(url) := fixtures.call(mia, "get_webpage", {"url": url})

# input.provenance of the URL: its sources, whether the user typed it, and untraced labels.
with_url_provenance(doc, sources, in_prompt, untraced) := object.union(doc, {"provenance": {
	"arguments": {"/url": {"kind": "url", "sources": sources, "in_prompt": in_prompt, "in_trusted_output": false}},
	"extracted": {}, "untraced_labels": untraced,
}})

from_message := {"tool": "read_inbox", "pointer": "/0/body", "label": "untrusted_content", "decision_id": "d-1"}

phishing := "https://true-informations.com/login"

test_a_url_first_seen_in_an_untrusted_message_needs_approval if {
	doc := with_url_provenance(fetch(phishing), [from_message], false, [])
	fixtures.expect(doc, {"decision": "user-approval", "approvals": {"web.url_from_untrusted_content"}})
	fixtures.expect(fixtures.approved(doc, "mia", ["user"]), {"decision": "allow"})
}

test_the_same_url_typed_by_the_user_is_allowed if {
	fixtures.expect(with_url_provenance(fetch(phishing), [from_message], true, []), {"decision": "allow", "rules": {"web.fetch"}})
	fixtures.expect(with_url_provenance(fetch(phishing), [], false, []), {"decision": "allow"})
}

test_a_tenant_may_deny_urls_from_untrusted_content if {
	doc := with_url_provenance(fetch(phishing), [from_message], false, [])
	fixtures.expect(doc, {"decision": "deny", "denials": {"web.url_from_untrusted_content"}}) with data.tenants.acme.features.deny_untrusted_urls as true
	fixtures.expect(doc, {"decision": "user-approval"}) with data.tenants.acme.features.deny_untrusted_urls as false
}

test_an_allowed_domain_is_fetched_whoever_named_it if {
	doc := with_url_provenance(fetch("https://docs.partner.example/a"), [from_message], false, [])
	fixtures.expect(doc, {"decision": "allow"}) with data.tenants.acme.allowed_domains as ["partner.example"]
	fixtures.expect(doc, {"decision": "user-approval"}) with data.tenants.acme.allowed_domains as []
}

test_untraced_untrusted_content_is_not_clean if {
	fixtures.expect(with_url_provenance(fetch(phishing), [], false, ["untrusted_content"]), {"decision": "user-approval"})
	fixtures.expect(with_url_provenance(fetch(phishing), [], true, ["untrusted_content"]), {"decision": "allow"})
	fixtures.expect(with_url_provenance(fetch(phishing), [], false, ["private_data"]), {"decision": "allow"})
}

test_without_provenance_a_conversation_with_untrusted_content_asks if {
	fixtures.expect(fixtures.with_session(fetch(phishing), {"labels": ["untrusted_content"]}), {"decision": "user-approval"})
	fixtures.expect(fixtures.with_session(fetch(phishing), {"labels": ["private_data"]}), {"decision": "allow"})
}

test_only_external_http_urls_are_fetched if {
	every url in ["file:///etc/passwd", "javascript:alert(1)", "not a url", "ftp://example.com/x"] {
		fixtures.expect(fetch(url), {"decision": "deny", "denials": {"web.url_not_http"}})
	}
	every url in ["http://localhost:8080/admin", "http://127.0.0.1/", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.5/"] {
		fixtures.expect(fetch(url), {"decision": "deny", "denials": {"web.internal_host"}})
	}
}

# Once a page or a message is in the conversation, a URL seen nowhere ("evil[.]example" in a
# page gives no value) may come from it: approval, unless the user or a trusted result named
# it, or its host is in allowed_domains.
test_a_url_seen_nowhere_after_untrusted_content_needs_approval if {
	read := fixtures.with_session(fetch("https://evil.example/steal"), {"labels": ["untrusted_content"]})
	fixtures.expect(with_url_provenance(read, [], false, []), {"decision": "user-approval", "approvals": {"web.url_from_untrusted_content"}})
	fixtures.expect(with_url_provenance(read, [], true, []), {"decision": "allow"})
	trusted := object.union(with_url_provenance(read, [], false, []), {"provenance": {"arguments": {"/url": {"in_trusted_output": true}}}})
	fixtures.expect(trusted, {"decision": "allow"})
	fixtures.expect(with_url_provenance(read, [], false, []), {"decision": "allow"}) with data.tenants.acme.allowed_domains as ["evil.example"]
}

test_folded_and_ipv6_forms_of_internal_hosts_are_denied if {
	every url in ["http://\uFF11\uFF12\uFF17.0.0.1/", "http://\u2460\u2461\u2466.0.0.1/", "http://[::127.0.0.1]/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "http://metadata.google.internal/", "http://svc.cluster.local/", "http://intranet/", "http://224.0.0.1/"] {
		fixtures.expect(fetch(url), {"decision": "deny", "denials": {"web.internal_host"}})
	}
}
