package toolgate.lib

# --- value keys ----------------------------------------------------------------------------
#
# value_key(kind, value): the key under which the gateway compares values of a kind for
# input.provenance (docs/session.md "Provenance"); two values are the same value when their
# keys are equal. The gateway computes the same keys (app/provenance/normalize.py); both are
# checked against tests/data/value_keys.json. Undefined when `value` is not of `kind`.
# Lookalike characters are never folded: "pаypal.com" with a Cyrillic "а" has no key here
# (non-ASCII hosts are IDNA-mapped by the gateway only) and an IBAN must be ASCII.
#
#   url     scheme://[userinfo@]host[:port]path[?query] of url_parts (no scheme: http://),
#           the host lowercased, percent-decoded, no trailing dot; default port and fragment
#           dropped; empty path "/"
#   domain  the host of a URL or a bare host name
#   email   local@domain, lowercased, display name dropped
#   iban    uppercase without spaces: 2 letters, 2 digits, 11-30 letters or digits
#   phone   "+" and digits of an international number ("00" read as "+"), digits of a
#           national one; 7-15 digits
#   path    path_normalize
#   amount, number  the decimal number without trailing zeros, currency dropped ("1.234,50 €"
#           -> "1234.5")
#   text    lowercased, whitespace runs one space, trimmed

value_key("url", value) := concat("", [
	p.scheme, "://", _userinfo_at(p.userinfo), p.host, _port_part(p), _path_part(p.path), _query_part(p.query),
]) if {
	p := _url_of(value)
	_ascii_host(p.host)
}

value_key("domain", value) := p.host if {
	p := _url_of(value)
	_ascii_host(p.host)
}

value_key("email", value) := concat("@", [lower(p.local), p.domain]) if p := email_parts(value)

value_key("iban", value) := compact if {
	is_string(value)
	compact := upper(replace(value, " ", ""))
	regex.match(`^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$`, compact)
	regex.match(`^[\x00-\x7f]*$`, value)
}

value_key("phone", value) := concat("", [_plus(prefix), digits]) if {
	is_string(value)
	t := trim_space(value)
	regex.match(`^(\+|00)?[0-9 ().\-/]+$`, t)
	prefix := _phone_prefix(t)
	digits := regex.replace(substring(t, count(prefix), -1), `[^0-9]`, "")
	count(digits) >= 7
	count(digits) <= 15
}

value_key("path", value) := path_normalize(value) if {
	is_string(value)
	value != ""
}

value_key("amount", value) := _amount_key(value)

value_key("number", value) := _amount_key(value)

value_key("text", value) := t if {
	is_string(value)
	t := trim(regex.replace(lower(value), `[\t\n\f\r ]+`, " "), " ")
	t != ""
}

_amount_key(value) := _number_text(value) if is_number(value)

_amount_key(value) := _number_text(to_number(_decimal_form(compact))) if {
	is_string(value)
	t := trim_space(regex.replace(value, `[€$£¥]|\b[A-Z]{3}\b`, ""))
	regex.match(`^[+-]?[0-9][0-9,.' ]*$`, t)
	compact := replace(replace(t, " ", ""), "'", "")
}

_url_of(u) := url_parts(u) if {
	is_string(u)
	regex.match(`^[A-Za-z][A-Za-z0-9+.-]*://`, replace(u, "\\", "/"))
}

_url_of(u) := url_parts(concat("", ["http://", trim_prefix(slashed, "//")])) if {
	is_string(u)
	slashed := replace(u, "\\", "/")
	not regex.match(`^[A-Za-z][A-Za-z0-9+.-]*://`, slashed)
	regex.match(`^(?://)?[^/?#\s@:][^/?#\s]*`, slashed)
}

_ascii_host(host) if {
	host != ""
	regex.match(`^[\x00-\x7f]*$`, host)
}

_userinfo_at("") := ""

_userinfo_at(userinfo) := concat("", [userinfo, "@"]) if userinfo != ""

_default_ports := {"http": "80", "https": "443"}

_port_part(p) := "" if p.port in {"", object.get(_default_ports, p.scheme, "")}

_port_part(p) := concat("", [":", p.port]) if not p.port in {"", object.get(_default_ports, p.scheme, "")}

_path_part("") := "/"

_path_part(path) := path if path != ""

_query_part("") := ""

_query_part(query) := concat("", ["?", query]) if query != ""

_phone_prefix(t) := "+" if startswith(t, "+")

_phone_prefix(t) := "00" if startswith(t, "00")

_phone_prefix(t) := "" if {
	not startswith(t, "+")
	not startswith(t, "00")
}

_plus("") := ""

_plus(prefix) := "+" if prefix != ""

# "1.234,50" -> "1234.50": the last "," or "." followed by 1-2 digits is the decimal
# separator; any other is a thousands separator.
_decimal_form(c) := concat(".", [_without_separators(substring(c, 0, at)), substring(c, at + 1, -1)]) if {
	at := max(array.flatten([indexof_n(c, ","), indexof_n(c, "."), [-1]]))
	at >= 0
	((count(c) - at) - 1) in {1, 2}
} else := _without_separators(c)

_without_separators(c) := replace(replace(c, ",", ""), ".", "")

_number_text(n) := format_int(n, 10) if n == floor(n)

_number_text(n) := sprintf("%v", [n]) if n != floor(n)
