"""HTTP/1.1 requests whose whole exchange ends by a deadline: connect, send, and every read of
the status line, headers and body, however slowly the server trickles its bytes.

requests and urllib3 bound each socket operation (the read timeout is the longest wait for
the next byte), so a server that sends one byte per read timeout keeps a call alive without
limit. Here each read waits at most ``min(read_timeout_s, time left)``, and no read starts once
the deadline has passed (``DeadlineExceeded``). One keep-alive connection per thread and
origin (``DeadlineClient``); a connection is dropped after any error, and a request that fails
on a reused connection before a byte of the answer arrived (the server closed it while idle)
is sent once more on a fresh connection.

Errors: ``DeadlineExceeded`` and ``TimeoutError`` (``socket.timeout``) for time, ``OSError``
(refused, reset) and ``http.client.HTTPException`` (malformed answer) otherwise,
``ResponseTooLarge`` for a body over ``max_body_bytes``.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class DeadlineExceeded(TimeoutError):
    """The deadline passed before the answer was complete."""


class ResponseTooLarge(http.client.HTTPException):
    """The answer's body is larger than allowed."""


@dataclass(frozen=True)
class Answer:
    """A complete HTTP answer: status, headers (lower-case names), body bytes."""

    status: int
    headers: dict[str, str]
    body: bytes


class _DeadlineReader(io.RawIOBase):
    """Raw reads of a socket, each bounded by the deadline and the per-read timeout."""

    def __init__(self, sock: socket.socket, deadline: float, read_timeout_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._read_timeout_s = read_timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("deadline passed while reading the answer")
        self._sock.settimeout(min(self._read_timeout_s, remaining))
        return self._sock.recv_into(buffer)


class _SocketView:
    """What ``http.client.HTTPResponse`` needs of a socket: ``makefile`` over deadline reads."""

    def __init__(self, sock: socket.socket, deadline: float, read_timeout_s: float) -> None:
        self._reader = _DeadlineReader(sock, deadline, read_timeout_s)

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(self._reader)


class DeadlineClient:
    """Requests to one origin (``scheme://host:port`` of ``base_url``), thread-safe through one
    connection per thread. ``base_url`` may carry a path prefix; ``max_body_bytes`` bounds an
    answer."""

    def __init__(self, base_url: str, *, max_body_bytes: int = 1024 * 1024) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._max_body_bytes = max_body_bytes
        self._local = threading.local()
        self._ssl_context = ssl.create_default_context() if self._https else None
        # Every open connection, so that they are closed when the client goes (threads outlive it).
        self._open: set[http.client.HTTPConnection] = set()
        self._open_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._open, self._open_lock)

    def _connection(self, connect_timeout_s: float) -> tuple[http.client.HTTPConnection, bool]:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            return conn, True
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=connect_timeout_s, context=self._ssl_context)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=connect_timeout_s)
        conn.connect()
        self._local.conn = conn
        with self._open_lock:
            self._open.add(conn)
        return conn, False

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()
            with self._open_lock:
                self._open.discard(conn)

    def post(
        self, path: str, body: bytes, *, headers: dict[str, str], deadline: float, connect_timeout_s: float,
        read_timeout_s: float,
    ) -> Answer:
        """POST ``body`` to ``prefix + path`` and read the whole answer by ``deadline``
        (``time.monotonic()`` seconds). Raises as the module docstring says."""
        for fresh_retry in (False, True):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceeded("deadline passed before the request was sent")
            conn, reused = self._connection(min(connect_timeout_s, remaining))
            try:
                return self._exchange(conn, path, body, headers, deadline, read_timeout_s)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if not reused or fresh_retry:
                    raise
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _exchange(
        self, conn: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str], deadline: float,
        read_timeout_s: float,
    ) -> Answer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("deadline passed before the request was sent")
        assert conn.sock is not None
        conn.sock.settimeout(min(read_timeout_s, remaining))  # bounds the whole send (sendall)
        conn.request("POST", self._prefix + path, body=body, headers=headers)
        sock = conn.sock
        conn.response_class = _response_class(deadline, read_timeout_s)
        response = conn.getresponse()
        data = response.read(self._max_body_bytes + 1)
        if len(data) > self._max_body_bytes:
            raise ResponseTooLarge(f"answer larger than {self._max_body_bytes} bytes")
        answer = Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
        if response.will_close or not response.isclosed() or conn.sock is not sock:
            self.close()  # not reusable: the server closes it, or part of the answer is unread
        return answer


def _close_all(connections: set[http.client.HTTPConnection], lock: threading.Lock) -> None:
    with lock:
        for conn in connections:
            conn.close()
        connections.clear()


def _response_class(deadline: float, read_timeout_s: float) -> type[http.client.HTTPResponse]:
    class DeadlineResponse(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            super().__init__(_SocketView(sock, deadline, read_timeout_s), *args, **kwargs)  # type: ignore[arg-type]

    return DeadlineResponse
