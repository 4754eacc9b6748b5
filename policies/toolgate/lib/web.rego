package toolgate.lib

# --- URLs ----------------------------------------------------------------------------------
#
# url_parts parses an absolute URL the way browsers find its host (WHATWG URL): a backslash
# counts as "/", the userinfo ends at the last "@" before the path, the host is lowercased,
# percent-decoded and loses a trailing dot. Undefined for anything that is not
# scheme://authority...

# scheme :// [userinfo @] host [: port] path [? query] [# fragment]
_url_pattern := concat("", [
	`^([A-Za-z][A-Za-z0-9+.-]*)://`,
	`(?:([^/?#]*)@)?`,
	`(\[[0-9A-Fa-f:.]*\]|[^/?#:]*)`,
	`(?::([0-9]*))?`,
	`([^?#]*)(?:\?([^#]*))?(?:#(.*))?$`,
])

# {"scheme", "userinfo", "host", "port", "path", "query", "fragment"}, all strings ("" when
# absent; the scheme and host lowercased).
url_parts(u) := {
	"scheme": lower(m[1]),
	"userinfo": m[2],
	"host": _host_normalize(m[3]),
	"port": m[4],
	"path": m[5],
	"query": m[6],
	"fragment": m[7],
} if {
	is_string(u)
	not has_control_character(u)
	some m in regex.find_all_string_submatch_n(_url_pattern, replace(u, "\\", "/"), 1)
}

# The host of URL `u` (lowercase, no trailing dot). A URL without a scheme ("www.x.com/a",
# "//x.com", "10.0.0.5:8080") is read as a browser's address bar reads it, as http://;
# undefined for anything else ("/relative", "", a number).
url_host(u) := url_parts(u).host

url_host(u) := url_parts(concat("", ["http://", trim_prefix(slashed, "//")])).host if {
	is_string(u)
	slashed := replace(u, "\\", "/")
	not regex.match(`^[A-Za-z][A-Za-z0-9+.-]*://`, slashed)
	regex.match(`^(?://)?[^/?#\s@:][^/?#\s]*`, slashed)
}

_host_normalize(h) := trim_suffix(lower(_percent_decoded(h)), ".")

# urlquery.decode raises on a malformed escape ("%zz"): decode only well-formed text.
_percent_decoded(s) := urlquery.decode(s) if regex.match(`^(?:[^%]|%[0-9A-Fa-f]{2})*$`, s)

_percent_decoded(s) := s if not regex.match(`^(?:[^%]|%[0-9A-Fa-f]{2})*$`, s)

# --- hosts and domains ---------------------------------------------------------------------

# `host` (lowercase) is `domain` or a subdomain of it ("mail.example.com" is in "example.com";
# "badexample.com" is not).
host_in_domain(host, domain) if {
	is_string(domain)
	host == _domain_normalize(domain)
}

host_in_domain(host, domain) if {
	is_string(host)
	is_string(domain)
	endswith(host, concat("", [".", _domain_normalize(domain)]))
}

_domain_normalize(d) := trim_suffix(lower(d), ".")

# `host` is in one of `domains` (a set or an array).
host_in_domains(host, domains) if {
	some domain in domains
	is_string(domain)
	host_in_domain(host, domain)
}

# `host` is an IP address literal: dotted IPv4, bracketed IPv6, or a numeric form that
# browsers read as IPv4 ("2130706433", "0x7f.1", "0177.0.0.1").
host_is_ip(host) if _ipv4(host)

host_is_ip(host) if {
	is_string(host)
	startswith(host, "[")
}

host_is_ip(host) if {
	is_string(host)
	regex.match(`^(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}$`, host)
}

_ipv4(host) if {
	is_string(host)
	regex.match(`^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$`, host)
	net.cidr_is_valid(concat("", [host, "/32"]))
}

_ipv6(host) if {
	is_string(host)
	inner := trim_suffix(trim_prefix(host, "["), "]")
	regex.match(`^[0-9a-f:.]+$`, inner)
	net.cidr_is_valid(concat("", [inner, "/128"]))
}

# Addresses that are not on the public internet: this machine, private networks, link-local
# (cloud metadata), carrier-grade NAT, benchmarking, multicast and reserved.
_internal_ipv4_ranges := [
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3",
]

# The same for IPv6, and every form that embeds an IPv4 address (IPv4-compatible and -mapped,
# NAT64, 6to4, Teredo): the IPv4 address inside may be internal.
_internal_ipv6_ranges := [
	"::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/32", "2002::/16",
	"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
]

# Names that only resolve on a private network (RFC 6762 .local, RFC 6761 .localhost, the
# .internal of cloud providers and the "home.arpa" of home networks).
_internal_domains := ["localhost", "local", "internal", "home.arpa"]

# Characters that UTS 46 maps to an ASCII dot or digit in a host (a browser reads
# "１２７。0.0.1" and "①②⑦.0.0.1" as 127.0.0.1); full-width letters and digits are in
# `confusables`.
_host_forms := {
	"\u3002": ".", "\uFF0E": ".", "\uFF61": ".", # IDEOGRAPHIC, FULLWIDTH, HALFWIDTH IDEOGRAPHIC FULL STOP
	"\u24EA": "0", "\u2460": "1", "\u2461": "2", "\u2462": "3", "\u2463": "4", # CIRCLED DIGIT ZERO..FOUR
	"\u2464": "5", "\u2465": "6", "\u2466": "7", "\u2467": "8", "\u2468": "9", # CIRCLED DIGIT FIVE..NINE
}

# `host` with the dots and digits above, and the full-width forms, folded to ASCII.
_host_folded(host) := lower(strings.replace_n(_host_forms, skeleton(host))) if is_string(host)

