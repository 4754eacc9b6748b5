"""``toolgate mcp``: an MCP gateway (official MCP Python SDK) that asks the decide pipeline
before every ``tools/call`` (docs/mcp.md).

- ``upstreams``: the upstream MCP servers (stdio commands, Streamable HTTP URLs) and their tools.
- ``calls``: one ``tools/call``: decide, then forward and record, deny, or ask for approval.
- ``catalog``: resources, prompts and completions of the upstreams; reads decided like tool calls.
- ``results``: the tool results the gateway makes itself (denials, pending approvals, replays).
- ``server``: the SDK server: ``tools/list`` filtered by capability, ``tools/call``, identity.
- ``serving``: Streamable HTTP behind the bearer gate, or stdio.
- ``commands``: the ``toolgate mcp`` command.
"""
