"""What an upstream sends back to the client while a call runs: its sampling and elicitation
requests and its log messages, relayed to the client session that made the call.

A shared upstream connection cannot tell which client a server-to-client request is for, so
a client session that declared ``sampling`` or ``elicitation`` gets connections of its own
(``Relays.route``): one per upstream, opened at its first call, closed when the gateway keeps
more than ``_SESSIONS`` of them (the oldest first) or stops. Everything the upstream sends on
such a connection goes to that session, related to the call being served (so that over
Streamable HTTP it rides the call's response stream). A request the client did not declare
the capability for is refused with an error the upstream sees (``INVALID_REQUEST``), never
answered in the client's place.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.client.session import ClientRequestContext
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

from app.mcp.upstreams import Upstream, UpstreamPool

#: Client sessions with connections of their own, at most.
_SESSIONS = 100


def _declares(ctx: Any, capabilities: types.ClientCapabilities) -> bool:
    return bool(ctx.session.check_client_capability(capabilities))


def wants_relay(ctx: Any) -> bool:
    """Whether the client of ``ctx`` can answer an upstream's sampling or elicitation."""
    return _declares(ctx, types.ClientCapabilities(sampling=types.SamplingCapability())) or _declares(
        ctx, types.ClientCapabilities(elicitation=types.ElicitationCapability())
    )


class Relay:
    """The client side of one upstream connection of one client session: passes the upstream's
    requests and log messages to the request ``serving`` names."""

    def __init__(self) -> None:
        self.serving: Any = None

    async def _ask(self, capability: types.ClientCapabilities, request: types.ServerRequest,
                   result: type[Any]) -> Any:
        ctx = self.serving
        if ctx is None or not _declares(ctx, capability):
            return types.ErrorData(code=INVALID_REQUEST, message=f"the client does not accept {request.method}")
        try:
            return await ctx.session.send_request(request, result, metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
        except MCPError as exc:
            return exc.error
        except Exception:  # noqa: BLE001 - a client that answers nothing usable: the upstream gets an error, not a hang
            return types.ErrorData(code=INTERNAL_ERROR, message=f"the client did not answer {request.method}")

    async def sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        return await self._ask(types.ClientCapabilities(sampling=types.SamplingCapability()),
                               types.CreateMessageRequest(params=params), types.CreateMessageResult)

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        return await self._ask(types.ClientCapabilities(elicitation=types.ElicitationCapability()),
                               types.ElicitRequest(params=params), types.ElicitResult)

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        ctx = self.serving
        if ctx is not None:
            await ctx.session.send_notification(types.LoggingMessageNotification(params=params), related_request_id=ctx.request_id)


class Relays:
    """The connections of the client sessions that get their own (see the module docstring)."""

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool
        self._kept: OrderedDict[tuple[str, str], tuple[Upstream, Relay]] = OrderedDict()

    async def route(self, session: str, shared: Upstream, ctx: Any) -> tuple[Upstream, Relay | None]:
        """The connection a call of client session ``session`` to ``shared``'s upstream goes
        through: the shared one, or (when the client can answer the upstream's requests) the
        session's own, with its relay."""
        if not wants_relay(ctx):
            return shared, None
        key = (session, shared.name)
        kept = self._kept.get(key)
        if kept is None:
            relay = Relay()
            kept = (self._pool.open(shared.spec, relay.sampling, relay.elicitation, relay.logging), relay)
            self._kept[key] = kept
            while len(self._kept) > _SESSIONS:
                _, (oldest, _) = self._kept.popitem(last=False)
                await oldest.drop()
        self._kept.move_to_end(key)
        return kept
