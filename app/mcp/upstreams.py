"""The upstream MCP servers ``toolgate mcp`` fronts: one long-lived SDK ``Client`` each, over
stdio (a command the gateway starts) or Streamable HTTP, connected lazily and again after a
failure.

    UpstreamPool.refresh() -> [UpstreamTool]   list every upstream now (``tools/list``)
    UpstreamPool.find(name) -> UpstreamTool    from the tool cache; a miss or a stale cache lists again
    UpstreamPool.input_schema(name) -> dict    from the cache only (the SDK's header validation)
    Upstream.call_tool(name, arguments) -> CallToolResult

The tool cache is filled by ``refresh`` (each gateway ``tools/list``, and at start) and marked
stale by an upstream's ``notifications/tools/list_changed``, so a call never lists the
upstreams again unless its tool is unknown. A name offered by two upstreams is ambiguous: it
is listed under neither (``collisions``; ``toolgate mcp`` refuses to start on one), never
resolved by order.

Errors: ``UpstreamUnavailable`` (nothing was sent: the upstream could not be reached, or an
HTTP upstream refused the connection of the call itself) and ``UpstreamFailed`` (the call was
sent and did not end with a valid result: a timeout, a closed connection, an error response,
or a result that is not a ``CallToolResult``; whether the tool ran is then unknown unless
``sent_but_refused``).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from app.contracts.upstream_schema import usable_schema
from app.decide.stages import ToolAnnotations, ToolDefinition
from app.settings import McpUpstream
from app.vocabulary import TOOL_NAME_PATTERN

log = logging.getLogger(__name__)

T = TypeVar("T")

_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
_MAX_PAGES = 100


class UpstreamUnavailable(Exception):
    """The upstream could not be reached; the call was not sent."""


class AmbiguousTools(Exception):
    """Two upstreams offer a tool of the same name, and no tool prefix keeps them apart."""

    def __init__(self, collisions: dict[str, list[str]]) -> None:
        names = "; ".join(f"{name} (upstreams {' and '.join(upstreams)})" for name, upstreams in sorted(collisions.items()))
        super().__init__(f"tools offered by more than one upstream: {names}; give the upstreams a tool prefix (NAME:PREFIX=...)")


@dataclass
class _Attempt:
    """One ``tools/call`` sent upstream; ``unsent`` once its HTTP connection was refused."""

    unsent: bool = False


#: The call being sent in this task; the SDK's transport runs the POST in a copy of the
#: caller's context, so the refused connection is attributed to the call that made it.
_ATTEMPT: ContextVar[_Attempt | None] = ContextVar("toolgate_mcp_attempt", default=None)


class _ConnectRefusals(httpx2.AsyncBaseTransport):
    """An HTTP transport that marks the current call unsent when its connection is refused
    (``ConnectError``: no byte of the request left this process)."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.ConnectError:
            attempt = _ATTEMPT.get()
            if attempt is not None:
                attempt.unsent = True
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


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
        return ToolDefinition(input_schema=self.tool.input_schema, annotations=annotations_of(self.tool),
                              upstream=self.upstream.name)

    def listed(self) -> types.Tool:
        """The tool as the gateway's ``tools/list`` shows it (under the gateway's name)."""
        return self.tool.model_copy(update={"name": self.name})


