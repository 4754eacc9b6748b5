# METADATA
# title: Tickets
# description: |
#   createTicket v1 (title, description, priority low|normal|high, clientMutationId). Who may
#   create tickets is decided by role grants in data.roles (support_agent, admin); the
#   contract already validated the input, so a granted v1 call is allowed.
# custom:
#   governs:
#     createTicket:
#       versions: ["1"]
#   approver_roles: default
package tools.tickets

governs["createTicket"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand"): none.
session_reads := set()

allow contains {"rule": "valid_ticket", "message": "a ticket that matches its contract"}
