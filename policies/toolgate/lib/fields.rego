package toolgate.lib

# --- safe access to the validated tool input (input.call.input) ----------------------------
#
# A rule that reads an optional field directly (`input.call.input.amount > 5`) is silently
# undefined when the field is absent, and a rule that should have fired does not. Read optional
# fields through these helpers with an explicit default. `key` is a field name or a path array
# (["address", "city"]).

# The tool input object ({} when it is missing or not an object).
default args := {}

args := input.call.input if is_object(input.call.input)

# The value at `key`, or `fallback` when it is absent.
arg(key, fallback) := object.get(args, key, fallback)

# The value at `key` when it is a string, else `fallback`.
string_arg(key, fallback) := value if {
	value := object.get(args, key, null)
	is_string(value)
} else := fallback

# The value at `key` when it is a number, else `fallback`.
number_arg(key, fallback) := value if {
	value := object.get(args, key, null)
	is_number(value)
} else := fallback

# The value at `key` when it is an array, else `fallback`.
array_arg(key, fallback) := value if {
	value := object.get(args, key, null)
	is_array(value)
} else := fallback

# `key` is present and not null.
has_arg(key) if object.get(args, key, null) != null

# --- trusted history (input.history, built by the gateway from its own decision log) --------

# Allowed calls of tool `name` in this conversation within the history window (0 when the
# gateway sent no history, e.g. a call without a conversation id).
conversation_calls(name) := n if {
	n := input.history.tools[name]
	is_number(n)
} else := 0