class Upstream:
    """One upstream server. ``connect_timeout_s`` bounds connecting and listing,
    ``call_timeout_s`` one ``tools/call``. The connection lives in a task of the pool's task
    group (``attach``), which also closes it, so the SDK's task groups are entered and left in
    one task."""

    def __init__(self, spec: McpUpstream, *, connect_timeout_s: float, call_timeout_s: float,
                 callbacks: dict[str, Any] | None = None) -> None:
        self.spec = spec
        #: The SDK client's callbacks for what the upstream sends on its own (sampling, ...).
        self._callbacks = callbacks or {}
        self.name = spec.name
        self._connect_timeout_s = connect_timeout_s
        self._call_timeout_s = call_timeout_s
        self._client: Client | None = None
        self._closed = anyio.Event()
        self._lock = anyio.Lock()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._on_tools_changed: Callable[[], None] = lambda: None

    def attach(self, tasks: anyio.abc.TaskGroup, on_tools_changed: Callable[[], None]) -> None:
        """Run connections in ``tasks`` (the pool's task group); ``on_tools_changed`` is called
        when the upstream says its tool list changed."""
        self._tasks = tasks
        self._on_tools_changed = on_tools_changed

    async def _notified(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            log.info("upstream %s: its tool list changed", self.name, extra={"event": "mcp_tools_changed", "upstream": self.name})
            self._on_tools_changed()

    async def _transport_client(self, stack: AsyncExitStack) -> Client:
        """The SDK client of the upstream, on a handshake session (``legacy``): the upstream's
        spontaneous notifications (``tools/list_changed``) reach it without a subscription."""
        spec = self.spec
        if spec.command is not None:
            params = StdioServerParameters(command=spec.command[0], args=spec.command[1:], env=spec.env, cwd=spec.cwd)
            return Client(params, cache=None, message_handler=self._notified, mode="legacy", **self._callbacks)
        assert spec.url is not None
        headers = {name: value.get_secret_value() for name, value in spec.headers.items()}
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=self._call_timeout_s, transport=_ConnectRefusals())
        )
        return Client(streamable_http_client(spec.url, http_client=http), cache=None, message_handler=self._notified,
                      mode="legacy", **self._callbacks)

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

    async def forward(self, request: Callable[[Client], Awaitable[T]]) -> T:
        """Send one request that changes nothing (a listing, a read, a completion) through the
        connected client, within the call timeout. Raises ``UpstreamUnavailable`` (not
        connected, or no answer in time) or the SDK's ``MCPError`` (the upstream's error)."""
        client = await self.client()
        try:
            with anyio.fail_after(self._call_timeout_s):
                return await request(client)
        except (TimeoutError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            await self.drop()
            raise UpstreamUnavailable(f"upstream {self.name} did not answer") from exc

    async def call_tool(
        self, name: str, arguments: dict[str, Any], progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        """Call ``name`` upstream (``progress`` receives its progress notifications). Raises
        ``UpstreamUnavailable`` (not sent) or ``UpstreamFailed``."""
        client = await self.client()
        attempt = _Attempt()
        token = _ATTEMPT.set(attempt)
        try:
            return await self._sent(client, name, arguments, progress)
        except UpstreamFailed as exc:
            if attempt.unsent:
                raise UpstreamUnavailable(f"upstream {self.name} refused the connection") from exc
            raise
        finally:
            _ATTEMPT.reset(token)

    async def _sent(
        self, client: Client, name: str, arguments: dict[str, Any], progress: ProgressFnT | None
    ) -> types.CallToolResult:
        try:
            with anyio.fail_after(self._call_timeout_s):
                return await client.call_tool(name, arguments, read_timeout_seconds=self._call_timeout_s,
                                              progress_callback=progress)
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
    """Every upstream of the gateway and the tools they offer, cached by the gateway's tool
    name (see the module docstring)."""

    def __init__(self, upstreams: Sequence[Upstream]) -> None:
        self.upstreams = list(upstreams)
        self._tasks: anyio.abc.TaskGroup | None = None
        self._opened: list[Upstream] = []
        self._by_name: dict[str, UpstreamTool] = {}
        #: Names offered by more than one upstream, with the upstreams offering them.
        self.collisions: dict[str, list[str]] = {}
        #: Whether an upstream could not be listed at the last refresh (its tools are unknown).
        self.incomplete = True
        self._stale = True
        self._refreshing = anyio.Lock()
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> UpstreamPool:
        tasks = self._tasks = await self._stack.enter_async_context(anyio.create_task_group())
        for upstream in self.upstreams:
            upstream.attach(tasks, self._tools_changed)
        return self

    def open(self, spec: McpUpstream, sampling: Callable[..., Awaitable[Any]], elicitation: Callable[..., Awaitable[Any]],
             logging_callback: Callable[..., Awaitable[None]]) -> Upstream:
        """Another connection to the upstream of ``spec`` (same timeouts), whose server-to-client
        requests and log messages go to the given callbacks; connected at its first use, ended
        by ``drop`` or when the pool closes."""
        first = next(u for u in self.upstreams if u.spec == spec)
        upstream = Upstream(spec, connect_timeout_s=first._connect_timeout_s, call_timeout_s=first._call_timeout_s,
                            callbacks={"sampling_callback": sampling, "elicitation_callback": elicitation,
                                       "logging_callback": logging_callback})
        assert self._tasks is not None
        upstream.attach(self._tasks, self._tools_changed)
        self._opened.append(upstream)
        return upstream

    async def __aexit__(self, *exc: object) -> None:
        for upstream in [*self.upstreams, *self._opened]:
            await upstream.drop()
        await self._stack.aclose()

    def _tools_changed(self) -> None:
        self._stale = True

    async def refresh(self) -> list[UpstreamTool]:
        """List every upstream now and cache the usable tools. An unreachable upstream
        contributes nothing (logged, ``incomplete``); a tool whose name or input schema the
        gateway cannot use is left out (logged); a name two upstreams offer is left out for
        both (logged, ``collisions``)."""
        async with self._refreshing:
            self._stale = False
            offered: dict[str, list[UpstreamTool]] = {}
            incomplete = False
            for upstream in self.upstreams:
                try:
                    listed = await upstream.list_tools()
                except UpstreamUnavailable:
                    incomplete = True
                    continue
                for tool in listed:
                    name = upstream.spec.tool_prefix + tool.name
                    if not _TOOL_NAME.match(name) or not usable_schema(tool.input_schema):
                        log.warning("upstream %s: tool %r left out (name or input schema unusable)", upstream.name, tool.name[:128],
                                    extra={"event": "mcp_tool_unusable", "upstream": upstream.name})
                        continue
                    offered.setdefault(name, []).append(UpstreamTool(name=name, upstream=upstream, tool=tool))
            collisions = {name: [t.upstream.name for t in tools] for name, tools in offered.items() if len(tools) > 1}
            for name, upstreams in collisions.items():
                log.error("tool %s is offered by upstreams %s: listed under neither (give them a tool prefix)",
                          name, " and ".join(upstreams), extra={"event": "mcp_tool_collision", "upstreams": upstreams})
            self._by_name = {name: tools[0] for name, tools in offered.items() if name not in collisions}
            self.collisions = collisions
            self.incomplete = incomplete
            return list(self._by_name.values())

    async def check(self) -> None:
        """List every upstream once (at start). Raises ``AmbiguousTools`` when two offer a tool
        of the same name."""
        await self.refresh()
        if self.collisions:
            raise AmbiguousTools(self.collisions)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The cached input schema of the tool listed as ``name``, None when it is not cached."""
        tool = self._by_name.get(name)
        return tool.tool.input_schema if tool is not None else None

    async def find(self, name: str) -> UpstreamTool | None:
        """The tool listed as ``name``: from the cache, listing again first when the cache is
        stale or does not know the name."""
        tool = None if self._stale else self._by_name.get(name)
        if tool is None:
            await self.refresh()
            tool = self._by_name.get(name)
        return tool
