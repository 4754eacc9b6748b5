# METADATA
# title: The AuthZEN interop Todo policy
# description: |
#   The Todo application of the OpenID AuthZEN interop, written from the scenario's documented
#   rules (its payload specification): five permissions, asked by the Todo backend (the PEP)
#   as AuthZEN evaluations whose action name is the permission. toolgate maps such an
#   evaluation to the tool named after the action with input {"resource": {type, id,
#   properties}}; the subject is the user the PEP asserts (input.subject.id, its PID), whose
#   attributes come from data.users (the scenario's PIP). Roles: viewer reads; editor = viewer
#   + creates, and updates and deletes its own todos; admin = editor + deletes any todo;
#   evil_genius = editor + updates any todo.
package toolgate

import rego.v1

# The asserted user's attributes (email, roles); undefined for an unknown subject.
user := data.users[input.subject.id]

user_roles contains role if some role in user.roles

# Every role includes viewer; admin and evil_genius include editor.
viewer if some role in user_roles

editor if some role in (user_roles & {"editor", "admin", "evil_genius"})

todo := input.call.input.resource if input.call.input.resource.type == "todo"

# A todo the user owns: its ownerID (a property the PEP sends) is the user's email.
own_todo if todo.properties.ownerID == user.email

# "For simplicity, the policy always returns true" (GET /users/{userID}).
permitted contains "can_read_user"

permitted contains "can_read_todos" if viewer

permitted contains "can_create_todo" if editor

permitted contains "can_update_todo" if "evil_genius" in user_roles

permitted contains "can_update_todo" if {
	editor
	own_todo
}

permitted contains "can_delete_todo" if "admin" in user_roles

permitted contains "can_delete_todo" if {
	editor
	own_todo
}

default decision := {"decision": "deny", "reasons": ["the user does not hold this permission"]}

# METADATA
# description: |
#   The decision of one call: allow when the asserted user holds the permission named by the
#   action (the tool's name), else deny.
# entrypoint: true
# scope: document
decision := {"decision": "allow", "reasons": [sprintf("the user holds %s", [input.tool.name])]} if {
	input.tool.name in permitted
}
