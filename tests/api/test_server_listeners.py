"""The gunicorn listeners of gunicorn.conf.py: one ``SO_REUSEPORT`` socket per worker, and a
taken address refused at start (a real gunicorn with 2 workers, real Redis and SQLite)."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.loopback import child_pids, socket_inodes, tcp_inodes
from tests.support.gateway import PROJECT_ROOT, GatewayProcess


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, redis_server):
    """The gateway under gunicorn, 2 workers, development defaults."""
    workdir = tmp_path_factory.mktemp("gateway")
    process = GatewayProcess(
        {"TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite")},
        workers=2,
    ).start()
    yield process
    process.stop()


GUNICORN = [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_ROOT / "gunicorn.conf.py")]


def _env(bind: str, tmp_path: Path, redis_server) -> dict[str, str]:
    """The environment of a gateway bound to ``bind`` (development defaults)."""
    return {**os.environ, "TOOLGATE_BIND": bind, "TOOLGATE_REDIS_URL": redis_server.url,
            "TOOLGATE_AUDIT_DSN": str(tmp_path / "decisions.sqlite"), "TOOLGATE_LOG_LEVEL": "WARNING"}


def _start(env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run a gateway that is expected to refuse to start; returns how it ended."""
    return subprocess.run(GUNICORN, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.serial  # a load-spreading measurement on its own gunicorn: nothing else loads the machine
def test_kept_alive_connections_spread_over_both_workers(gateway):
    """16 kept-alive client connections (a load balancer's pool): with one listener per worker
    the kernel spreads them; one shared listener let the first worker to wake take 14-16."""
    connections = [http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=5) for _ in range(16)]
    try:
        for conn in connections:
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            assert response.status == 200 and not response.will_close
        established = tcp_inodes(gateway.port, state="01")
        held = {pid: len(socket_inodes(pid) & established) for pid in child_pids(gateway.proc.pid)}
    finally:
        for conn in connections:
            conn.close()
    assert len(held) == 2 and sum(held.values()) == 16, held
    # All 16 on one worker has probability 2 x 2^-16 with the kernel's hash spreading.
    assert min(held.values()) >= 1, held


def test_a_second_gateway_on_a_taken_address_exits_at_once(gateway):
    """Per-worker SO_REUSEPORT listeners would let a second gateway share the port silently
    (or crash-loop its workers on a plain listener): the master refuses to start instead."""
    second = _start(gateway.env)
    assert second.returncode == 1
    assert f"cannot listen on 127.0.0.1 port {gateway.port}: Address already in use" in second.stderr
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=5)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    conn.close()


def test_a_plain_listener_on_the_address_is_refused_too(tmp_path, redis_server):
    """A port held by another program (no SO_REUSEPORT): exit 1 with the reason, no worker
    crash loop."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _start(_env(f"127.0.0.1:{port}", tmp_path, redis_server))
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1 port {port}: Address already in use" in result.stderr


def test_port_0_is_refused_with_per_worker_listeners(tmp_path, redis_server):
    """Port 0 would give each worker its own random port, unknown to everybody."""
    result = _start(_env("127.0.0.1:0", tmp_path, redis_server))
    assert result.returncode == 1 and "port 0 gives every worker its own random port" in result.stderr


def test_a_unix_socket_bind_serves_without_reuse_port(tmp_path, redis_server):
    """SO_REUSEPORT is for TCP: a unix socket bind gets one shared listener and serves."""
    import socket
    import time

    path = tmp_path / "gw.sock"
    proc = subprocess.Popen(
        GUNICORN, cwd=PROJECT_ROOT, env=_env(f"unix:{path}", tmp_path, redis_server),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        reply = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and b" 200 " not in reply:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            try:
                with socket.socket(socket.AF_UNIX) as client:
                    client.connect(str(path))
                    client.sendall(b"GET /healthz HTTP/1.1\r\nHost: toolgate\r\nConnection: close\r\n\r\n")
                    reply = client.recv(4096)
            except OSError:
                time.sleep(0.2)
        assert reply.startswith(b"HTTP/1.1 200 ")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()
