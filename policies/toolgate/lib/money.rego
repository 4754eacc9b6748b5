package toolgate.lib

# --- money ---------------------------------------------------------------------------------
#
# Amounts are JSON numbers. OPA's arithmetic and comparisons on numbers are exact decimals
# (0.1 + 0.2 == 0.3), so a threshold compares as written; these helpers add the checks a
# policy needs around that: a number at all, positive, and no more decimals than the
# currency has (a fraction of a cent is not an amount).

# Decimals of ISO 4217 currencies that do not have 2 (the rest have 2).
currency_decimals := {
	"BHD": 3, "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "IQD": 3, "ISK": 0, "JOD": 3, "JPY": 0,
	"KMF": 0, "KRW": 0, "KWD": 3, "LYD": 3, "OMR": 3, "PYG": 0, "RWF": 0, "TND": 3, "UGX": 0,
	"UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
}

# Decimals of `currency` (2 unless listed in currency_decimals).
decimals_of(currency) := object.get(currency_decimals, currency, 2)

_scale := {0: 1, 1: 10, 2: 100, 3: 1000, 4: 10000}

# `amount` is a number with at most `decimals` (0-4) decimal places.
amount_has_decimals(amount, decimals) if {
	is_number(amount)
	scaled := amount * _scale[decimals]
	scaled == floor(scaled)
}

# `amount` in minor units (cents for 2 decimals), rounded half away from zero.
minor_units(amount, decimals) := round(amount * _scale[decimals]) if is_number(amount)

# `amount` is a number greater than zero.
positive_amount(amount) if {
	is_number(amount)
	amount > 0
}

# `amount` is a positive number with at most `decimals` decimal places.
valid_amount(amount, decimals) if {
	positive_amount(amount)
	amount_has_decimals(amount, decimals)
}

# `amount` is a number above `threshold` (a number). False for anything that is not a number,
# so combine it with positive_amount in a deny rule.
amount_over(amount, threshold) if {
	is_number(amount)
	is_number(threshold)
	amount > threshold
}

# `amount` is a number of at most `threshold`.
amount_within(amount, threshold) if {
	is_number(amount)
	is_number(threshold)
	amount <= threshold
}

# The sum of the numbers in `amounts` (other members ignored).
amounts_total(amounts) := sum([a | some a in amounts; is_number(a)])
