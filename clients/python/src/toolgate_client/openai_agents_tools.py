"""OpenAI Agents SDK function tools guarded by toolgate: ``guard_function_tool(client, tool)``
(extra ``toolgate-client[openai-agents]``).

    agent = Agent(name="payments", tools=[guard_function_tool(client, process_payment)])

The guarded tool is the same ``FunctionTool`` (name, schema, settings) whose ``on_invoke_tool``
first asks the gateway with the SDK's tool call id, then runs as ``agent_tools.FrameworkCall``
says: a deny or a pending approval is the tool's output the model reads, never an exception
that ends the run. The tool runs with the input the contract normalized, through its own
``on_invoke_tool``. The gateway calls are synchronous: they run in a worker thread, off the
event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from toolgate_client.agent_tools import FrameworkCall, KeyFunction
from toolgate_client.client import ToolgateClient

#: The SDK's context and event loop of the invocation running in this worker thread.
_invocation: ContextVar[tuple[ToolContext[Any], asyncio.AbstractEventLoop]] = ContextVar("toolgate_agents_invocation")


def guard_function_tool(
    client: ToolgateClient,
    tool: FunctionTool,
    *,
    version: str = "1",
    key_field: str | None = None,
    idempotency_key: KeyFunction | None = None,
    approval_wait_s: float = 0.0,
) -> FunctionTool:
    """``tool`` guarded by the gateway (module docstring). Keys: ``agent_tools.FrameworkCall``
    (``agents:<tool_call_id>`` by default)."""
    invoke = tool.on_invoke_tool

    def run_tool(normalized: Mapping[str, Any]) -> Any:
        context, loop = _invocation.get()

        async def invoked() -> Any:
            return await invoke(context, json.dumps(dict(normalized)))

        return asyncio.run_coroutine_threadsafe(invoked(), loop).result()

    calls = FrameworkCall(
        client.guarded(run_tool, tool=tool.name, version=version), key_prefix="agents", key_field=key_field,
        idempotency_key=idempotency_key, approval_wait_s=approval_wait_s,
    )

    async def on_invoke_tool(context: ToolContext[Any], input_json: str) -> Any:
        _invocation.set((context, asyncio.get_running_loop()))
        return await asyncio.to_thread(calls, json.loads(input_json or "{}"), tool_call_id=context.tool_call_id)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)
