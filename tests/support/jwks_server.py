"""A threaded loopback HTTP server for tests: a mutable JWKS plus arbitrary static files.

    with JwksServer(jwks(K1)) as server:          # or server = JwksServer(...).start(); server.stop()
        settings = Settings(jwt_jwks_url=server.jwks_url, ...)
        server.set_jwks(jwks(K1, K2))              # change the published keys
        server.fail_with(503)                      # every request answers 503 ...
        server.recover()                           # ... until recovered
        server.add_file("/cert.pem", pem_bytes, "application/x-pem-file")
        server.hits["/jwks.json"], server.hits["/cert.pem"], server.total_hits()
        server.reset_hits()

``/jwks.json`` serves the current JWKS document (``application/json``); paths added with
``add_file`` serve their bytes; anything else is 404. Every request, whatever its answer, is
counted in ``hits`` by path (query string removed). ``delay_s`` delays every answer (to test
timeouts). Binds 127.0.0.1 on a free port; thread-safe; ``stop()`` returns at once
(``tests.support.http_server``).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.http_server import LoopbackHTTPServer

JWKS_PATH = "/jwks.json"


class JwksServer:
    """See the module docstring."""

    def __init__(self, jwks_document: dict[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self._jwks: bytes = json.dumps(jwks_document or {"keys": []}).encode()
        self._files: dict[str, tuple[bytes, str]] = {}
        self._status: int | None = None
        self.delay_s = 0.0
        self.hits: Counter[str] = Counter()
        self._server: LoopbackHTTPServer | None = None

    # lifecycle -----------------------------------------------------------------------------
    def start(self) -> JwksServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                owner._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = LoopbackHTTPServer(Handler, name="jwks-server").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> JwksServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # addresses -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return self.base_url + JWKS_PATH

    def url_for(self, path: str) -> str:
        return self.base_url + path

    # behaviour -----------------------------------------------------------------------------
    def set_jwks(self, jwks_document: dict[str, Any]) -> None:
        with self._lock:
            self._jwks = json.dumps(jwks_document).encode()

    def add_file(self, path: str, body: bytes, content_type: str = "application/octet-stream") -> None:
        with self._lock:
            self._files[path] = (body, content_type)

    def fail_with(self, status: int = 503) -> None:
        """Answer every request with ``status`` (a short JSON error body)."""
        with self._lock:
            self._status = status

    def recover(self) -> None:
        with self._lock:
            self._status = None

    def reset_hits(self) -> None:
        with self._lock:
            self.hits.clear()

    def total_hits(self) -> int:
        with self._lock:
            return sum(self.hits.values())

    # request handling ------------------------------------------------------------------------
    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        with self._lock:
            self.hits[path] += 1
            status, jwks_body, file = self._status, self._jwks, self._files.get(path)
        if self.delay_s:
            time.sleep(self.delay_s)
        if status is not None:
            body, content_type = b'{"error":"unavailable"}', "application/json"
        elif path == JWKS_PATH:
            status, body, content_type = 200, jwks_body, "application/json"
        elif file is not None:
            status, (body, content_type) = 200, file
        else:
            status, body, content_type = 404, b'{"error":"not found"}', "application/json"
        request.close_connection = True
        try:
            request.send_response(status)
            request.send_header("Content-Type", content_type)
            request.send_header("Content-Length", str(len(body)))
            request.send_header("Connection", "close")
            request.end_headers()
            request.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up waiting (the slow and timeout behaviours)
