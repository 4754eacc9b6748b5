"""The upstream MCP servers ``toolgate mcp`` fronts: one long-lived SDK ``Client`` each, over
stdio (a command the gateway starts) or Streamable HTTP, connected lazily and again after a
failure.

    UpstreamPool.tools() -> [UpstreamTool]     every usable tool of every reachable upstream
    UpstreamPool.find(name) -> UpstreamTool    by the name the gateway lists it under
    Upstream.call_tool(name, arguments) -> CallToolResult

Errors: ``UpstreamUnavailable`` (nothing was sent: the upstream could not be reached) and
``UpstreamFailed`` (the call was sent and did not end with a valid result: a timeout, a
closed connection, an error response, or a result that is not a ``CallToolResult``; whether
the tool ran is then unknown unless ``sent_but_refused``).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from app.contracts.upstream_schema import usable_schema
from app.decide.stages import ToolAnnotations, ToolDefinition
from app.settings import McpUpstream
from app.vocabulary import TOOL_NAME_PATTERN

log = logging.getLogger(__name__)

_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
_MAX_PAGES = 100


class UpstreamUnavailable(Exception):
    """The upstream could not be reached; the call was not sent."""


class UpstreamFailed(Exception):
    """The call was sent and ended without a valid result. ``kind``: ``timeout``, ``closed``
    (the connection or process went away), ``error`` (a JSON-RPC error response: the
    upstream refused the call) or ``malformed`` (a result that is not a valid
    ``CallToolResult``). ``code`` is the JSON-RPC error code of an ``error``."""

    def __init__(self, kind: str, detail: str, *, code: int | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.code = code

    @property
    def sent_but_refused(self) -> bool:
        """True when the upstream answered that it did not run the call (an error response)."""
        return self.kind == "error"


def annotations_of(tool: types.Tool) -> ToolAnnotations:
    """The tool's behaviour hints, with the MCP specification's defaults for absent ones."""
    hints = tool.annotations
    defaults = ToolAnnotations()
    if hints is None:
        return defaults

    def pick(value: bool | None, default: bool) -> bool:
        return default if value is None else bool(value)

    return ToolAnnotations(
        read_only=pick(hints.read_only_hint, defaults.read_only),
        destructive=pick(hints.destructive_hint, defaults.destructive),
        idempotent=pick(hints.idempotent_hint, defaults.idempotent),
        open_world=pick(hints.open_world_hint, defaults.open_world),
    )


@dataclass(frozen=True)
class UpstreamTool:
    """One upstream tool as the gateway lists it: ``name`` is the upstream's name with the
    upstream's ``tool_prefix``; ``definition`` is what the decide pipeline is told."""

    name: str
    upstream: Upstream
    tool: types.Tool

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(input_schema=self.tool.input_schema, annotations=annotations_of(self.tool))

    def listed(self) -> types.Tool:
        """The tool as the gateway's ``tools/list`` shows it (under the gateway's name)."""
        return self.tool.model_copy(update={"name": self.name})


