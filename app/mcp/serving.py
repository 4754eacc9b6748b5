"""Serving ``toolgate mcp``: Streamable HTTP under uvicorn behind a bearer gate, or stdio.

Over HTTP every request to the MCP endpoint must carry ``Authorization: Bearer <JWT>``
accepted by the same verifier as the HTTP API; anything else is answered ``401`` (structured
body, ``WWW-Authenticate``) before the SDK sees it, ``503`` when the key set cannot be fetched.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import anyio
import uvicorn
from mcp.server.stdio import stdio_server
from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth.verifier import TokenVerifier
from app.decide.deps import Deps
from app.errors import ToolgateError
from app.mcp.server import build_server
from app.mcp.upstreams import Upstream, UpstreamPool
from app.settings import McpUpstream

log = logging.getLogger(__name__)


class BearerGate:
    """ASGI middleware: HTTP requests pass only with a verified bearer token."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier) -> None:
        self._app = app
        self._verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        authorization = tuple(value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization")
        try:
            await anyio.to_thread.run_sync(self._verifier.verify, authorization)
        except ToolgateError as error:
            await _error(send, error)
            return
        await self._app(scope, receive, send)


async def _error(send: Send, error: ToolgateError) -> None:
    body = json.dumps(error.to_body(uuid.uuid4().hex)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in error.headers.items()]
    await send({"type": "http.response.start", "status": error.http_status, "headers": headers})
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
        server = build_server(deps, pool)
        app: Any = server.streamable_http_app(streamable_http_path=deps.settings.mcp_path, host=host)
        config = uvicorn.Config(BearerGate(app, deps.verifier), host=host, port=port, log_level="warning",
                                lifespan="on", access_log=False)
        log.info("toolgate mcp on http://%s:%d%s", host, port, deps.settings.mcp_path,
                 extra={"event": "mcp_listening", "upstreams": [u.name for u in upstreams]})
        await uvicorn.Server(config).serve()


async def serve_stdio(deps: Deps, upstreams: list[McpUpstream]) -> None:
    """Serve one client over this process's stdin/stdout until it closes them."""
    async with build_pool(deps, upstreams) as pool, stdio_server() as (read, write):
        server = build_server(deps, pool)
        await server.run(read, write, server.create_initialization_options())
