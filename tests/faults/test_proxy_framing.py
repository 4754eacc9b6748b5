"""Hostile request framing against the shipped nginx proxy in front of a real gunicorn: two
``Content-Length`` headers, ``Content-Length`` with ``Transfer-Encoding``, an obsolete line
folding of ``Transfer-Encoding``, an unknown transfer coding. Each gets one structured 400
(DESIGN §7) and nothing behind it reaches the gateway (a smuggled second request is never
answered)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.support.gateway import GatewayProcess
from tests.support.proxy import ProxyProcess

BODY = json.dumps({"tool": "readFile", "version": "1", "input": {"path": "/srv/reports/q1.csv"}}).encode()
SMUGGLED = b"GET /v1/decisions HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, redis_server) -> Iterator[ProxyProcess]:
    workdir = tmp_path_factory.mktemp("framing")
    gateway = GatewayProcess(
        {"TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite")},
        workers=1, threads=2,
    ).start()
    process = ProxyProcess(f"127.0.0.1:{gateway.port}", workdir / "nginx").start()
    yield process
    process.stop()
    gateway.stop()


def _chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


def _exchange(port: int, framing: bytes, body: bytes) -> bytes:
    """Send one POST /v1/decide with the header lines ``framing`` and ``body``; return every
    byte the proxy sends back until it closes the connection."""
    token = mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["support_agent"], ttl_s=600)
    head = (
        b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\n" + framing + b"\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


LENGTH = str(len(BODY)).encode()
HOSTILE = {
    "two content lengths": (b"Content-Length: " + LENGTH + b"\r\nContent-Length: 5\r\n", BODY),
    "content length and chunked": (
        b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", _chunked(BODY) + SMUGGLED,
    ),
    "folded transfer encoding": (b"Transfer-Encoding:\r\n chunked\r\nContent-Length: " + LENGTH + b"\r\n", BODY),
    "unknown transfer coding": (b"Transfer-Encoding: xchunked\r\n", _chunked(BODY) + SMUGGLED),
    "chunked then identity": (b"Transfer-Encoding: chunked, identity\r\n", _chunked(BODY) + SMUGGLED),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_framing_gets_one_structured_400(proxy: ProxyProcess, name: str) -> None:
    framing, body = HOSTILE[name]
    received = _exchange(proxy.port, framing, body)
    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), head
    assert received.count(b"HTTP/1.1 ") == 1, "a smuggled request was answered"
    assert b"content-type: application/json" in head.lower()
    error = json.loads(payload)
    assert error["ok"] is False
    assert error["error"] == {"code": "VALIDATION_ERROR", "message": "request is not valid", "retryable": False}
    assert len(error["request_id"]) == 32


def test_a_well_framed_chunked_call_is_decided(proxy: ProxyProcess) -> None:
    received = _exchange(proxy.port, b"Transfer-Encoding: chunked\r\nConnection: close\r\n", _chunked(BODY))
    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert json.loads(payload)["decision"] == "allow"