# `host` names this machine or a private network: "localhost", ".local", ".internal" (and
# their subdomains), a single-label name (resolved through the local search domains), a
# loopback, private, link-local (cloud metadata), unique-local, multicast or reserved
# address, an IPv6 address that embeds an IPv4 one, or an IP literal in a form this library
# does not read (numeric IPv4 forms, malformed literals). Read after the folding above; a host
# that holds any other non-ASCII digit may be read as an address: fail closed.
host_is_internal(host) if _ascii_host_is_internal(_host_folded(host))

host_is_internal(host) if {
	is_string(host)
	regex.match(`[^\P{N}0-9]`, host)
}

_ascii_host_is_internal(host) if host_in_domains(host, _internal_domains)

_ascii_host_is_internal(host) if {
	host != ""
	not contains(host, ".")
	not startswith(host, "[")
}

_ascii_host_is_internal(host) if {
	_ipv4(host)
	count(net.cidr_contains_matches(_internal_ipv4_ranges, host)) > 0
}

_ascii_host_is_internal(host) if {
	_ipv6(host)
	count(net.cidr_contains_matches(
		array.concat(_internal_ipv4_ranges, _internal_ipv6_ranges),
		trim_suffix(trim_prefix(host, "["), "]"),
	)) > 0
}

_ascii_host_is_internal(host) if {
	host_is_ip(host)
	not _ipv4(host)
	not _ipv6(host)
}

# Public suffixes of more than one label that this library knows (a small part of the Public
# Suffix List: the common country second-level domains and hosting platforms whose
# subdomains belong to different owners). Extend it in a family's data when you need more.
multi_label_suffixes := {
	"ac.il", "ac.in", "ac.jp", "ac.nz", "ac.uk", "ac.za", "appspot.com", "azurewebsites.net",
	"blogspot.com", "cloudfront.net", "co.id", "co.il", "co.in", "co.jp", "co.kr", "co.nz",
	"co.th", "co.uk", "co.za", "com.ar", "com.au", "com.br", "com.cn", "com.co", "com.eg",
	"com.hk", "com.mx", "com.my", "com.ng", "com.pe", "com.ph", "com.pk", "com.sa", "com.sg",
	"com.tr", "com.tw", "com.ua", "edu.au", "edu.cn", "firebaseapp.com", "github.io",
	"gitlab.io", "go.jp", "go.kr", "gov.au", "gov.br", "gov.cn", "gov.in", "gov.uk", "gov.za",
	"herokuapp.com", "ltd.uk", "me.uk", "ne.jp", "net.au", "net.br", "net.cn", "net.in",
	"netlify.app", "nhs.uk", "or.jp", "or.kr", "org.au", "org.br", "org.cn", "org.in", "org.mx",
	"org.nz", "org.uk", "org.za", "pages.dev", "plc.uk", "s3.amazonaws.com", "vercel.app",
	"web.app", "workers.dev",
}

# The registrable domain ("eTLD+1") of `host`: "a.b.example.co.uk" -> "example.co.uk",
# "www.example.com" -> "example.com". An IP literal is its own registrable domain; a host
# that is only a suffix ("co.uk") or a single label has none (undefined).
registrable_domain(host) := host if host_is_ip(host)

registrable_domain(host) := _last_labels(host, _suffix_labels(host) + 1) if {
	is_string(host)
	not host_is_ip(host)
	count(split(host, ".")) > _suffix_labels(host)
}

_suffix_labels(host) := 3 if {
	_last_labels(host, 3) in multi_label_suffixes
} else := 2 if {
	_last_labels(host, 2) in multi_label_suffixes
} else := 1

_last_labels(host, n) := concat(".", array.slice(labels, count(labels) - n, count(labels))) if {
	labels := split(host, ".")
	count(labels) >= n
}

# --- e-mail addresses ----------------------------------------------------------------------

# [display name <] local @ domain [>]
_email_pattern := concat("", [
	`^(?:[^<>]*<)?`,
	`([A-Za-z0-9.!#$%&'*+/=?^_{|}~-]+)@`,
	`([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)`,
	`>?$`,
])

# {"local", "domain"} of an address "user@example.com" or "Name <user@example.com>"; the
# domain lowercased. ASCII addresses only (internationalized addresses are undefined).
email_parts(address) := {"local": m[1], "domain": lower(m[2])} if {
	is_string(address)
	some m in regex.find_all_string_submatch_n(_email_pattern, trim_space(address), 1)
}

# The lowercased domain of an e-mail address; undefined when it is not one.
email_domain(address) := email_parts(address).domain

# The address's domain is one of `domains` or a subdomain of one.
email_in_domains(address, domains) if host_in_domains(email_domain(address), domains)

# The e-mail addresses in free text.
emails_in(text) := {lower(m) | some m in regex.find_n(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, text, -1)} if {
	is_string(text)
}

# --- links in text -------------------------------------------------------------------------

# The http(s) links in free text, and "www." links as "http://www....". Trailing punctuation
# (".,;:!?") is not part of a link.
links_in(text) := {_link(raw) | some raw in regex.find_n(`(?i)\b(?:https?://|www\.)[^\s<>"'\x60]+`, text, -1)} if {
	is_string(text)
}

_link(raw) := _with_scheme(trim_right(raw, ".,;:!?)]}"))

_with_scheme(link) := link if regex.match(`(?i)^https?://`, link)

_with_scheme(link) := concat("", ["http://", link]) if not regex.match(`(?i)^https?://`, link)

# The hosts of the links in free text.
link_hosts(text) := {host | some link in links_in(text); host := url_host(link)}

# The links in free text whose host is outside `domains`, and links that do not parse.
links_outside(text, domains) := {link |
	some link in links_in(text)
	not _link_host_in(link, domains)
}

_link_host_in(link, domains) if host_in_domains(url_host(link), domains)
