package toolgate.lib

# --- session (docs/session.md) -----------------------------------------------------------
#
# Session helpers of the policy library: reads of input.session (docs/session.md) and builders
# of the limits and rate limits a decision asks the gateway to enforce. Every helper is total:
# for any input it is true, false/undefined or a value, and never raises a builtin error.
# `scope` is "conversation" (this call's conversation) or "subject" (every conversation of the
# verified subject); `window` a window name of input.session.windows ("1m", "1h", "24h").

# The name of the longest window of input.session (the whole retention), e.g. "24h".
session_longest_window := name if {
	windows := input.session.windows
	longest := max([seconds | some seconds in windows; is_number(seconds)])
	some name, seconds in windows
	seconds == longest
}

# Executed calls of `tool` within `scope` over the whole session (the longest window).
session_calls_in_session(scope, tool) := n if {
	n := session_calls(scope, session_longest_window, tool)
} else := 0

# Executed calls of `tool` in `window` within `scope` (0 when there is none).
session_calls(scope, window, tool) := n if {
	n := input.session[scope].calls[window][tool]
	is_number(n)
} else := 0

# Denied calls of `tool` in `window` within `scope`.
session_denied(scope, window, tool) := n if {
	n := input.session[scope].denied[window][tool]
	is_number(n)
} else := 0

# The sum of the amount field `pointer` (e.g. "/amount") of `tool`'s executed calls.
session_amount(scope, window, tool, pointer) := n if {
	n := input.session[scope].amounts[window][tool][pointer]
	is_number(n)
} else := 0

# Distinct counterparties of executed calls in `window` within `scope`.
session_counterparties(scope, window) := count(values) if {
	values := input.session[scope].counterparties[window]
	is_array(values)
} else := 0

# A completed result in this conversation carried `label` (untrusted_content, private_data, ...).
session_labelled(label) if label in input.session.conversation.labels

# `value` was named by a trusted tool result in this conversation.
trusted_counterparty(value) if value in input.session.conversation.trusted_counterparties

# This conversation read `resource` before (a read-only tool's resource field).
read_before(resource) if resource in input.session.conversation.resources.read

# A call of `tool` was allowed after a verified approval in this conversation.
approved_before(tool) if tool in input.session.conversation.approved_tools

# The "rule of two": this call is an external channel (its output label external_comms) in a
# conversation that holds untrusted content and private data. A person must approve.
rule_of_two if {
	"external_comms" in input.tool.output_labels
	session_labelled("untrusted_content")
	session_labelled("private_data")
}

# The session was cut short (more events in the window than the gateway reads): counts are
# lower bounds. A rule over a large count should fail closed on it.
session_truncated if input.session.truncated == true

# --- what the gateway enforces (the decision's `limits` and `rate_limits`) ------------------

# At most `maximum` allowed calls within `window_s` seconds per `scope` ("subject" or
# "conversation"), reserved atomically when the call is allowed.
count_limit(id, scope, window_s, maximum) := {"id": id, "scope": scope, "window_s": window_s, "max": maximum}

# At most `maximum` of the input's `amount_field` (a JSON Pointer) within `window_s` per `scope`.
budget_limit(id, scope, window_s, maximum, amount_field) := {
	"id": id, "scope": scope, "window_s": window_s, "max": maximum, "amount_field": amount_field,
}

# Rate limits from policy data (data.rate_limits), each {"count": n, "per_s": s}:
#   tenants.<tenant>: every call of the tenant;  subject: every call of each subject;
#   tools.<tool>: each subject's calls of that tool.
# An entry that is not an object is passed on as it is, so that the gateway refuses the
# decision ("no policy decision", logged) instead of dropping a limit meant to hold.
rate_limits contains _rate("data.tenant", "tenant", rule) if rule := data.rate_limits.tenants[input.subject.tenant]

rate_limits contains _rate("data.subject", "subject", rule) if rule := data.rate_limits.subject

rate_limits contains _rate(concat(".", ["data.tool", input.tool.name]), "subject", rule) if {
	rule := data.rate_limits.tools[input.tool.name]
}

_rate(id, scope, rule) := {
	"id": id, "scope": scope,
	"count": object.get(rule, "count", null), "per_s": object.get(rule, "per_s", null),
} if {
	is_object(rule)
} else := {"id": id, "scope": scope, "malformed": rule}
