"""Body size limits through a real gunicorn (2 workers, real Redis and SQLite): a body over
``TOOLGATE_MAX_BODY_BYTES`` is a 413 whether it declares its length or arrives chunked; a
chunked body is never cut at the limit and parsed (a valid JSON prefix used to get a 200)."""

from __future__ import annotations

import http.client
import json

import pytest

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.support.gateway import GatewayProcess

LIMIT = 4096


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, redis_server):
    workdir = tmp_path_factory.mktemp("limits")
    process = GatewayProcess(
        {"TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
         "TOOLGATE_MAX_BODY_BYTES": str(LIMIT)},
        workers=2,
    ).start()
    yield process
    process.stop()


def _token() -> str:
    return mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["support_agent"])


def _valid_prefix_then_padding(total: int) -> bytes:
    """A decide body whose first bytes are a complete, valid JSON object (the limit would cut
    right after it) followed by whitespace padding up to ``total`` bytes."""
    body = json.dumps({"tool": "readFile", "version": "1", "input": {"path": "/srv/reports/q1.csv"}}).encode()
    return body + b" " * (total - len(body))


def _post_chunked(
    gateway: GatewayProcess, body: bytes, chunk: int = 1000, path: str = "/v1/decide"
) -> tuple[int, dict, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    conn.putrequest("POST", path)
    conn.putheader("Authorization", f"Bearer {_token()}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for start in range(0, len(body), chunk):
        part = body[start:start + chunk]
        conn.send(f"{len(part):x}\r\n".encode() + part + b"\r\n")
    conn.send(b"0\r\n\r\n")
    resp = conn.getresponse()
    status, headers, payload = resp.status, dict(resp.getheaders()), json.loads(resp.read())
    conn.close()
    return status, headers, payload


def test_a_chunked_body_over_the_limit_is_413_not_its_prefix(gateway):
    status, _, body = _post_chunked(gateway, _valid_prefix_then_padding(LIMIT + 500))
    assert status == 413, body
    assert body["error"]["code"] == "VALIDATION_ERROR" and body["error"]["retryable"] is False
    assert body["error"]["message"] == "request body is too large"


@pytest.mark.parametrize("path", ["/access/v1/evaluation", "/access/v1/evaluations"])
def test_a_chunked_authzen_body_over_the_limit_is_413_not_its_prefix(gateway, path):
    evaluation = {"subject": {"type": "user", "id": "u-1"}, "action": {"name": "call"},
                  "resource": {"type": "tool", "id": "readFile", "properties": {"input": {"path": "/srv/a"}}}}
    prefix = json.dumps(evaluation if path.endswith("evaluation") else {"evaluations": [evaluation]}).encode()
    status, _, body = _post_chunked(gateway, prefix + b" " * (LIMIT + 500 - len(prefix)), path=path)
    assert status == 413, body
    assert body["error"]["code"] == "VALIDATION_ERROR" and body["error"]["retryable"] is False


def test_a_chunked_body_at_the_limit_is_read_whole(gateway):
    status, _, body = _post_chunked(gateway, _valid_prefix_then_padding(LIMIT))
    assert status == 200 and body["decision"] == "allow"


def test_a_declared_length_over_the_limit_is_413_before_reading(gateway):
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    body = _valid_prefix_then_padding(LIMIT + 1)
    conn.request("POST", "/v1/decide", body=body,
                 headers={"Authorization": f"Bearer {_token()}", "Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    conn.close()
    assert resp.status == 413 and payload["error"]["code"] == "VALIDATION_ERROR" and payload["error"]["retryable"] is False
