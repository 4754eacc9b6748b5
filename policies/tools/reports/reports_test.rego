package tools.reports_test

import data.toolgate.fixtures_test as fixtures

import data.tools.reports

export(who, start_date, end_date) := fixtures.call(who, "exportReport", {"start_date": start_date, "end_date": end_date})

test_export_allowed_for_report_roles if {
	every role in ["support_agent", "admin", "auditor"] {
		fixtures.expect(export(fixtures.subject("u-1", "acme", [role]), "2026-01-01", "2026-03-31"), {
			"decision": "allow",
			"reasons": ["allowed by policy"],
			"rules": {"reports.range_within_limit"},
		})
	}
}

test_export_denied_for_other_roles if {
	every role in ["approver", "developer", "account_holder"] {
		fixtures.expect(export(fixtures.subject("u-1", "acme", [role]), "2026-01-01", "2026-03-31"), {"decision": "deny"})
	}
}

test_single_day_allowed if {
	fixtures.expect(export(fixtures.auditor, "2026-11-29", "2026-11-29"), {"decision": "allow"})
	fixtures.same(reports.span_days, 0) with input as export(fixtures.auditor, "2026-11-29", "2026-11-29")
}

test_range_at_limit_allowed if {
	# 2024 is a leap year: 2024-01-01 .. 2025-01-01 is 366 days.
	fixtures.same(reports.span_days, 366) with input as export(fixtures.auditor, "2024-01-01", "2025-01-01")
	fixtures.expect(export(fixtures.auditor, "2024-01-01", "2025-01-01"), {"decision": "allow"})
}

test_range_over_limit_denied if {
	fixtures.expect(export(fixtures.auditor, "2024-01-01", "2025-01-02"), {
		"decision": "deny",
		"reasons": ["report range of 367 days is longer than 366 days"],
		"rules": {"reports.range_too_long"},
	})
}

test_long_range_denied_even_with_approval if {
	doc := fixtures.approved(export(fixtures.auditor, "2000-01-01", "2026-01-01"), "u-9", ["approver"])
	fixtures.expect(doc, {"decision": "deny"})
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
		["0000-12-31", "0001-01-01", 1],
		["0000-01-01", "0001-01-01", 366],
		["0000-02-28", "0000-03-01", 2],
		["0000-01-01", "9999-12-31", 3652424],
		["0399-12-31", "0400-01-01", 1],
		["2100-02-28", "2100-03-01", 1],
	]
	every c in cases {
		days := reports.span_days with input as export(fixtures.auditor, c[0], c[1])
		fixtures.same([c, days], [c, c[2]])
	}
}

test_reversed_range_denied if {
	fixtures.expect(export(fixtures.auditor, "2026-03-01", "2026-02-28"), {
		"reasons": ["end_date must not be before start_date"],
		"rules": {"reports.range_reversed"},
	})
}

test_invalid_dates_denied if {
	every bad in ["2023-02-29", "2026-13-01", "2026-00-10", "2026-04-31", "2026-1-1", "26-01-01", "2026-01-01T00:00:00Z", "", 20260101, null] {
		fixtures.expect(export(fixtures.auditor, bad, "2026-01-01"), {
			"reasons": ["start_date must be a calendar date YYYY-MM-DD"],
			"rules": {"reports.start_date_invalid"},
		})
		fixtures.expect(export(fixtures.auditor, "2026-01-01", bad), {
			"reasons": ["end_date must be a calendar date YYYY-MM-DD"],
			"rules": {"reports.end_date_invalid"},
		})
	}
}

test_missing_dates_denied if {
	fixtures.expect(fixtures.call(fixtures.auditor, "exportReport", {}), {
		"decision": "deny",
		"rules": {"reports.start_date_invalid", "reports.end_date_invalid"},
	})
}

test_leap_day_valid if {
	every ok in ["2024-02-29", "2000-02-29", "2026-01-31", "2026-04-30", "0000-01-01"] {
		fixtures.expect(export(fixtures.auditor, ok, ok), {"decision": "allow"})
	}
}

test_default_max_days_from_the_family if {
	fixtures.expect(export(fixtures.auditor, "2026-01-01", "2026-02-01"), {
		"reasons": ["report range of 31 days is longer than 30 days"],
	}) with reports.default_max_days as 30
}

test_tenant_limit_overrides_max_days if {
	fixtures.expect(export(fixtures.auditor, "2026-01-01", "2026-01-09"), {
		"reasons": ["report range of 8 days is longer than 7 days"],
	}) with data.tenants as {"acme": {"limits": {"export_max_days": 7}}}
}
