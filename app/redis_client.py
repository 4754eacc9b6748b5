"""The Redis connection of one gateway process: built once from settings, errors translated.

``build_redis(settings) -> RedisConnection``. ``settings.redis_url`` names a standalone Redis
(redis-py ``Redis``) or, with ``settings.redis_cluster``, any node of a Redis Cluster
(``RedisCluster``, which discovers the others).

- Timeouts: connect and read/write socket timeouts are ``settings.redis_socket_timeout_ms``.
- Pool: a blocking pool of ``settings.threads + 1`` connections (per node in cluster mode), one
  per request thread of a gunicorn worker; a caller that finds none free waits at most
  ``redis_socket_timeout_ms``. A pooled connection the server closed is replaced on checkout.
- No client-side retries: a failed command fails the request with a retryable 503.
- Each ``run`` or ``eval`` (one round trip) is timed into ``toolgate_redis_command_seconds``.
- Lazy: nothing connects before the first command, so a gateway starts while Redis is down
  (tools that do not need Redis keep working) and a cluster is discovered on first use.
- Errors: every redis-py failure (``redis.RedisError``: connection errors, timeouts,
  ``ClusterDownError``, ``TryAgainError``, ...; and ``RedisClusterException``) inside
  ``run`` or ``eval`` becomes ``app.errors.DependencyUnavailable`` (503, retryable), raised
  ``from`` the library exception, with the library's text in ``log_detail`` only.

Lua scripts are ``LuaScript`` constants, defined once per module: ``eval`` sends ``EVALSHA``
and falls back to ``EVAL`` (which caches the script on that server) after a ``NOSCRIPT``.
In cluster mode every key of one script call must share a hash tag (one slot).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis import BlockingConnectionPool, ConnectionPool, Redis, RedisError
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.connection import parse_url
from redis.exceptions import NoScriptError, RedisClusterException
from redis.retry import Retry

from app import metrics
from app.errors import DependencyUnavailable
from app.settings import RedisSettings, Settings

T = TypeVar("T")
Client = Redis | RedisCluster

_UNAVAILABLE = (RedisError, RedisClusterException)


@dataclass(frozen=True)
class LuaScript:
    """A Lua script and its SHA-1 (the name Redis caches it under)."""

    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


class RedisConnection:
    """One redis-py client per process, built on first use (thread-safe).

    ``run(operation, fn)`` calls ``fn(client)``; ``eval(script, keys, args)`` runs a Lua
    script. Both return what redis-py returns (strings, since responses are decoded as
    UTF-8) and raise ``DependencyUnavailable`` when Redis fails or does not answer in time.
    """

    def __init__(self, settings: RedisSettings, *, pool_size: int, client: Client | None = None) -> None:
        """``client``: an already built redis-py client to use instead of one from the URL (the
        socket-free tests pass an in-memory one)."""
        parse_url(settings.redis_url)  # a malformed URL fails here, not on the first request
        self.url = settings.redis_url
        self.cluster = settings.redis_cluster
        self._options = _client_options(settings, pool_size)
        self._client: Client | None = client
        self._lock = threading.Lock()

    def _connect(self) -> Client:
        with self._lock:
            if self._client is None:
                if self.cluster:
                    self._client = RedisCluster.from_url(
                        self.url, connection_pool_class=BlockingConnectionPool, **self._options
                    )
                else:
                    pool = BlockingConnectionPool.from_url(self.url, **self._options)
                    self._client = Redis.from_pool(pool)
            return self._client

    def run(self, operation: str, fn: Callable[[Client], Any]) -> Any:
        """``fn(client)``; ``operation`` names the call in the log. Raises
        ``DependencyUnavailable`` (503) for any Redis failure, connecting included. (Typed
        ``Any``: redis-py's annotations join its sync and async replies.)"""
        started = time.perf_counter()
        try:
            return fn(self._client or self._connect())
        except _UNAVAILABLE as exc:
            raise DependencyUnavailable(
                log_detail=f"redis {operation}: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            metrics.REDIS_SECONDS.observe(time.perf_counter() - started)

    def eval(self, operation: str, script: LuaScript, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """Run ``script`` atomically with ``KEYS = keys`` and ``ARGV = args``; returns its reply.

        Raises ``DependencyUnavailable`` (503) like ``run``.
        """

        def call(client: Client) -> Any:
            if not isinstance(client, RedisCluster):
                return _eval_on(client.connection_pool, script, keys, args)
            try:
                return client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                return client.eval(script.source, len(keys), *keys, *args)

        return self.run(operation, call)

    def ping(self) -> None:
        """Raise ``DependencyUnavailable`` unless Redis answers ``PING`` in time."""
        self.run("ping", lambda client: client.ping())

    def close(self) -> None:
        """Close the client and its pool (the next command reconnects)."""
        with self._lock:
            client, self._client = self._client, None
        if isinstance(client, RedisCluster):
            # RedisCluster.close() closes each node's client but not the node's pool (redis-py
            # builds node clients on a pool they do not own), so disconnect the pools here.
            for node in client.get_nodes():
                if node.redis_connection is not None:
                    node.redis_connection.connection_pool.disconnect()
        if client is not None:
            client.close()


def _eval_on(pool: ConnectionPool, script: LuaScript, keys: Sequence[str], args: Sequence[str | int]) -> Any:
    """``script`` on one connection of a standalone Redis's ``pool``: the pool's checkout (it
    replaces a connection the server closed), then the command and its reply on the connection,
    which disconnects itself on a socket error or timeout. This leaves out what
    ``Redis.execute_command`` adds around the same steps on every command (a retry wrapper with
    no retries, OpenTelemetry recorders, reply callbacks, none of which a script's reply has).

    Raises ``redis.RedisError`` like ``Redis.evalsha``.
    """
    connection = pool.get_connection()
    try:
        try:
            connection.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
            return connection.read_response()
        except NoScriptError:
            connection.send_command("EVAL", script.source, len(keys), *keys, *args)
            return connection.read_response()
    finally:
        pool.release(connection)


def _client_options(settings: RedisSettings, pool_size: int) -> dict[str, Any]:
    timeout_s = settings.redis_socket_timeout_ms / 1000
    return {
        "socket_connect_timeout": timeout_s,
        "socket_timeout": timeout_s,
        "max_connections": pool_size,
        "timeout": timeout_s,  # the longest wait for a free pooled connection
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": True,
    }


def build_redis(settings: Settings) -> RedisConnection:
    """The process's Redis connection for ``settings`` (nothing connects yet).

    Raises ``ValueError`` for a malformed ``settings.redis_url``.
    """
    return RedisConnection(settings, pool_size=settings.threads + 1)
