"""The MCP server side of ``toolgate mcp``: an SDK low-level ``Server`` whose ``tools/list``
shows the upstream tools the caller may use (``app.decide.capabilities``, listing the
upstreams again and so refreshing the tool cache) and whose ``tools/call`` goes through
``ToolCalls``. The SDK looks tools' input schemas up in the cache
(``get_tool_input_schema``), never by running ``tools/list`` for a call. Resources, prompts and
completions go through ``Catalog``; ``logging/setLevel`` is accepted (the gateway relays no
upstream log messages, so there is nothing to filter).

The caller of each message is authenticated on that message: over Streamable HTTP from its
``Authorization: Bearer`` header (the same JWT rules as the HTTP API), over stdio from the
configured token (``TOOLGATE_MCP_STDIO_TOKEN``). An outage of the policy while listing lists
nothing (``INTERNAL_ERROR``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

from app.decide import capabilities
from app.decide.deps import Deps
from app.errors import ToolgateError, Unauthenticated
from app.mcp.calls import Caller, ToolCalls
from app.mcp.catalog import Catalog
from app.mcp.upstreams import UpstreamPool, UpstreamTool

INSTRUCTIONS = (
    "toolgate decides every tool call before it reaches the tool: a denied call answers an error result "
    "with the policy's reason; a call that needs approval names its approval id and runs once an approver agrees."
)


def _version() -> str:
    try:
        return version("toolgate")
    except PackageNotFoundError:  # pragma: no cover - a source tree without the installed package
        return "0"


class Identity:
    """How the caller of a message is found: the HTTP request's ``Authorization`` values, or
    the configured stdio token when the message came without an HTTP request."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        token = deps.settings.mcp_stdio_token
        self._stdio = ("Bearer " + token.get_secret_value(),) if token is not None else ()

    async def caller(self, ctx: Any) -> Caller:
        """The verified caller. Raises ``MCPError`` (``INVALID_REQUEST``: no or a rejected
        token; ``INTERNAL_ERROR``: the key set cannot be fetched)."""
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        authorization = tuple(headers.getlist("authorization")) if headers is not None else self._stdio
        try:
            subject = await anyio.to_thread.run_sync(self._deps.verifier.verify, authorization)
        except Unauthenticated as exc:
            raise MCPError(INVALID_REQUEST, "authentication failed") from exc
        except ToolgateError as exc:
            raise MCPError(INTERNAL_ERROR, "authentication service unavailable", data={"code": exc.code}) from exc
        return Caller(subject=subject, authorization=authorization)


def build_server(deps: Deps, pool: UpstreamPool) -> Server[Any]:
    """The gateway's MCP server over ``pool``'s upstreams."""
    identity = Identity(deps)
    calls = ToolCalls(deps, pool)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        caller = await identity.caller(ctx)
        tools = await pool.refresh()
        usable = await anyio.to_thread.run_sync(_usable, deps, calls, caller, tools)
        return types.ListToolsResult(tools=[tool.listed() for tool in usable])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        caller = await identity.caller(ctx)
        return await calls.call(ctx, caller, params)

    catalog = Catalog(deps, pool)

    def as_caller(handle: Callable[[Caller, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
        """The SDK handler that authenticates the message, then lets ``handle`` answer it."""
        async def handler(ctx: Any, params: Any) -> Any:
            return await handle(await identity.caller(ctx), params)

        return handler

    async def set_level(caller: Caller, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    server: Server[Any] = Server(
        "toolgate", version=_version(), instructions=INSTRUCTIONS, get_tool_input_schema=pool.input_schema,
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=as_caller(catalog.list_resources),
        on_list_resource_templates=as_caller(catalog.list_templates), on_read_resource=as_caller(catalog.read_resource),
        on_subscribe_resource=as_caller(catalog.subscribe), on_unsubscribe_resource=as_caller(catalog.unsubscribe),
        on_list_prompts=as_caller(catalog.list_prompts), on_get_prompt=as_caller(catalog.get_prompt),
        on_completion=as_caller(catalog.complete),
    )
    # Registered directly: the constructor's on_set_logging_level warns that logging is
    # deprecated on 2026-07-28, which handshake-era clients still use.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, as_caller(set_level))
    return server


def _usable(deps: Deps, calls: ToolCalls, caller: Caller, tools: list[UpstreamTool]) -> list[UpstreamTool]:
    """The tools ``caller`` may use. Raises ``MCPError`` (``INTERNAL_ERROR``) when the policy
    cannot be asked: then nothing is listed."""
    facts = [
        capabilities.tool_facts(deps.contracts, tool.name, calls.version_of(tool.name), tool.definition.annotations,
                                tool.upstream.name)
        for tool in tools
    ]
    try:
        answers = capabilities.evaluate(deps.capability_engine, caller.subject, facts)
    except ToolgateError as exc:
        raise MCPError(INTERNAL_ERROR, "authorization service unavailable", data={"code": exc.code}) from exc
    return [tool for tool, answer in zip(tools, answers, strict=True) if answer.may]
