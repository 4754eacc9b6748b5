# Tests of the capability document against the shipped role grants and families.
package toolgate.capability_test

import data.toolgate.capability
import data.toolgate.fixtures_test as fixtures

subject(roles) := fixtures.subject("u-1", "acme", roles)

tool(name) := {"name": name, "version": "1", "registered": true, "mutating": true, "risk": "high"}

question(roles, tool_facts) := {"subject": subject(roles), "tool": tool_facts}

test_granted_and_governed_tool_may_be_used if {
	capability.decision == "allow" with input as question(["support_agent"], tool("createTicket"))
}

test_tool_outside_the_roles_may_not if {
	answer := capability with input as question(["support_agent"], tool("deleteFile"))
	answer.decision == "deny"
	answer.reasons == ["role support_agent may not use tool deleteFile"]
}

test_subject_without_roles_may_not if {
	capability.decision == "deny" with input as question([], tool("readFile"))
}

test_version_no_family_governs_may_not if {
	answer := capability with input as question(["admin"], object.union(tool("readFile"), {"version": "2"}))
	answer.decision == "deny"
	answer.reasons == ["no policy family governs tool readFile version 2"]
}

test_granted_tool_without_family_may_not if {
	answer := capability with input as question(["admin"], tool("createTicket")) with data.tools as {}
	answer.decision == "deny"
	answer.reasons == ["no policy family governs tool createTicket version 1"]
}

test_unregistered_tool_needs_approval_for_dynamic_roles if {
	capability.decision == "user-approval" with input as question(["developer"], object.union(tool("anything"), {"registered": false}))
}

test_unregistered_tool_denied_otherwise if {
	capability.decision == "deny" with input as question(["support_agent"], object.union(tool("anything"), {"registered": false}))
}

test_namespace_must_match_the_family if {
	capability.decision == "deny" with input as question(["support_agent"], object.union(tool("createTicket"), {"namespace": "other"}))
}

test_unregistered_tool_denied_otherwise_says_why if {
	answer := capability with input as question(["support_agent"], object.union(tool("anything"), {"registered": false}))
	answer.reasons == ["no policy rule allows this tool"]
}

test_allowed_and_approval_answers_say_why if {
	allowed := capability with input as question(["support_agent"], tool("createTicket"))
	allowed.reasons == ["the subject's roles grant this tool"]
	asked := capability with input as question(["developer"], object.union(tool("anything"), {"registered": false}))
	asked.reasons == ["unregistered tool needs human approval"]
}

test_a_family_can_make_a_tool_unavailable_whatever_the_input if {
	no_feature := object.union(subject(["admin"]), {"tenant": "globex"})
	answer := capability with input as {"subject": no_feature, "tool": tool("deleteFile")}
	answer.decision == "deny"
	answer.reasons == ["deleting files is not enabled for tenant globex"]
	capability.decision == "allow" with input as question(["admin"], tool("deleteFile"))
}
