"""Fixtures of the MCP gateway tests: the real ``toolgate mcp`` command in front of the real
upstream of ``tests/mcp/upstream_server.py`` (an SDK server), real MCP client sessions of the
SDK, a real Redis, the real embedded OPA engine with the test policies of
``tests/mcp/policies`` and a real SQLite decision log. Tokens are HS256 with a test secret.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app.audit.queries import DecisionQuery
from app.audit.stores import open_decision_log
from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.conftest import PROJECT_ROOT
from tests.support.servers import free_port, wait_for_port

MCP_DIR = Path(__file__).resolve().parent
POLICIES = MCP_DIR / "policies"
CONTRACTS = MCP_DIR / "contracts"
SECRET = "mcp-gateway-tests-hs256-secret-of-32-bytes-or-more"
UPSTREAM = [sys.executable, "-m", "tests.mcp.upstream_server"]


def gateway_env(tmp_path: Path, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a ``toolgate mcp`` (and of the settings the tests read back)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update({
        "TOOLGATE_ENV": "development",
        "TOOLGATE_JWT_ALGORITHMS": "HS256",
        "TOOLGATE_JWT_HS256_SECRET": SECRET,
        "TOOLGATE_POLICY_DIR": str(POLICIES),
        "TOOLGATE_CONTRACTS_DIR": str(CONTRACTS),
        "TOOLGATE_REDIS_URL": redis_url,
        "TOOLGATE_AUDIT_DSN": str(tmp_path / "decisions.sqlite"),
        "TOOLGATE_APPROVAL_KEYS": "k-mcp:" + "m" * 32,
        "TOOLGATE_LOG_LEVEL": "WARNING",
        "NOTES_EXECUTION_LOG": str(tmp_path / "executions.jsonl"),
        **extra,
    })
    return env


def settings_of(env: dict[str, str]) -> Settings:
    values: dict[str, Any] = {k.removeprefix("TOOLGATE_").lower(): v for k, v in env.items() if k.startswith("TOOLGATE_")}
    if "mcp_upstreams" in values:
        values["mcp_upstreams"] = json.loads(values["mcp_upstreams"])
    return Settings(**values)


@dataclass
class Gateway:
    """A running ``toolgate mcp`` over HTTP and what it leaves behind."""

    url: str
    env: dict[str, str]
    tmp_path: Path
    process: subprocess.Popen[bytes]
    settings: Settings = field(init=False)

    def __post_init__(self) -> None:
        self.settings = settings_of(self.env)

    def token(self, sub: str = "u-1", *roles: str, tenant: str = "acme") -> str:
        return mint_dev_token(self.settings, sub=sub, tenant=tenant, roles=list(roles or ("agent",)))

    @asynccontextmanager
    async def client(self, token: str, **options: Any):
        """A real SDK client session against the gateway, with ``token`` as its bearer."""
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
            Client(streamable_http_client(self.url, http_client=http), cache=None, **options) as client,
        ):
            yield client

    def executions(self) -> list[dict[str, Any]]:
        """Every call the upstream executed, in order."""
        return [entry for entry in upstream_log(self.tmp_path) if "tool" in entry]

    def listings(self) -> int:
        """How many times the upstream answered ``tools/list``."""
        return sum(1 for entry in upstream_log(self.tmp_path) if entry.get("listed"))

    def records(self, **filters: Any) -> list[Any]:
        """The decision records of tenant acme, oldest first."""
        store = open_decision_log(self.env["TOOLGATE_AUDIT_DSN"])
        try:
            return list(store.iter_records(DecisionQuery(tenant="acme", **filters)))
        finally:
            store.close()


def upstream_log(tmp_path: Path) -> list[dict[str, Any]]:
    """What the test upstream logged: its executed calls and its listings, in order."""
    path = tmp_path / "executions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def stdio_upstream(tmp_path: Path) -> dict[str, Any]:
    """The test upstream as a stdio upstream of ``TOOLGATE_MCP_UPSTREAMS``."""
    return {"name": "notes", "command": UPSTREAM, "cwd": str(PROJECT_ROOT),
            "env": {"NOTES_EXECUTION_LOG": str(tmp_path / "executions.jsonl")}}


def start_gateway(tmp_path: Path, redis_url: str, *, upstream: dict[str, Any] | None = None,
                  upstreams: list[dict[str, Any]] | None = None, **extra: str) -> Gateway:
    port = free_port()
    listed = json.dumps(upstreams or [upstream or stdio_upstream(tmp_path)])
    env = gateway_env(tmp_path, redis_url, TOOLGATE_MCP_UPSTREAMS=listed, **extra)
    with (tmp_path / "gateway.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "mcp", "--bind", f"127.0.0.1:{port}"],
            cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log,
        )
    try:
        wait_for_port(port, timeout_s=60)
    except TimeoutError:
        process.kill()
        raise
    return Gateway(url=f"http://127.0.0.1:{port}/mcp", env=env, tmp_path=tmp_path, process=process)


def http_upstream(tmp_path: Path, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """The test upstream over Streamable HTTP on a loopback port (a free one unless given): the
    process and its URL."""
    port = port or free_port()
    env = {"NOTES_EXECUTION_LOG": str(tmp_path / "executions.jsonl"), "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen([sys.executable, "-m", "tests.mcp.upstream_server", "--http", str(port)],
                               cwd=PROJECT_ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout_s=60)
    except TimeoutError:
        process.kill()
        raise
    return process, f"http://127.0.0.1:{port}/mcp"


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def gateway(tmp_path: Path, redis_server, redis_client) -> Iterator[Gateway]:
    """``toolgate mcp`` over HTTP in front of the stdio upstream (Redis flushed first)."""
    running = start_gateway(tmp_path, redis_server.url, TOOLGATE_MCP_CALL_TIMEOUT_MS="3000")
    yield running
    stop(running.process)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
