package toolgate.lib

# --- tenant data ---------------------------------------------------------------------------
#
# Per-tenant data lives at data.tenants[<tenant>] (policies/tenants/<tenant>/data.json in the
# bundle), keyed by the verified tenant of the subject. Members (all optional):
#   counterparties: {<kind>: [identifier]}  e.g. "payees" (IBANs), "own_accounts", "contacts"
#   allowed_domains: [domain]               e-mail and link domains the tenant trusts
#   limits: {<name>: number}                e.g. "payment_approval_amount"
#   features: {<name>: true}                e.g. "delete_files"
#   custom: {<name>: any JSON}              what a family (or this library) declares in its
#                                           tenant_custom := {<name>: <JSON Schema>}
# See docs/policy-authors.md for every name the shipped families read.

# The calling tenant's data ({} when there is none).
default tenant := {}

tenant := value if {
	value := data.tenants[input.subject.tenant]
	is_object(value)
}

# The tenant's limit `name` when it is a number, else `fallback`.
tenant_limit(name, fallback) := value if {
	value := tenant.limits[name]
	is_number(value)
} else := fallback

# The tenant switched feature `name` on (exactly true).
tenant_feature(name) if tenant.features[name] == true

# The tenant's custom member `name` (declared in some tenant_custom), else `fallback`. Its shape
# is checked when the data is pushed or checked, not here: read it defensively.
tenant_custom_data(name, fallback) := object.get(tenant, ["custom", name], fallback)

# The tenant's list at `key` (a member name or a path array): its string members, as a set.
tenant_strings(key) := {value | some value in _collection_or_empty(object.get(tenant, key, [])); is_string(value)}

_collection_or_empty(values) := values if _collection(values)

_collection_or_empty(values) := [] if not _collection(values)

# `host` is in the tenant's allowed_domains (or a subdomain of one).
tenant_allows_host(host) if host_in_domains(host, tenant_strings("allowed_domains"))

# --- counterparties ------------------------------------------------------------------------
#
# Counterparty identifiers in tenant data are written in their comparison form
# (identifier_key: no spaces, uppercase), so that a lookup is one membership test;
# counterparty_problems lists entries that are not (the shipped data is tested for none).

# The comparison key of an identifier (IBAN, account id, payee name): spaces removed,
# uppercased; ASCII letters, digits and . _ - only, so a lookalike never equals a known one.
identifier_key(value) := upper(replace(value, " ", "")) if {
	is_string(value)
	regex.match(`^[A-Za-z0-9 ._-]+$`, value)
}

# `value` is one of the tenant's counterparties of `kind` (compared by identifier_key).
known_counterparty(kind, value) if identifier_key(value) in _counterparties(kind)

_counterparties(kind) := object.get(tenant, ["counterparties", kind], [])

# `value` imitates one of the tenant's counterparties of `kind`: it is not ASCII, and with its
# lookalike characters replaced (skeleton) it equals a known one.
counterparty_lookalike(kind, value) if {
	is_string(value)
	not ascii_printable(value)
	identifier_key(skeleton(value)) in _counterparties(kind)
}

# Entries of data.tenants[*].counterparties (other than "contacts", which are e-mail
# addresses) that never match: not strings, or not in identifier_key form. Each is
# "<tenant>: counterparties.<kind>: <entry>".
counterparty_problems contains sprintf("%s: counterparties.%s: %v", [tenant_id, kind, entry]) if {
	some tenant_id, tenant_data in data.tenants
	some kind, entries in tenant_data.counterparties
	kind != "contacts"
	some entry in entries
	not _in_key_form(entry)
}

_in_key_form(entry) if identifier_key(entry) == entry

# `address` is one of the tenant's "contacts" (case-insensitive), or its domain is allowed.
known_contact(address) if {
	is_string(address)
	lower(trim_space(address)) in {lower(c) | some c in tenant_strings(["counterparties", "contacts"])}
}

known_contact(address) if email_in_domains(address, tenant_strings("allowed_domains"))
