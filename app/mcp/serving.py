"""Serving ``toolgate mcp``: Streamable HTTP under uvicorn behind a bearer gate, or stdio.

Over HTTP every request to the MCP endpoint must carry ``Authorization: Bearer <JWT>``
accepted by the same verifier as the HTTP API; anything else is answered ``401`` (structured
body, ``WWW-Authenticate``, with ``resource_metadata`` when authorization servers are set)
before the SDK sees it, ``503`` when the key set cannot be fetched. The OAuth
protected-resource metadata (RFC 9728), from the settings, is served without a token at
``/.well-known/oauth-protected-resource`` and at that path followed by the MCP path.
A request body is then read whole (at most the SDK's own limit, else ``413``) and must be
strict JSON as on the HTTP API (no duplicate keys, NaN or numbers a float cannot keep):
otherwise a JSON-RPC parse error (``400``, -32700) that does not echo the input. The SDK
parses it again: what is decided and what is forwarded is the same parsed message.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any
from urllib.parse import urlsplit

import anyio
import uvicorn
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.verifier import TokenVerifier
from app.bodies import parse_json
from app.decide.deps import Deps
from app.errors import ToolgateError, ValidationFailed
from app.mcp.server import build_server
from app.mcp.upstreams import Upstream, UpstreamPool
from app.settings import McpUpstream, Settings

log = logging.getLogger(__name__)


METADATA_PATH = "/.well-known/oauth-protected-resource"


class BearerGate:
    """ASGI middleware: HTTP requests pass only with a verified bearer token; the
    protected-resource metadata is served to anyone."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier, settings: Settings) -> None:
        self._app = app
        self._verifier = verifier
        self._settings = settings

    def _resource(self, scope: Scope) -> str:
        """The MCP endpoint's identifier: the setting, else the request's base URL and path."""
        if self._settings.mcp_resource_url:
            return self._settings.mcp_resource_url
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1") or "localhost"
        return f"{scope.get('scheme', 'http')}://{host}{self._settings.mcp_path}"

    def _metadata_url(self, scope: Scope) -> str:
        """Where the metadata of the resource is (RFC 9728 §3.1: the well-known path, then the resource's path)."""
        resource = urlsplit(self._resource(scope))
        return f"{resource.scheme}://{resource.netloc}{METADATA_PATH}{resource.path}".rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["path"] in (METADATA_PATH, METADATA_PATH + self._settings.mcp_path) and self._settings.mcp_authorization_servers:
            await _json(send, 200, self._metadata(scope))
            return
        authorization = tuple(value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization")
        try:
            await anyio.to_thread.run_sync(self._verifier.verify, authorization)
        except ToolgateError as error:
            await _error(send, error, self._challenge(scope, error))
            return
        if scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        try:
            body, trailing = await _read_body(receive, DEFAULT_MAX_REQUEST_BODY_SIZE)
        except ValidationFailed as error:
            await _error(send, error)
            return
        if body:
            try:
                parse_json(body)
            except ValidationFailed as error:
                await _parse_error(send, error.message)
                return
        await self._app(scope, _replay(body, trailing, receive), send)

    def _metadata(self, scope: Scope) -> dict[str, Any]:
        """The protected-resource metadata document (RFC 9728 §2)."""
        document: dict[str, Any] = {
            "resource": self._resource(scope),
            "authorization_servers": list(self._settings.mcp_authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if self._settings.mcp_scopes:
            document["scopes_supported"] = list(self._settings.mcp_scopes)
        return document

    def _challenge(self, scope: Scope, error: ToolgateError) -> dict[str, str]:
        """The error's headers, its ``WWW-Authenticate`` naming the metadata (RFC 9728 §5.1)."""
        headers = dict(error.headers)
        challenge = headers.get("WWW-Authenticate")
        if challenge is not None and self._settings.mcp_authorization_servers:
            headers["WWW-Authenticate"] = f'{challenge}, resource_metadata="{self._metadata_url(scope)}"'
        return headers


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, Message | None]:
    """The whole request body and the message that ended it early (a disconnect), if any.
    Raises ``ValidationFailed`` (413) past ``limit`` bytes."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), message
        body.extend(message.get("body", b""))
        if len(body) > limit:
            raise ValidationFailed("request body is too large", http_status=413)
        if not message.get("more_body", False):
            return bytes(body), None


def _replay(body: bytes, trailing: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that gives the app the body already read, then the rest of the connection."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if trailing is not None:
        pending.append(trailing)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _parse_error(send: Send, message: str) -> None:
    """A JSON-RPC parse error (-32700) for a body that is not strict JSON, without its input."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {message}"}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, error: ToolgateError, headers: dict[str, str] | None = None) -> None:
    await _json(send, error.http_status, error.to_body(uuid.uuid4().hex), headers if headers is not None else error.headers)


async def _json(send: Send, status: int, document: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    body = json.dumps(document).encode()
    sent = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    sent += [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": sent})
    await send({"type": "http.response.body", "body": body})


def build_pool(deps: Deps, upstreams: list[McpUpstream]) -> UpstreamPool:
    """The pool of ``upstreams`` with the timeouts of the settings."""
    settings = deps.settings
    return UpstreamPool([
        Upstream(spec, connect_timeout_s=settings.mcp_connect_timeout_ms / 1000, call_timeout_s=settings.mcp_call_timeout_ms / 1000)
        for spec in upstreams
    ])


def split_bind(bind: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port). Raises ``ValueError``."""
    host, sep, port = bind.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{bind!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


async def serve_http(deps: Deps, upstreams: list[McpUpstream], bind: str) -> None:
    """Serve Streamable HTTP on ``bind`` (``HOST:PORT``) at ``TOOLGATE_MCP_PATH`` until stopped."""
    host, port = split_bind(bind)
    async with build_pool(deps, upstreams) as pool:
        await pool.check()
        server = build_server(deps, pool)
        app: Any = server.streamable_http_app(streamable_http_path=deps.settings.mcp_path, host=host)
        config = uvicorn.Config(BearerGate(app, deps.verifier, deps.settings), host=host, port=port, log_level="warning",
                                lifespan="on", access_log=False)
        log.info("toolgate mcp on http://%s:%d%s", host, port, deps.settings.mcp_path,
                 extra={"event": "mcp_listening", "upstreams": [u.name for u in upstreams]})
        await uvicorn.Server(config).serve()


async def serve_stdio(deps: Deps, upstreams: list[McpUpstream]) -> None:
    """Serve one client over this process's stdin/stdout until it closes them."""
    async with build_pool(deps, upstreams) as pool:
        await pool.check()
        server = build_server(deps, pool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
