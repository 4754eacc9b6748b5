"""The loopback harnesses of ``bench.loopback`` (used by the benchmark and by every test that
starts a server): ports are never handed out twice, parallel pytest-xdist workers draw from
separate slices, and a server whose port another program took meanwhile starts on a fresh one
(real redis-server and gunicorn processes, a real listening socket as the other program)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from bench import loopback
from bench.loopback import AddressInUse, GatewayProcess, RedisServer, free_port, listens_on


@contextmanager
def listener_on(port: int) -> Iterator[socket.socket]:
    """Another program's plain listening socket on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield sock


def test_free_ports_are_never_handed_out_twice_and_are_bindable():
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    first, last = loopback.PORT_RANGE
    assert all(first <= port <= last for port in ports)
    with listener_on(ports[0]):  # free a moment ago: binding it works
        pass


def test_each_xdist_worker_draws_from_its_own_slice(monkeypatch: pytest.MonkeyPatch):
    slices = []
    for worker in ("gw0", "gw1", "gw9"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(loopback._slice())
        assert free_port() in slices[-1]
    assert not set(slices[0]) & set(slices[1])
    assert slices[2] == slices[1]  # gw9 shares gw1's slice (8 slices), still never a port twice
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert loopback._slice() == range(loopback.PORT_RANGE[0], loopback.PORT_RANGE[1] + 1)


def test_a_cluster_node_port_has_its_bus_port_free_and_reserved_too(monkeypatch: pytest.MonkeyPatch):
    port = free_port(also_free_at=RedisServer.BUS_OFFSET)
    bus = port + RedisServer.BUS_OFFSET
    with listener_on(port), listener_on(bus):
        pass
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(loopback, "PORT_RANGE", (bus, bus))  # the bus port is the only candidate
    with pytest.raises(RuntimeError, match="no free loopback port"):
        free_port()


def test_listens_on_sees_only_the_processes_own_listener():
    with listener_on(free_port()) as sock:
        port = sock.getsockname()[1]
        assert listens_on(os.getpid(), port)
        assert not listens_on(os.getpid(), free_port())
        assert not listens_on(1, port)


def test_redis_moves_to_a_fresh_port_when_its_port_was_taken(tmp_path: Path):
    server = RedisServer(tmp_path)
    taken = server.port
    with listener_on(taken):
        server.start()
        try:
            assert server.port != taken and listens_on(server.proc.pid, server.port)
            server.restart_empty()  # a started server keeps its address
            assert listens_on(server.proc.pid, server.port)
        finally:
            server.stop()


def test_redis_on_a_given_port_that_is_taken_fails_with_address_in_use(tmp_path: Path):
    port = free_port()
    with listener_on(port), pytest.raises(AddressInUse):
        RedisServer(tmp_path, port=port).start()


def test_the_gateway_moves_to_a_fresh_port_when_the_master_refuses_a_taken_one(tmp_path: Path, redis_server):
    gateway = GatewayProcess(
        {"TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": str(tmp_path / "decisions.sqlite")}, workers=1
    )
    taken = gateway.port
    with listener_on(taken):
        gateway.start()
    try:
        assert gateway.port != taken
        workers = gateway.worker_pids()
        assert len(workers) == 1 and listens_on(workers[0], gateway.port)
        assert requests.get(gateway.url + "/healthz", timeout=5).status_code == 200
    finally:
        gateway.stop()
