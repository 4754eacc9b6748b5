"""The upstreams' resources and prompts through ``toolgate mcp``, and the requests that go
with them (``completion/complete``, ``logging/setLevel``).

Reading is decided like a tool call: ``resources/read`` is the decide call of the tool
``resources.read`` with the input ``{"uri"}``, ``prompts/get`` the tool ``prompts.get`` with
``{"name", "arguments"}``, both read-only and named with their upstream
(``input.tool.upstream``), so contracts, families and policies govern them like any tool. The
lists show an upstream's resources, templates and prompts only to a caller who may use
``resources.read`` (or ``prompts.get``) on it at all (its capability); subscriptions and
completions go to the upstream that listed the resource or prompt.

Errors: a denied read is an ``INVALID_REQUEST`` error with the decision in ``data``; an
unknown resource or prompt ``INVALID_PARAMS``; an unreachable upstream, or a policy outage,
``INTERNAL_ERROR``. An upstream's own error answer passes through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client, MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST

from app.decide import capabilities
from app.decide.deps import Deps
from app.decide.stages import ToolAnnotations, ToolDefinition
from app.errors import ToolgateError
from app.mcp import results
from app.mcp.calls import Caller, run_decide
from app.mcp.upstreams import Upstream, UpstreamPool, UpstreamUnavailable

T = TypeVar("T")

READ_RESOURCE = "resources.read"
GET_PROMPT = "prompts.get"
_READ_ONLY = ToolAnnotations(read_only=True, destructive=False, idempotent=True, open_world=False)
_ANY_INPUT: dict[str, Any] = {"type": "object"}


def _definition(upstream: Upstream) -> ToolDefinition:
    return ToolDefinition(input_schema=_ANY_INPUT, annotations=_READ_ONLY, upstream=upstream.name)


class Catalog:
    """Resources, templates and prompts of every upstream, with the upstream each came from."""

    def __init__(self, deps: Deps, pool: UpstreamPool) -> None:
        self._deps = deps
        self._pool = pool
        #: resource URI, template URI, prompt name -> the upstream that listed it.
        self._owners: dict[str, Upstream] = {}

    async def _each(self, caller: Caller, tool: str, fetch: Callable[[Client], Awaitable[list[T]]],
                    key: Callable[[T], str]) -> list[T]:
        """What ``fetch`` lists on every reachable upstream on which ``caller`` may use
        ``tool``, remembering each item's upstream."""
        found: list[T] = []
        for upstream in self._pool.upstreams:
            if not await self._may(caller, tool, upstream):
                continue
            try:
                items = await upstream.forward(fetch)
            except (UpstreamUnavailable, MCPError):
                continue
            for item in items:
                self._owners[key(item)] = upstream
                found.append(item)
        return found

    async def _may(self, caller: Caller, tool: str, upstream: Upstream) -> bool:
        facts = capabilities.tool_facts(self._deps.contracts, tool, "1", _READ_ONLY, upstream.name)
        try:
            [answer] = await anyio.to_thread.run_sync(capabilities.evaluate, self._deps.capability_engine, caller.subject, [facts])
        except ToolgateError as exc:
            raise MCPError(INTERNAL_ERROR, "authorization service unavailable", data={"code": exc.code}) from exc
        return answer.may

    def _owner(self, name: str) -> Upstream:
        """The upstream that listed ``name``; the only upstream when there is one. Raises
        ``MCPError`` (``INVALID_PARAMS``)."""
        upstream = self._owners.get(name)
        if upstream is None and len(self._pool.upstreams) == 1:
            upstream = self._pool.upstreams[0]
        if upstream is None:
            raise MCPError(INVALID_PARAMS, "unknown resource or prompt: list it first")
        return upstream

    async def _decided(self, caller: Caller, tool: str, upstream: Upstream, arguments: dict[str, Any]) -> None:
        """Decide a read. Raises ``MCPError`` unless it is allowed."""
        body = {"tool": tool, "version": "1", "input": arguments, "context": {}}
        try:
            response = await run_decide(self._deps, caller, body, None, _definition(upstream))
        except ToolgateError as error:
            code = INTERNAL_ERROR if error.http_status >= 500 else INVALID_REQUEST
            raise MCPError(code, f"toolgate refused this request: {error.message}", data={"code": error.code}) from error
        if response.decision != "allow":
            reasons = "; ".join(response.reasons) or "no reason given"
            raise MCPError(INVALID_REQUEST, f"toolgate denied this request: {reasons}",
                           data={results.DECISION_META: results.decision_meta(response)})

    async def _forward(self, upstream: Upstream, request: Callable[[Client], Awaitable[T]]) -> T:
        try:
            return await upstream.forward(request)
        except UpstreamUnavailable as exc:
            raise MCPError(INTERNAL_ERROR, f"upstream {upstream.name} is unavailable", data={"retryable": True}) from exc

    # --- the request handlers (the first page of every upstream; no cursor) ----------------

    async def list_resources(self, caller: Caller, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        async def fetch(client: Client) -> list[types.Resource]:
            return list((await client.list_resources(cache_mode="refresh")).resources)

        return types.ListResourcesResult(resources=await self._each(caller, READ_RESOURCE, fetch, lambda r: str(r.uri)))

    async def list_templates(
        self, caller: Caller, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        async def fetch(client: Client) -> list[types.ResourceTemplate]:
            return list((await client.list_resource_templates(cache_mode="refresh")).resource_templates)

        templates = await self._each(caller, READ_RESOURCE, fetch, lambda t: t.uri_template)
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(self, caller: Caller, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        upstream = self._owner(uri)
        await self._decided(caller, READ_RESOURCE, upstream, {"uri": uri})
        return await self._forward(upstream, lambda client: client.read_resource(uri, cache_mode="refresh"))

    async def subscribe(self, caller: Caller, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        upstream = self._owner(uri)
        await self._decided(caller, READ_RESOURCE, upstream, {"uri": uri})
        return await self._forward(upstream, lambda client: client.session.subscribe_resource(uri))

    async def unsubscribe(self, caller: Caller, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        return await self._forward(self._owner(uri), lambda client: client.session.unsubscribe_resource(uri))

    async def list_prompts(self, caller: Caller, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        async def fetch(client: Client) -> list[types.Prompt]:
            return list((await client.list_prompts(cache_mode="refresh")).prompts)

        return types.ListPromptsResult(prompts=await self._each(caller, GET_PROMPT, fetch, lambda p: p.name))

    async def get_prompt(self, caller: Caller, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        upstream = self._owner(params.name)
        arguments = dict(params.arguments or {})
        await self._decided(caller, GET_PROMPT, upstream, {"name": params.name, "arguments": arguments})
        return await self._forward(upstream, lambda client: client.get_prompt(params.name, arguments))

    async def complete(self, caller: Caller, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        upstream = self._owner(ref.name if isinstance(ref, types.PromptReference) else ref.uri)
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        return await self._forward(upstream, lambda client: client.complete(ref, argument, context))