class Upstream:
    """One upstream server. ``connect_timeout_s`` bounds connecting and listing,
    ``call_timeout_s`` one ``tools/call``. The connection lives in a task of the pool's task
    group (``attach``), which also closes it, so the SDK's task groups are entered and left in
    one task."""

    def __init__(self, spec: McpUpstream, *, connect_timeout_s: float, call_timeout_s: float) -> None:
        self.spec = spec
        self.name = spec.name
        self._connect_timeout_s = connect_timeout_s
        self._call_timeout_s = call_timeout_s
        self._client: Client | None = None
        self._closed = anyio.Event()
        self._lock = anyio.Lock()
        self._tasks: anyio.abc.TaskGroup | None = None

    def attach(self, tasks: anyio.abc.TaskGroup) -> None:
        """Run connections in ``tasks`` (the pool's task group)."""
        self._tasks = tasks

    async def _transport_client(self, stack: AsyncExitStack) -> Client:
        spec = self.spec
        if spec.command is not None:
            params = StdioServerParameters(command=spec.command[0], args=spec.command[1:], env=spec.env, cwd=spec.cwd)
            return Client(params, cache=None)
        assert spec.url is not None
        headers = {name: value.get_secret_value() for name, value in spec.headers.items()}
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=self._call_timeout_s))
        return Client(streamable_http_client(spec.url, http_client=http), cache=None)

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold one connection until ``drop``; never raises (a failure leaves ``_client`` None)."""
        closed = self._closed = anyio.Event()
        started = False
        # The SDK's task groups open inside this scope; its deadline bounds connecting only.
        scope = anyio.CancelScope(deadline=anyio.current_time() + self._connect_timeout_s)
        try:
            with scope:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(await self._transport_client(stack))
                    scope.deadline = math.inf
                    self._client = client
                    task_status.started()
                    started = True
                    log.info("upstream %s connected", self.name, extra={"event": "mcp_upstream_connected", "upstream": self.name})
                    await closed.wait()
            if scope.cancelled_caught and not started:
                log.warning("upstream %s: no connection within %.1f s", self.name, self._connect_timeout_s,
                            extra={"event": "mcp_upstream_timeout", "upstream": self.name})
        except Exception as exc:  # noqa: BLE001 - any failure of an upstream connection only ends that connection
            log.warning("upstream %s: connection ended: %s", self.name, type(exc).__name__,
                        extra={"event": "mcp_upstream_failed", "upstream": self.name, "detail": str(exc)[:300]})
        finally:
            self._client = None
            if not started:
                task_status.started()

    async def client(self) -> Client:
        """The connected client, connecting first when needed. Raises ``UpstreamUnavailable``."""
        async with self._lock:
            if self._client is None:
                if self._tasks is None:
                    raise UpstreamUnavailable(f"upstream {self.name} is not attached to a running pool")
                await self._tasks.start(self._serve)
            if self._client is None:
                raise UpstreamUnavailable(f"upstream {self.name} is unreachable")
            return self._client

    async def drop(self) -> None:
        """End the connection (after a failure, or at shutdown); the next use connects again."""
        self._client = None
        self._closed.set()

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the upstream lists (all pages). Raises ``UpstreamUnavailable``."""
        client = await self.client()
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self._connect_timeout_s):
                for _ in range(_MAX_PAGES):
                    page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except (MCPError, TimeoutError, ValidationError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            await self.drop()
            raise UpstreamUnavailable(f"upstream {self.name} did not list its tools") from exc
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call ``name`` upstream. Raises ``UpstreamUnavailable`` (not sent) or
        ``UpstreamFailed``."""
        client = await self.client()
        try:
            with anyio.fail_after(self._call_timeout_s):
                return await client.call_tool(name, arguments, read_timeout_seconds=self._call_timeout_s)
        except TimeoutError as exc:
            await self.drop()
            raise UpstreamFailed("timeout", f"upstream {self.name} did not answer in time") from exc
        except MCPError as exc:
            if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                await self.drop()
                kind = "closed" if exc.code == CONNECTION_CLOSED else "timeout"
                raise UpstreamFailed(kind, f"upstream {self.name}: {exc.error.message}"[:300]) from exc
            raise UpstreamFailed("error", f"upstream {self.name} answered an error", code=exc.code) from exc
        except (ValidationError, RuntimeError, ValueError) as exc:
            raise UpstreamFailed("malformed", f"upstream {self.name} answered a malformed result") from exc
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream) as exc:
            await self.drop()
            raise UpstreamFailed("closed", f"upstream {self.name} went away") from exc


class UpstreamPool:
    """Every upstream of the gateway and the tools they offer, by the gateway's tool name. A
    name offered twice is kept for the first upstream that lists it (in configuration order)."""

    def __init__(self, upstreams: Sequence[Upstream]) -> None:
        self.upstreams = list(upstreams)
        self._by_name: dict[str, UpstreamTool] = {}
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> UpstreamPool:
        tasks = await self._stack.enter_async_context(anyio.create_task_group())
        for upstream in self.upstreams:
            upstream.attach(tasks)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for upstream in self.upstreams:
            await upstream.drop()
        await self._stack.aclose()

    async def tools(self) -> list[UpstreamTool]:
        """The usable tools of the reachable upstreams, fetched now. An unreachable upstream
        contributes nothing (logged); a tool whose name or input schema the gateway cannot use
        is left out (logged)."""
        found: dict[str, UpstreamTool] = {}
        for upstream in self.upstreams:
            try:
                listed = await upstream.list_tools()
            except UpstreamUnavailable:
                continue
            for tool in listed:
                name = upstream.spec.tool_prefix + tool.name
                if not _TOOL_NAME.match(name) or not usable_schema(tool.input_schema):
                    log.warning("upstream %s: tool %r left out (name or input schema unusable)", upstream.name, tool.name[:128],
                                extra={"event": "mcp_tool_unusable", "upstream": upstream.name})
                    continue
                if name in found:
                    log.warning("tool %s of upstream %s hidden by upstream %s", name, upstream.name, found[name].upstream.name,
                                extra={"event": "mcp_tool_duplicate", "upstream": upstream.name})
                    continue
                found[name] = UpstreamTool(name=name, upstream=upstream, tool=tool)
        self._by_name = found
        return list(found.values())

    async def find(self, name: str) -> UpstreamTool | None:
        """The tool listed as ``name`` (listing again once when it is not known yet)."""
        tool = self._by_name.get(name)
        if tool is None:
            await self.tools()
            tool = self._by_name.get(name)
        return tool
