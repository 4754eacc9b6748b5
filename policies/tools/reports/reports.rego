# METADATA
# title: Reports
# description: |
#   exportReport v1 (start_date, end_date as YYYY-MM-DD). Allowed for the roles granted it in
#   data.roles (support_agent, admin, auditor) when the range is ordered and at most
#   default_max_days long (per tenant limits.export_max_days). Days are computed with
#   integer calendar arithmetic, which, unlike time.parse_ns, cannot raise a builtin error
#   for any year 0000-9999.
# custom:
#   governs:
#     exportReport:
#       versions: ["1"]
#   approver_roles: default
package tools.reports

import data.toolgate.lib

governs["exportReport"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand"): none.
session_reads := set()

# The longest range, unless the tenant sets limits.export_max_days.
default_max_days := 366

max_days := lib.tenant_limit("export_max_days", default_max_days)

# --- calendar ------------------------------------------------------------------------------

# "0042" -> 42 (to_number rejects leading zeros).
digits(s) := 0 if {
	trim_left(s, "0") == ""
} else := to_number(trim_left(s, "0"))

leap_year(y) if {
	y % 4 == 0
	y % 100 != 0
}

leap_year(y) if y % 400 == 0

days_in_month(y, m) := 29 if {
	m == 2
	leap_year(y)
} else := 28 if {
	m == 2
} else := 30 if {
	m in {4, 6, 9, 11}
} else := 31

# Days before the first of each month in a common year.
month_offsets := [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334]

leap_day(y, m) := 1 if {
	m > 2
	leap_year(y)
} else := 0

# [year, month, day] of a valid calendar date "YYYY-MM-DD"; undefined otherwise.
date_parts(s) := [y, m, d] if {
	is_string(s)
	regex.match(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`, s)
	parts := split(s, "-")
	y := digits(parts[0])
	m := digits(parts[1])
	d := digits(parts[2])
	m >= 1
	m <= 12
	d >= 1
	d <= days_in_month(y, m)
}

# Days since 0400-12-31 BCE (proleptic Gregorian): only differences matter. p counts the whole
# years since then, never negative: OPA's floor of a quotient between -1 and 0 is 0, not -1
# (floor(-1 / 4) == 0), which made every date of year 0000 a day late.
day_number(s) := n if {
	[y, m, d] := date_parts(s)
	p := y + 399
	before_year := (((365 * p) + floor(p / 4)) - floor(p / 100)) + floor(p / 400)
	n := ((before_year + month_offsets[m - 1]) + leap_day(y, m)) + d
}

# --- rules ---------------------------------------------------------------------------------

start := object.get(lib.args, "start_date", null)

end := object.get(lib.args, "end_date", null)

start_day := day_number(start)

end_day := day_number(end)

span_days := end_day - start_day

deny contains {"rule": "start_date_invalid", "message": "start_date must be a calendar date YYYY-MM-DD"} if {
	not start_day
}

deny contains {"rule": "end_date_invalid", "message": "end_date must be a calendar date YYYY-MM-DD"} if {
	not end_day
}

deny contains {"rule": "range_reversed", "message": "end_date must not be before start_date"} if span_days < 0

deny contains {
	"rule": "range_too_long",
	"message": sprintf("report range of %v days is longer than %v days", [span_days, max_days]),
} if {
	span_days > max_days
}

allow contains {"rule": "range_within_limit", "message": sprintf("a range of at most %v days", [max_days])} if {
	span_days >= 0
	span_days <= max_days
}
