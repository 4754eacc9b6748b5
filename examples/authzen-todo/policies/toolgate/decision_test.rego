# Tests of the Todo policy: one case per role and permission kind (the interop's own 43
# requests run through the gateway in tests/api/test_authzen_interop.py).
package toolgate_test

import data.toolgate

rick := "CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"

morty := "CiRmZDE2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"

beth := "CiRmZDM2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"

# The policy input of an AuthZEN evaluation the Todo backend asserts for `subject`.
evaluation(subject, permission, resource) := {
	"subject": {"id": subject, "tenant": "todo", "roles": [], "asserted_by": "todo-backend"},
	"tool": {"name": permission, "version": "1", "registered": false},
	"call": {"id": null, "input": {"resource": resource}},
}

todo_of(owner) := {"type": "todo", "id": "t-1", "properties": {"ownerID": owner}}

test_everyone_reads if {
	toolgate.decision.decision == "allow" with input as evaluation(beth, "can_read_todos", {"type": "todo", "id": "todo-1"})
	toolgate.decision.decision == "allow" with input as evaluation(beth, "can_read_user", {"type": "user", "id": "rick@the-citadel.com"})
}

test_a_viewer_neither_creates_nor_changes_its_own if {
	toolgate.decision.decision == "deny" with input as evaluation(beth, "can_create_todo", {"type": "todo", "id": "todo-1"})
	toolgate.decision.decision == "deny" with input as evaluation(beth, "can_update_todo", todo_of("beth@the-smiths.com"))
	toolgate.decision.decision == "deny" with input as evaluation(beth, "can_delete_todo", todo_of("beth@the-smiths.com"))
}

test_an_editor_changes_its_own_todos_only if {
	toolgate.decision.decision == "allow" with input as evaluation(morty, "can_create_todo", {"type": "todo", "id": "todo-1"})
	toolgate.decision.decision == "allow" with input as evaluation(morty, "can_update_todo", todo_of("morty@the-citadel.com"))
	toolgate.decision.decision == "allow" with input as evaluation(morty, "can_delete_todo", todo_of("morty@the-citadel.com"))
	toolgate.decision.decision == "deny" with input as evaluation(morty, "can_update_todo", todo_of("rick@the-citadel.com"))
	toolgate.decision.decision == "deny" with input as evaluation(morty, "can_delete_todo", todo_of("rick@the-citadel.com"))
}

test_admin_deletes_and_evil_genius_updates_any_todo if {
	toolgate.decision.decision == "allow" with input as evaluation(rick, "can_delete_todo", todo_of("morty@the-citadel.com"))
	toolgate.decision.decision == "allow" with input as evaluation(rick, "can_update_todo", todo_of("morty@the-citadel.com"))
}

test_an_unknown_subject_or_permission_is_denied if {
	toolgate.decision.decision == "deny" with input as evaluation("nobody", "can_read_todos", {"type": "todo", "id": "todo-1"})
	toolgate.decision.decision == "deny" with input as evaluation(rick, "can_drop_table", {"type": "todo", "id": "todo-1"})
}
