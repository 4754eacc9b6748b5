package toolgate.lib

# --- provenance (docs/policy-authors.md "Provenance") ---------------------------------------------
#
# Where a call's argument values came from: reads of input.provenance, which the gateway builds
# only for a family that declares "provenance" in its session_reads. A `pointer` is a JSON
# Pointer into the call's input ("/recipient", "/to/0"); its entry is
# {"kind", "sources": [{"tool", "pointer", "label", "decision_id"}], "in_prompt",
# "in_trusted_output"}, and a free-text argument also has the values extracted from it
# (input.provenance.extracted[pointer], each with the same members). Every helper is total:
# true, false/undefined or a value, never a builtin error. Without input.provenance every
# helper is undefined: a family that must fail closed checks provenance_built.

# The gateway built input.provenance for this call.
provenance_built if is_object(input.provenance)

# The provenance entries of the argument at `pointer` and of the values extracted from it.
_provenance_entries(pointer) := array.concat(
	[entry | entry := input.provenance.arguments[pointer]; is_object(entry)],
	[entry | some entry in _extracted(pointer); is_object(entry)],
)

_extracted(pointer) := values if {
	values := input.provenance.extracted[pointer]
	is_array(values)
} else := []

_sources(entry) := sources if {
	sources := entry.sources
	is_array(sources)
} else := []

# The argument at `pointer`, or a value extracted from it, matches a value of a reported output
# field labelled untrusted_content (a transaction's subject, a file, a web page, a message).
from_untrusted(pointer) if {
	some entry in _provenance_entries(pointer)
	some source in _sources(entry)
	source.label == "untrusted_content"
}

# The argument at `pointer` matches at least one reported output value, and every source it
# matches carries one of `labels` (a set or an array of label names).
only_from(pointer, labels) if {
	sources := _sources(input.provenance.arguments[pointer])
	count(sources) > 0
	every source in sources {
		source.label in labels
	}
}

# The user typed the argument at `pointer`: it occurs in the prompt that the authenticated
# caller passed (context.user_prompt). For a free-text argument: every value extracted from it
# does (and there is at least one).
user_supplied(pointer) if input.provenance.arguments[pointer].in_prompt == true

user_supplied(pointer) if {
	values := _extracted(pointer)
	count(values) > 0
	every value in values {
		value.in_prompt == true
	}
}

# The argument at `pointer` was named by a reported output field that is not untrusted content
# (the bank's own record of a payee, a directory's address): as trusted as that field.
from_trusted_output(pointer) if input.provenance.arguments[pointer].in_trusted_output == true

# A call of this conversation contributed `label` without values that can be traced (allowed but
# not reported, or a contract without field marks): the conversation-level rule of two applies.
untraced_label(label) if label in input.provenance.untraced_labels

# This conversation holds untrusted content: a reported result labelled it, or a call whose
# values cannot be traced did. An argument that neither the user nor a trusted result named may
# then come from it in a spelling no value was found in ("evil[.]example").
conversation_untrusted if {
	provenance_built
	session_labelled("untrusted_content")
}

conversation_untrusted if untraced_label("untrusted_content")
