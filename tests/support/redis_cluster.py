"""A local Redis Cluster for tests: three masters on free loopback ports, no replicas.

``RedisClusterHarness(workdir).start()`` starts ``redis-server --cluster-enabled yes`` three
times (``RedisServer(cluster=True)``: each on a port whose cluster bus port, port + 10000, is
free too), joins them with ``redis-cli --cluster create ... --cluster-replicas 0
--cluster-yes`` and waits until every node reports ``cluster_state:ok``. ``url`` names the
first node; redis-py's ``RedisCluster`` discovers the others. ``flush()`` empties every node
(the suite starts one cluster per test process and flushes it before each test that uses it).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from tests.support.servers import RedisServer


class RedisClusterHarness:
    """Three cluster-enabled ``redis-server`` processes joined into one cluster."""

    def __init__(self, workdir: Path, *, masters: int = 3) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed (scripts/install.sh installs it)")
        self.cli = cli
        self.nodes = [RedisServer(workdir / f"node{i}", cluster=True) for i in range(masters)]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, timeout_s: float = 20.0) -> RedisClusterHarness:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [self.cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=timeout_s,
        )
        self._wait_until_ok(timeout_s)
        return self

    def flush(self) -> None:
        """FLUSHALL on every node (each master holds its own slots' keys)."""
        for node in self.nodes:
            with redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=5) as client:
                client.flushall()

    def _wait_until_ok(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self._info(node).get("cluster_state") == "ok" and self._info(node).get("cluster_known_nodes")
                   == str(len(self.nodes)) for node in self.nodes):
                return
            time.sleep(0.1)
        raise TimeoutError(f"the Redis Cluster did not reach cluster_state:ok in {timeout_s} s")

    def _info(self, node: RedisServer) -> dict[str, str]:
        out = subprocess.run(
            [self.cli, "-p", str(node.port), "cluster", "info"], capture_output=True, text=True, timeout=5
        ).stdout
        return dict(line.strip().split(":", 1) for line in out.splitlines() if ":" in line)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
