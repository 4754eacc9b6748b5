# Commands: runCommand v1 (command string).
#
# Only roles granted runCommand in data.roles may run commands (admin), and every command
# needs a human approval (default approver roles from data.approvals).
package tools.commands

import rego.v1

call_of(name) if {
	input.tool.registered == true
	input.tool.name == name
	input.tool.version == "1"
}

approval_required contains "running a shell command needs approval" if call_of("runCommand")
