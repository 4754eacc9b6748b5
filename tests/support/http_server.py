"""A threaded HTTP server on a free loopback port that stops at once, for test peers (the JWKS
server, the OTLP receiver).

    server = LoopbackHTTPServer(Handler).start()    # Handler: a BaseHTTPRequestHandler class
    server.port, server.url("/path")
    server.stop()                                   # or: with LoopbackHTTPServer(Handler) as s:

``http.server``'s ``serve_forever`` notices ``shutdown()`` only at its next poll (every 0.5 s
by default): here it polls every ``POLL_INTERVAL_S``, so ``stop()`` returns within about that
long. Request threads are daemons and are not waited for.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: How often ``serve_forever`` looks for a shutdown request, in seconds.
POLL_INTERVAL_S = 0.01


class LoopbackHTTPServer:
    """See the module docstring. Binds 127.0.0.1 port 0 (the kernel's pick) when constructed."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str = "loopback-http") -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL_S}, name=name, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "") -> str:
        """``http://127.0.0.1:<port><path>``."""
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> LoopbackHTTPServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> LoopbackHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
