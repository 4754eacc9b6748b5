"""A loopback reverse proxy that adds ``Authorization: Bearer $BEARER_TOKEN`` to every request,
for MCP clients that cannot send a header (the official conformance suite's CLI): everything
else, the ``Host`` header and streamed (SSE) bodies included, passes unchanged.

    BEARER_TOKEN=... python -m tests.mcp.bearer_proxy --port PORT --target http://127.0.0.1:P2
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator

import httpx2
import uvicorn
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length", "authorization"}


def build(target: str, token: str) -> object:
    client = httpx2.AsyncClient(base_url=target, timeout=httpx2.Timeout(60, read=None))

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        headers.append(("authorization", f"Bearer {token}"))
        upstream = client.build_request(request.method, request.url.path + (f"?{request.url.query}" if request.url.query else ""),
                                        headers=headers, content=await request.body())
        answer = await client.send(upstream, stream=True)

        async def body() -> AsyncIterator[bytes]:
            async for chunk in answer.aiter_raw():
                yield chunk

        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        response = StreamingResponse(body(), status_code=answer.status_code, headers=kept,
                                     background=BackgroundTask(answer.aclose))
        await response(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target", required=True)
    args = parser.parse_args()
    uvicorn.run(build(args.target, os.environ["BEARER_TOKEN"]), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
