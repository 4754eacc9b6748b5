# METADATA
# title: Commands
# description: |
#   runCommand v1 (command string). Only roles granted runCommand in data.roles run
#   commands (admin), and every command needs a human approval (default approver roles,
#   data.approvals.default_approver_roles).
# custom:
#   governs:
#     runCommand:
#       versions: ["1"]
#   approver_roles: default
package tools.commands

governs["runCommand"] := {"versions": ["1"]}

# The session facts its rules read (docs/session.md "Facts on demand"): none.
session_reads := set()

approval_required contains {"rule": "shell_command", "message": "running a shell command needs approval"}
