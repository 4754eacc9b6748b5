# METADATA
# title: Web
# description: |
#   get_webpage v1 (contracts/web/). Tenant data (data.tenants[<tenant>]): allowed_domains
#   (hosts fetched whatever named them) and features.deny_untrusted_urls (deny, instead of
#   asking a person, a URL that only untrusted content named).
#   - A URL that is not http(s), or whose host is internal (localhost, .local, .internal, a
#     single-label name, a private, link-local, multicast or reserved address, in any form a
#     browser folds to one), is denied.
#   - A URL first seen in untrusted content (a web page, a message: its provenance,
#     docs/policy-authors.md "Provenance") and not named by the user needs the user's approval,
#     or is denied when the tenant sets features.deny_untrusted_urls; so does, once the
#     conversation holds untrusted content (traced or not), a URL that neither the user nor a
#     trusted result named: untrusted text may have spelled it in a form no value was found
#     in ("evil[.]example"). A host in allowed_domains is fetched either way.
#   - Anything else is allowed.
# custom:
#   governs:
#     get_webpage:
#       versions: ["1"]
#   approver_roles: [user]
package tools.web

import data.toolgate.lib

governs["get_webpage"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand") and the provenance of
# the URL.
session_reads := {"session.conversation.labels", "provenance"}

approver_roles := ["user"]

# The user confirms a fetch she asked for herself (step-up token, docs/approvers.md).
approval_rules := {"allow_self_approval": true}

url := object.get(lib.args, "url", null)

parts := lib.url_parts(url)

http_url if parts.scheme in {"http", "https"}

deny contains {"rule": "url_not_http", "message": "only http and https URLs are fetched"} if {
	input.tool.name == "get_webpage"
	not http_url
}

deny contains {"rule": "internal_host", "message": "the URL's host is internal"} if {
	input.tool.name == "get_webpage"
	lib.host_is_internal(parts.host)
}

# The URL came from untrusted content and not from the user; or the conversation holds
# untrusted content and neither the user nor a trusted result named the URL, so that content
# may have, in a spelling no value was found in.
untrusted_url if {
	lib.from_untrusted("/url")
	not lib.user_supplied("/url")
}

untrusted_url if {
	lib.conversation_untrusted
	not lib.user_supplied("/url")
	not lib.from_trusted_output("/url")
}

untrusted_url if {
	not lib.provenance_built
	lib.session_labelled("untrusted_content")
}

fetch_steered if {
	untrusted_url
	not lib.tenant_allows_host(parts.host)
}

untrusted_url_message := "the URL was named by untrusted content, not by the user"

approval_required contains {"rule": "url_from_untrusted_content", "message": untrusted_url_message} if {
	input.tool.name == "get_webpage"
	fetch_steered
	not lib.tenant_feature("deny_untrusted_urls")
}

deny contains {"rule": "url_from_untrusted_content", "message": untrusted_url_message} if {
	input.tool.name == "get_webpage"
	fetch_steered
	lib.tenant_feature("deny_untrusted_urls")
}

allow contains {"rule": "fetch", "message": "a web page the user or trusted content named"} if {
	input.tool.name == "get_webpage"
	http_url
	not lib.host_is_internal(parts.host)
	not fetch_steered
}
