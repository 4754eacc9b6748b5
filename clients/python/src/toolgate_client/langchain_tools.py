"""LangChain tools (and so LangGraph's ``ToolNode`` and prebuilt agents) guarded by toolgate:
``guard_langchain_tool(client, tool)`` (extra ``toolgate-client[langchain]``).

    from langgraph.prebuilt import ToolNode
    node = ToolNode([guard_langchain_tool(client, create_ticket, key_field="clientMutationId")])

The guarded tool has the same name, description and arguments; each call is decided by the
gateway with the model's tool call id, and runs as ``agent_tools.FrameworkCall`` says: a deny
or a pending approval is the tool's result (a ``ToolMessage`` the model reads), never an
exception that ends the run. ``interrupt=True`` pauses a LangGraph run at a pending approval
instead (``langgraph.types.interrupt`` with ``{"approval_id", "reason", "tool"}``; needs a
checkpointer): resumed with any value, the tool reads the approval (waiting up to
``approval_wait_s``) and runs once it is approved. The tool runs with the input the contract
normalized, through its own ``invoke``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, create_model

from toolgate_client.agent_tools import FrameworkCall, KeyFunction
from toolgate_client.client import ToolgateClient
from toolgate_client.guarded import PendingApproval


def _interrupt(pending: PendingApproval) -> object:
    from langgraph.types import interrupt  # only with interrupt=True: LangGraph is then installed

    return interrupt({"approval_id": pending.approval_id, "reason": pending.request_reason, "tool": pending.tool.tool})


def guard_langchain_tool(
    client: ToolgateClient,
    tool: BaseTool,
    *,
    version: str = "1",
    key_field: str | None = None,
    idempotency_key: KeyFunction | None = None,
    interrupt: bool = False,
    approval_wait_s: float = 0.0,
) -> StructuredTool:
    """``tool`` guarded by the gateway (module docstring). ``tool.args_schema`` must be a
    pydantic model (tools made with ``@tool`` or ``StructuredTool`` have one). Keys:
    ``agent_tools.FrameworkCall`` (``lc:<tool_call_id>`` by default)."""
    schema = tool.args_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise TypeError(f"tool {tool.name} has no pydantic args_schema to guard")
    calls = FrameworkCall(
        client.guarded(lambda normalized: tool.invoke(dict(normalized)), tool=tool.name, version=version),
        key_prefix="lc", key_field=key_field, idempotency_key=idempotency_key,
        on_approval=_interrupt if interrupt else None, approval_wait_s=approval_wait_s,
    )
    guarded_schema = create_model(
        f"{schema.__name__}Guarded", __base__=schema,
        tool_call_id=(Annotated[str, InjectedToolCallId], ...),
    )

    def run(tool_call_id: str, **arguments: Any) -> Any:
        tool_input: Mapping[str, Any] = {
            name: value.model_dump(mode="json") if isinstance(value, BaseModel) else value
            for name, value in arguments.items()
        }
        return calls(tool_input, tool_call_id=tool_call_id)

    return StructuredTool.from_function(
        func=run, name=tool.name, description=tool.description, args_schema=guarded_schema,
    )
