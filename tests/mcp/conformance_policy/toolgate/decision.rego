# The policy of the MCP conformance run (tests/mcp/test_conformance.py): every tool, resource
# and prompt of the conformance suite's example server is allowed, so that what is measured is
# the gateway's transparency, not a decision.
package toolgate

import rego.v1

capability := {"decision": "allow", "reasons": ["the conformance run allows every tool"]}

decision := {"decision": "allow", "reasons": ["the conformance run allows every call"]}
