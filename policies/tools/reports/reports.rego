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
#
# Written for speed (docs/policy-authors.md "Speed"): one regular expression bounds the month
# and the day, one to_number reads the digits, and every division is exact (a division with
# a remainder and floor cost OPA about ten times as much).

leap_year(y) if {
	y % 4 == 0
	y % 100 != 0
}

leap_year(y) if y % 400 == 0

# Days in February beyond 28: 1 in a leap year, else 0.
leap_days(y) := 1 if leap_year(y)

else := 0

# Days of each month in a common year, and days before the first of each month.
month_days := [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

month_offsets := [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334]

# Days since 0399-12-31 BCE (proleptic Gregorian) of a valid calendar date "YYYY-MM-DD"
# (only differences matter); undefined otherwise. The digits are read as the number
# 1YYYYMMDD (to_number rejects leading zeros); p counts whole years since an epoch 400
# years before year 0, so that it is never negative and p / 4, p / 100 and p / 400 round
# down by subtracting the remainder first.
day_number(s) := n if {
	is_string(s)
	regex.match(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`, s)
	x := to_number(concat("", ["1", replace(s, "-", "")]))
	d := x % 100
	m := ((x % 10000) - d) / 100
	y := ((x % 100000000) - (x % 10000)) / 10000
	leap := leap_days(y)
	d <= month_days[m - 1] + (leap * to_number(m == 2))
	p := y + 399
	leap_days_before := (((p - (p % 4)) / 4) - ((p - (p % 100)) / 100)) + ((p - (p % 400)) / 400)
	n := ((((365 * p) + leap_days_before) + month_offsets[m - 1]) + (leap * to_number(m > 2))) + d
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
