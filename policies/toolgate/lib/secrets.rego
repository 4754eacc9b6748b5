package toolgate.lib

# --- secrets in text -----------------------------------------------------------------------
#
# Never quote a match in a reason: reasons are returned to the caller and kept in the
# decision log. Name the kind ("an AWS access key") instead.

# Kind -> RE2 pattern of well-known credential formats.
secret_patterns := {
	"aws_access_key_id": `\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`,
	"github_token": `\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`,
	"gitlab_token": `\bglpat-[A-Za-z0-9_-]{20,}\b`,
	"slack_token": `\bxox[abposr]-[A-Za-z0-9-]{10,}\b`,
	"stripe_live_key": `\b[rs]k_live_[A-Za-z0-9]{16,}\b`,
	"google_api_key": `\bAIza[0-9A-Za-z_-]{35}\b`,
	"openai_api_key": `\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,}\b`,
	"private_key": `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`,
	"jwt": `\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}`,
	"bearer_token": `(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*`,
	# A one-time or card code named in words: "security code 463820", "PIN: 1234", "the
	# verification code is 482913", "CVV 123".
	"verification_code": concat("", [
		`(?i)\b(?:(?:security|verification|one[- ]time|otp|2fa|mfa|auth(?:entication)?|login|sign[- ]in|access|`,
		`confirmation|backup|recovery)[ -]?(?:code|pin|passcode)|passcode|pin|otp|cvv2?|cvc)\b`,
		`[\s:=#-]*(?:(?:is|was)[\s:=#-]*)?[0-9]{3,8}\b`,
	]),
}

# A tenant's own credential formats: tenant data custom.secret_patterns, kind -> RE2 pattern
# (e.g. {"acme_badge": "\\bACME-[0-9]{6}\\b"}). A pattern that is not valid RE2 is skipped
# here (never a builtin error); `toolgate tenant-data check` and pushes refuse it first.
tenant_custom["secret_patterns"] := {
	"type": "object",
	"maxProperties": 64,
	"propertyNames": {"pattern": "^[a-z][a-z0-9_]{0,63}$"},
	"additionalProperties": {"type": "string", "minLength": 1, "maxLength": 512, "format": "regex"},
}

_tenant_secret_patterns[kind] := pattern if {
	some kind, pattern in tenant_custom_data("secret_patterns", {})
	is_string(kind)
	is_string(pattern)
	regex.is_valid(pattern)
}

# The kinds of credentials found in `text`: secret_patterns keys and the tenant's own kinds.
secrets_in(text) := {kind |
	some kind, pattern in object.union(_tenant_secret_patterns, secret_patterns)
	regex.match(pattern, text)
} if {
	is_string(text)
}

# `text` holds a credential of a known kind.
has_secret(text) if count(secrets_in(text)) > 0

# --- payment card numbers (Luhn) -----------------------------------------------------------

# `number` is 13-19 ASCII digits with a valid Luhn check digit.
luhn_valid(number) if {
	is_string(number)
	regex.match(`^[0-9]{13,19}$`, number)
	digits := [to_number(d) | some d in split(number, "")]
	last := count(digits) - 1
	total := sum([_luhn_term(digits[i], last - i) | some i in numbers.range(0, last)])
	total % 10 == 0
}

# The digit at `position` from the right (0 = check digit): every second one is doubled.
_luhn_term(digit, position) := digit if position % 2 == 0

_luhn_term(digit, position) := (2 * digit) - (9 * to_number(digit > 4)) if position % 2 == 1

# The card numbers in free text: runs of 13-19 digits, optionally grouped by spaces or
# hyphens, that pass the Luhn check (as digit strings).
card_numbers_in(text) := {number |
	some run in regex.find_n(`\b[0-9](?:[ -]?[0-9]){12,18}\b`, text, -1)
	number := regex.replace(run, `[ -]`, "")
	luhn_valid(number)
} if {
	is_string(text)
}

# --- IBANs (ISO 13616, mod-97 check) -------------------------------------------------------

# The compact form of an IBAN as written: spaces removed, letters uppercased. ASCII only, so
# that no lookalike letter becomes a Latin one (upper("ſ") is "S").
iban_compact(s) := upper(replace(s, " ", "")) if {
	is_string(s)
	regex.match(`^[A-Za-z0-9 ]+$`, s)
}

# `s` is an IBAN: a country code, two check digits and 11-30 letters or digits whose mod-97
# remainder is 1 (per-country lengths are not checked).
iban_valid(s) if {
	compact := iban_compact(s)
	regex.match(`^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$`, compact)
	rearranged := concat("", [substring(compact, 4, -1), substring(compact, 0, 4)])
	digits := concat("", [_iban_digits(c) | some c in split(rearranged, "")])
	_decimal(digits) % 97 == 1
}

_iban_letters := "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_iban_digits(c) := c if regex.match(`^[0-9]$`, c)

_iban_digits(c) := format_int(indexof(_iban_letters, c) + 10, 10) if regex.match(`^[A-Z]$`, c)

# A string of ASCII digits as a number (arbitrary precision; to_number refuses leading zeros).
_decimal(digits) := 0 if trim_left(digits, "0") == ""

_decimal(digits) := to_number(trim_left(digits, "0")) if trim_left(digits, "0") != ""

# The IBANs in free text (compact), written compact or in groups of four.
ibans_in(text) := {compact |
	some candidate in regex.find_n(`\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b`, text, -1)
	compact := iban_compact(candidate)
	iban_valid(compact)
} if {
	is_string(text)
}

# --- personal data in text -----------------------------------------------------------------

# Kinds of personal or payment data found in `text`: "card_number", "iban", "email".
pii_in(text) := {kind |
	some kind, found in {"card_number": card_numbers_in(text), "iban": ibans_in(text), "email": emails_in(text)}
	count(found) > 0
} if {
	is_string(text)
}
