package tools.reports_test

import rego.v1

import data.tools.reports

auditor := {"id": "u-4", "tenant": "acme", "roles": ["auditor"]}

call_input(subject, start_date, end_date) := {
	"subject": subject,
	"tool": {"name": "exportReport", "version": "1", "registered": true, "mutating": false, "risk": "medium"},
	"call": {"id": null, "input": {"start_date": start_date, "end_date": end_date}},
	"context": {},
	"history": {},
	"approval": null,
	"request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
}

test_export_allowed_for_report_roles if {
	every role in ["support_agent", "admin", "auditor"] {
		subject := {"id": "u-1", "tenant": "acme", "roles": [role]}
		d := data.toolgate.decision with input as call_input(subject, "2026-01-01", "2026-03-31")
		d == {"decision": "allow", "reasons": ["allowed by policy"]}
	}
}

test_export_denied_for_other_roles if {
	every role in ["approver", "developer", "account_holder"] {
		subject := {"id": "u-1", "tenant": "acme", "roles": [role]}
		d := data.toolgate.decision with input as call_input(subject, "2026-01-01", "2026-03-31")
		d.decision == "deny"
	}
}

test_single_day_allowed if {
	reports.allow with input as call_input(auditor, "2026-11-29", "2026-11-29")
	reports.span_days == 0 with input as call_input(auditor, "2026-11-29", "2026-11-29")
}

test_range_at_limit_allowed if {
	# 2024 is a leap year: 2024-01-01 .. 2025-01-01 is 366 days.
	reports.span_days == 366 with input as call_input(auditor, "2024-01-01", "2025-01-01")
	reports.allow with input as call_input(auditor, "2024-01-01", "2025-01-01")
}

test_range_over_limit_denied if {
	reports.deny == {"report range of 367 days is longer than 366 days"} with input as call_input(auditor, "2024-01-01", "2025-01-02")
	not reports.allow with input as call_input(auditor, "2024-01-01", "2025-01-02")
}

test_long_range_denied_even_with_approval if {
	doc := object.union(call_input(auditor, "2000-01-01", "2026-01-01"), {"approval": {
		"approval_id": "ap-1",
		"approved": true,
		"approver": {"id": "u-9", "roles": ["approver"]},
	}})
	d := data.toolgate.decision with input as doc
	d.decision == "deny"
}

test_day_arithmetic if {
	cases := [
		["2023-02-28", "2023-03-01", 1],
		["2024-02-28", "2024-03-01", 2],
		["1900-02-28", "1900-03-01", 1],
		["2000-02-28", "2000-03-01", 2],
		["1999-12-31", "2000-01-01", 1],
		["0001-01-01", "9999-12-31", 3652058],
		["1970-01-01", "2026-11-29", 20786],
	]
	every c in cases {
		reports.span_days == c[2] with input as call_input(auditor, c[0], c[1])
	}
}

test_reversed_range_denied if {
	reports.deny == {"end_date must not be before start_date"} with input as call_input(auditor, "2026-03-01", "2026-02-28")
}

test_invalid_dates_denied if {
	every bad in ["2023-02-29", "2026-13-01", "2026-00-10", "2026-04-31", "2026-1-1", "26-01-01", "2026-01-01T00:00:00Z", "", 20260101, null] {
		reports.deny == {"start_date must be a calendar date YYYY-MM-DD"} with input as call_input(auditor, bad, "2026-01-01")
		reports.deny == {"end_date must be a calendar date YYYY-MM-DD"} with input as call_input(auditor, "2026-01-01", bad)
		not reports.allow with input as call_input(auditor, bad, "2026-01-01")
	}
}

test_leap_day_valid if {
	every ok in ["2024-02-29", "2000-02-29", "2026-01-31", "2026-04-30", "0000-01-01"] {
		count(reports.deny) == 0 with input as call_input(auditor, ok, ok)
	}
}

test_max_days_from_data if {
	reports.deny == {"report range of 31 days is longer than 30 days"} with input as call_input(auditor, "2026-01-01", "2026-02-01")
		with data.thresholds.export_max_days as 30
}

test_tenant_override_of_max_days if {
	reports.deny == {"report range of 8 days is longer than 7 days"} with input as call_input(auditor, "2026-01-01", "2026-01-09")
		with data.tenants as {"acme": {"export_max_days": 7}}
}

test_other_tools_untouched if {
	doc := object.union(call_input(auditor, "x", "y"), {"tool": {"name": "readFile"}})
	count(reports.deny) == 0 with input as doc
	not reports.allow with input as doc
}
