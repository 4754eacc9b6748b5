"""Hostile request framing against the shipped nginx proxy in front of a real gunicorn: two
``Content-Length`` headers, ``Content-Length`` with ``Transfer-Encoding``, an obsolete line
folding of ``Transfer-Encoding``, an unknown transfer coding, ``%00`` in the path. Each gets one
structured 400 (DESIGN §7) and nothing behind it reaches the gateway (a smuggled second request
is never answered). A request URI too long for gunicorn's request line gets the structured 414,
``TRACE`` the structured 405, and the proxy's own error locations cannot be requested. URLs the
gateway builds from the ``Host`` header keep the port the client used."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
import requests

from app.auth.dev_tokens import mint_dev_token
from app.proxy.config import ERROR_PREFIX, MAX_REQUEST_URI
from app.settings import Settings
from tests.support.gateway import GatewayProcess
from tests.support.proxy import ProxyProcess
from tests.support.servers import free_port

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


def _exchange(port: int, framing: bytes, body: bytes, target: bytes = b"/v1/decide") -> bytes:
    """Send one POST ``target`` (``Connection: close``) with the header lines ``framing`` and
    ``body``; return every byte the proxy sends back until it closes the connection."""
    token = mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["support_agent"], ttl_s=600)
    head = (
        b"POST " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\nConnection: close\r\n" + framing + b"\r\n"
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


def _structured_error(received: bytes, status: int) -> dict[str, object]:
    """The one response in ``received``: its status is ``status`` and its body the gateway's
    error shape; returns the ``error`` member."""
    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
    assert received.count(b"HTTP/1.1 ") == 1, "a smuggled request was answered"
    assert b"content-type: application/json" in head.lower()
    body = json.loads(payload)
    assert body["ok"] is False
    assert len(body["request_id"]) == 32
    error: dict[str, object] = body["error"]
    return error


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_framing_gets_one_structured_400(proxy: ProxyProcess, name: str) -> None:
    framing, body = HOSTILE[name]
    error = _structured_error(_exchange(proxy.port, framing, body), 400)
    assert error == {"code": "VALIDATION_ERROR", "message": "request is not valid", "retryable": False}


def test_a_nul_in_the_path_gets_the_structured_400(proxy: ProxyProcess) -> None:
    received = _exchange(proxy.port, b"Content-Length: " + LENGTH + b"\r\n", BODY, target=b"/v1/executions/a%00b/complete")
    error = _structured_error(received, 400)
    assert error == {"code": "VALIDATION_ERROR", "message": "request is not valid", "retryable": False}


@pytest.mark.parametrize("length", [MAX_REQUEST_URI + 1, 9000])
def test_a_uri_too_long_for_gunicorn_gets_the_structured_414(proxy: ProxyProcess, length: int) -> None:
    target = b"/v1/decisions?subject=" + b"a" * (length - 22)
    assert len(target) == length
    received = _exchange(proxy.port, b"Content-Length: " + LENGTH + b"\r\n", BODY, target=target)
    error = _structured_error(received, 414)
    assert error == {"code": "VALIDATION_ERROR", "message": "request URI is too long", "retryable": False}


def test_the_authzen_metadata_names_the_port_the_client_used(proxy: ProxyProcess) -> None:
    metadata = requests.get(f"{proxy.url}/.well-known/authzen-configuration", timeout=10).json()
    assert metadata["policy_decision_point"] == proxy.url
    assert metadata["access_evaluation_endpoint"] == proxy.url + "/access/v1/evaluation"


def test_the_longest_uri_the_proxy_passes_reaches_the_gateway(proxy: ProxyProcess) -> None:
    target = b"/v1/decide?" + b"a" * (MAX_REQUEST_URI - 11)
    assert len(target) == MAX_REQUEST_URI
    received = _exchange(proxy.port, b"Content-Length: " + LENGTH + b"\r\n", BODY, target=target)
    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert json.loads(payload)["decision"] == "allow"


def test_the_proxy_error_locations_cannot_be_requested(proxy: ProxyProcess) -> None:
    received = _exchange(proxy.port, b"Content-Length: " + LENGTH + b"\r\n", BODY, target=ERROR_PREFIX.encode() + b"unavailable")
    error = _structured_error(received, 404)
    assert error == {"code": "NOT_FOUND", "message": "no such endpoint", "retryable": False}


def test_a_well_framed_chunked_call_is_decided(proxy: ProxyProcess) -> None:
    received = _exchange(proxy.port, b"Transfer-Encoding: chunked\r\n", _chunked(BODY))
    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert json.loads(payload)["decision"] == "allow"


def test_a_method_nginx_refuses_gets_the_structured_405(proxy: ProxyProcess) -> None:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(b"TRACE /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    error = _structured_error(received, 405)
    assert error == {"code": "VALIDATION_ERROR", "message": "method not allowed for this endpoint", "retryable": False}


def test_an_upstream_that_does_not_answer_is_the_structured_503(tmp_path) -> None:
    """The error locations are reached by URI (the request becomes a GET on the way): a POST
    to a proxy whose gunicorn is not running still gets the retryable 503 with Retry-After."""
    dead = ProxyProcess(f"127.0.0.1:{free_port()}", tmp_path / "nginx").start()
    try:
        received = _exchange(dead.port, b"Content-Length: " + LENGTH + b"\r\n", BODY)
    finally:
        dead.stop()
    assert b"\r\nretry-after: 1\r\n" in received.partition(b"\r\n\r\n")[0].lower() + b"\r\n"
    error = _structured_error(received, 503)
    assert error == {
        "code": "DEPENDENCY_UNAVAILABLE", "message": "a dependency is unavailable; retry later",
        "retryable": True, "retry_after_seconds": 1,
    }
