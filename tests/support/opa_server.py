"""A scriptable stand-in that speaks OPA's REST Data API, answering from the embedded OPA engine.

The real ``opa`` server is in tests/support/opa_process.py; this stand-in is kept only for the
faults a real OPA cannot be made to produce (a 429 with Retry-After, a malformed or non-JSON
body, a 503, a body trickled byte by byte, a hang-up after the request). ``POST /v1/data/<path>``
with ``{"input": ...}`` evaluates ``data.<path>`` with the real engine loaded from a policy
directory and answers ``{"result": ...}`` (no ``result`` when undefined), or OPA's error body
``{"code": "internal_error", "message": ...}`` with 500 on evaluation errors. ``GET /health``
answers ``{}``.

It can be scripted, one behaviour per call, to misbehave: answer without ``result``, with a
given status/body/headers, slowly, trickling, or hang up. Only queries of the decision document
(``/v1/data/toolgate/decision``, the gateway's default ``TOOLGATE_OPA_DECISION_PATH``) take the
scripted behaviours and are counted in ``calls``, each with its time; the gateway's other
document queries (``data.toolgate.session_reads``, asked once per tool and revision) are answered
as OPA would and counted in ``other_calls``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

from app.policy.bundle import load_bundle, read_directory

#: The query path of the gateway's decision document: the only one behaviours apply to.
DECISION_QUERY = "/v1/data/toolgate/decision"


@dataclass
class Behaviour:
    """What to do for one call. ``None`` fields mean: behave like OPA."""

    status: int | None = None
    body: Any = None  # a JSON value, or bytes sent as-is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    hang_up: bool = False  # close the connection without answering
    trickle_s: float = 0.0  # send the answer one byte per trickle_s seconds


class OpaTestServer:
    """Threaded loopback server; ``start()`` returns the base URL, ``stop()`` closes it."""

    def __init__(self, policy_dir: Path, *, revision: str | None = None) -> None:
        self._engine = OpaEngine()
        load_bundle(self._engine, policy_dir, include_tests=False)
        self.revision = revision or read_directory(policy_dir).revision
        self._script: list[Behaviour] = []
        self._default: Behaviour | None = None
        self._lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        self.other_calls: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self.port: int | None = None

    # -- scripting -----------------------------------------------------------------------
    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours for the next calls, in order; later calls behave normally."""
        with self._lock:
            self._script.extend(behaviours)

    def always(self, behaviour: Behaviour | None) -> None:
        """Apply ``behaviour`` to every call once the script is used up (None: normal)."""
        with self._lock:
            self._default = behaviour

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._default = None
            self.calls.clear()
            self.other_calls.clear()

    def _next(self) -> Behaviour | None:
        with self._lock:
            return self._script.pop(0) if self._script else self._default

    # -- evaluation ----------------------------------------------------------------------
    def evaluate(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        document = path.strip("/").replace("/", ".")
        try:
            value = self._engine.eval_document(document, body.get("input"))
        except OpaUndefinedError:
            return 200, {"provenance": self._provenance()}
        except OpaError as exc:
            return 500, {"code": "internal_error", "message": exc.message}
        return 200, {"result": value, "provenance": self._provenance()}

    def _provenance(self) -> dict[str, Any]:
        return {"version": "embedded-test-server", "bundles": {"toolgate": {"revision": self.revision}}}

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, port: int = 0) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(owner: OpaTestServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None, trickle_s: float = 0.0) -> None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            head = [f"HTTP/1.1 {status} X", "Content-Type: application/json", f"Content-Length: {len(raw)}"]
            head += [f"{key}: {value}" for key, value in (headers or {}).items()]
            message = ("\r\n".join(head) + "\r\n\r\n").encode() + raw
            if not trickle_s:
                self.wfile.write(message)
                return
            try:
                for i in range(len(message)):
                    self.wfile.write(message[i:i + 1])
                    self.wfile.flush()
                    time.sleep(trickle_s)
            except OSError:  # the client gave up
                self.close_connection = True

        def do_GET(self) -> None:
            if self.path.startswith("/health"):
                self._send(200, {})
            else:
                self._send(404, {"code": "resource_not_found", "message": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = self.path.split("?", 1)[0]
            call = {"time": time.monotonic(), "path": self.path, "headers": dict(self.headers)}
            if path != DECISION_QUERY:
                owner.other_calls.append(call)
                self._answer(path, raw, None)
                return
            owner.calls.append(call)
            behaviour = owner._next()
            if behaviour is not None and behaviour.delay_s:
                time.sleep(behaviour.delay_s)
            if behaviour is not None and behaviour.hang_up:
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if not path.startswith("/v1/data/"):
                self._send(404, {"code": "resource_not_found", "message": "not found"})
                return
            if behaviour is not None and behaviour.status is not None:
                self._send(behaviour.status, behaviour.body if behaviour.body is not None else {}, behaviour.headers)
                return
            if behaviour is not None and behaviour.body is not None:
                self._send(200, behaviour.body, behaviour.headers)
                return
            self._answer(path, raw, behaviour)

        def _answer(self, path: str, raw: bytes, behaviour: Behaviour | None) -> None:
            """Answer as OPA would (trickled when ``behaviour`` says so)."""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, {"code": "invalid_parameter", "message": "body is not JSON"})
                return
            status, answer = owner.evaluate(path[len("/v1/data/"):], body)
            self._send(status, answer, trickle_s=behaviour.trickle_s if behaviour else 0.0)

    return Handler
