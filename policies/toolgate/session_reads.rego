package toolgate

# --- which session facts a tool's families read (docs/session.md "Facts on demand") ----------
#
# Evaluated by the gateway with input {"tool": {"name", "version", "namespace"?, ...}}, once per
# tool and policy revision, before it builds input.session and input.history: the members that
# the families declaring input.tool.name read, as paths from `input` (sorted), each family's
# `session_reads` declaration ("*", every member, for a family without a well-formed one). Every
# family with a governs rule for the name counts, whatever versions and namespace it declares:
# the gateway must never build less than a consulted family reads, only ever more.
session_reads := sort({member |
	some family
	data.tools[family].governs[input.tool.name]
	some member in _declared_reads(family)
})

_declared_reads(family) := reads if {
	reads := data.tools[family].session_reads
	_member_paths(reads)
} else := {"*"}

_member_paths(reads) if {
	is_set(reads)
	every member in reads {
		is_string(member)
	}
}
