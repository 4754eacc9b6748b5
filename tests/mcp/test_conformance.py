"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned in
``tests/mcp/peers``) through ``toolgate mcp``: every server scenario that passes against the
suite's own example server directly passes through the gateway in front of it.

The example server (``tests/mcp/peers/everything-server.ts``, the suite's
``examples/servers/typescript/everything-server.ts`` at its v0.1.16 tag) is the upstream; the
gateway runs with an allow-all policy (``tests/mcp/conformance_policy``). The suite's CLI sends
no ``Authorization`` header, so it reaches the gateway through ``bearer_proxy`` (a loopback
proxy that adds the bearer token and changes nothing else).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT
from tests.mcp.conftest import MCP_DIR, start_gateway, stop
from tests.support.servers import free_port, wait_for_port

PEERS = MCP_DIR / "peers"
SUITE = PEERS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NODE22 = PROJECT_ROOT / ".tools" / "node22" / "bin"
_RESULT = re.compile(r"^([✓✗]) ([a-z0-9-]+): (\d+) passed, (\d+) failed", re.MULTILINE)


def _env() -> dict[str, str]:
    if not SUITE.exists() or not (NODE22 / "node").exists():
        pytest.fail("the conformance suite or Node.js 22 is not installed: run scripts/install.sh")
    return {**os.environ, "PATH": f"{NODE22}:{os.environ['PATH']}"}


def run_suite(url: str, workdir: Path) -> dict[str, bool]:
    """Every server scenario of the suite against ``url``: name -> passed."""
    workdir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([str(NODE22 / "node"), str(SUITE), "server", "--url", url], cwd=workdir, env=_env(),
                          capture_output=True, text=True, timeout=900)
    (workdir / "suite.log").write_text(done.stdout + done.stderr)
    scenarios = {name: mark == "✓" for mark, name, _, _ in _RESULT.findall(done.stdout)}
    assert scenarios, done.stdout[-2000:] + done.stderr[-2000:]
    return scenarios


@pytest.fixture
def example_server(tmp_path: Path) -> Iterator[str]:
    """The suite's example server on a free loopback port."""
    port = free_port()
    with (tmp_path / "example-server.log").open("wb") as log:
        process = subprocess.Popen([str(PEERS / "node_modules" / ".bin" / "tsx"), "everything-server.ts"], cwd=PEERS,
                                   env={**_env(), "PORT": str(port)}, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout_s=60)
        yield f"http://localhost:{port}/mcp"
    finally:
        stop(process)


def test_every_scenario_that_passes_direct_passes_through_the_gateway(tmp_path: Path, example_server: str,
                                                                      redis_server, redis_client) -> None:
    direct = run_suite(example_server, tmp_path / "direct")
    gateway = start_gateway(tmp_path, redis_server.url, upstream={"name": "everything", "url": example_server},
                            TOOLGATE_POLICY_DIR=str(MCP_DIR / "conformance_policy"))
    port = free_port()
    proxy = subprocess.Popen([sys.executable, "-m", "tests.mcp.bearer_proxy", "--port", str(port),
                              "--target", gateway.url.removesuffix("/mcp")],
                             cwd=PROJECT_ROOT, env={**os.environ, "BEARER_TOKEN": gateway.token("conformance", "agent")})
    try:
        wait_for_port(port, timeout_s=60)
        through = run_suite(f"http://localhost:{port}/mcp", tmp_path / "through")
    finally:
        stop(proxy)
        stop(gateway.process)
    lost = sorted(name for name, passed in direct.items() if passed and not through.get(name))
    assert lost == [], f"pass direct, fail through toolgate mcp: {lost}"
