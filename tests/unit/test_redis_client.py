"""The Redis connection: lazy, bounded by the socket timeout, errors translated to 503."""

from __future__ import annotations

import socket
import time

import pytest
from prometheus_client import REGISTRY
from redis import RedisError

from app.errors import DependencyUnavailable
from app.redis_client import LuaScript, build_redis
from app.settings import Settings
from tests.support.servers import free_port

ECHO = LuaScript("return {KEYS[1], ARGV[1]}")


def test_commands_and_scripts_run(redis_server, redis_client):
    redis = build_redis(Settings(redis_url=redis_server.url))
    redis.ping()
    assert redis.eval("echo", ECHO, ["k"], ["v"]) == ["k", "v"]
    assert redis_client.script_exists(ECHO.sha) == [True]  # EVALSHA fell back to EVAL once
    assert redis.eval("echo", ECHO, ["k"], [7]) == ["k", "7"]
    redis.close()


def test_nothing_connects_before_the_first_command():
    redis = build_redis(Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    with pytest.raises(DependencyUnavailable) as err:
        redis.ping()
    assert isinstance(err.value.__cause__, RedisError)
    assert err.value.retryable and err.value.retry_after_s == 1


@pytest.mark.serial  # between 0.09 and 0.5 s
def test_a_silent_server_times_out_after_the_socket_timeout():
    with socket.socket() as silent:  # accepts connections (kernel backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        redis = build_redis(Settings(redis_url=f"redis://127.0.0.1:{port}/0", redis_socket_timeout_ms=100))
        started = time.monotonic()
        with pytest.raises(DependencyUnavailable) as err:
            redis.ping()
        elapsed = time.monotonic() - started
        redis.close()
    assert 0.09 <= elapsed < 0.5
    assert "Timeout" in err.value.log_detail


def _round_trips() -> tuple[float, float]:
    """(count, count slower than 50 ms) of ``toolgate_redis_command_seconds`` in this process."""
    count = REGISTRY.get_sample_value("toolgate_redis_command_seconds_count") or 0.0
    fast = REGISTRY.get_sample_value("toolgate_redis_command_seconds_bucket", {"le": "0.05"}) or 0.0
    return count, count - fast


@pytest.mark.serial  # a timeout of 100 ms
def test_every_round_trip_is_timed_timeouts_included(redis_server):
    count, slow = _round_trips()
    redis = build_redis(Settings(redis_url=redis_server.url))
    redis.ping()
    redis.eval("echo", ECHO, ["k"], ["v"])
    redis.close()
    assert _round_trips()[0] == count + 2
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        redis = build_redis(Settings(redis_url=f"redis://127.0.0.1:{silent.getsockname()[1]}/0",
                                     redis_socket_timeout_ms=100))
        with pytest.raises(DependencyUnavailable):
            redis.ping()
        redis.close()
    after, slow_after = _round_trips()
    assert after == count + 3 and slow_after >= slow + 1  # the timed-out ping took >= 100 ms


def test_a_malformed_url_fails_at_build():
    with pytest.raises(ValueError):
        build_redis(Settings(redis_url="http://127.0.0.1:6379"))


def test_close_then_reconnect(redis_server):
    redis = build_redis(Settings(redis_url=redis_server.url))
    redis.ping()
    redis.close()
    redis.ping()
    redis.close()


def test_a_script_runs_again_after_the_server_dropped_its_connection_and_its_cache(redis_server, redis_client):
    redis = build_redis(Settings(redis_url=redis_server.url))
    assert redis.eval("echo", ECHO, ["k"], ["v"]) == ["k", "v"]
    redis_client.script_flush()
    assert redis_client.client_kill_filter(_type="normal", skipme=True) >= 1  # the gateway's pooled connection
    assert redis.eval("echo", ECHO, ["k"], ["again"]) == ["k", "again"]  # reconnected on checkout, then EVAL
    redis.close()


def test_a_failing_script_is_a_503_and_leaves_the_connection_usable(redis_server, redis_client):
    redis = build_redis(Settings(redis_url=redis_server.url, threads=1))
    with pytest.raises(DependencyUnavailable) as err:
        redis.eval("broken", LuaScript("return redis.call('NOSUCHCOMMAND')"), ["k"], [])
    assert isinstance(err.value.__cause__, RedisError) and "broken" in err.value.log_detail
    assert redis.eval("echo", ECHO, ["k"], ["v"]) == ["k", "v"]
    redis.close()
