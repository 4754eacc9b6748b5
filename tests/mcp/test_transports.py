"""The other transports: ``toolgate mcp --transport stdio`` started by a real SDK client (the
client's identity is the configured token), in front of the test upstream served over
Streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import PROJECT_ROOT
from tests.mcp.conftest import gateway_env, http_upstream, settings_of, start_gateway, stop, upstream_log
from tests.support.servers import free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def notes_over_http(tmp_path: Path) -> Iterator[str]:
    """The test upstream over Streamable HTTP on a free loopback port."""
    process, url = http_upstream(tmp_path)
    yield url
    stop(process)


async def test_a_stdio_client_through_the_gateway_to_an_http_upstream(tmp_path: Path, redis_server, redis_client,
                                                                        notes_over_http: str) -> None:
    from app.auth.dev_tokens import mint_dev_token

    upstreams = f'[{{"name": "notes", "url": "{notes_over_http}"}}]'
    env = gateway_env(tmp_path, redis_server.url, TOOLGATE_MCP_UPSTREAMS=upstreams)
    token = mint_dev_token(settings_of(env), sub="u-7", tenant="acme", roles=["viewer"])
    env["TOOLGATE_MCP_STDIO_TOKEN"] = token
    params = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp", "--transport", "stdio"],
                                   env=env, cwd=str(PROJECT_ROOT))
    async with Client(params, cache=None) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        read = await client.call_tool("read_note", {"name": "welcome"})
        denied = await client.call_tool("add_note", {"name": "n", "text": "t"})
    assert listed == {"read_note"}
    assert not read.is_error and read.meta["toolgate/decision"]["decision"] == "allow"
    assert denied.is_error and denied.meta["toolgate/decision"]["decision"] == "deny"
    assert [entry["tool"] for entry in upstream_log(tmp_path) if "tool" in entry] == ["read_note"]


def test_stdio_without_a_configured_identity_refuses_to_start(tmp_path: Path, redis_server) -> None:
    env = gateway_env(tmp_path, redis_server.url, TOOLGATE_MCP_UPSTREAMS='[{"name": "n", "url": "http://127.0.0.1:9/mcp"}]')
    done = subprocess.run([sys.executable, "-m", "app.cli", "mcp", "--transport", "stdio"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "TOOLGATE_MCP_STDIO_TOKEN" in done.stderr


async def test_an_unreachable_upstream_lists_nothing_and_calls_fail_as_unavailable(tmp_path: Path, redis_server,
                                                                                   redis_client) -> None:
    from mcp import MCPError

    gone = {"name": "gone", "url": f"http://127.0.0.1:{free_port()}/mcp"}
    gateway = start_gateway(tmp_path, redis_server.url, upstream=gone, TOOLGATE_MCP_CONNECT_TIMEOUT_MS="2000")
    try:
        async with gateway.client(gateway.token("u-1", "agent")) as client:
            assert (await client.list_tools()).tools == []
            with pytest.raises(MCPError):
                await client.call_tool("read_note", {"name": "welcome"})
    finally:
        stop(gateway.process)


async def test_the_protected_resource_metadata_and_the_401_challenge_name_the_authorization_server(
    tmp_path: Path, redis_server, redis_client
) -> None:
    """RFC 9728 as the MCP authorization specification uses it: a client that gets 401 finds
    the metadata from the challenge, and in it the authorization server to get a token from."""
    import httpx2

    gateway = start_gateway(tmp_path, redis_server.url, TOOLGATE_MCP_AUTHORIZATION_SERVERS="https://id.example.com/realms/acme",
                            TOOLGATE_MCP_SCOPES="mcp:tools,mcp:resources")
    try:
        async with httpx2.AsyncClient() as http:
            refused = await http.post(gateway.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            challenge = refused.headers["www-authenticate"]
            where = challenge.split('resource_metadata="')[1].rstrip('"')
            metadata = (await http.get(where)).json()
    finally:
        stop(gateway.process)
    base = gateway.url.removesuffix("/mcp")
    assert refused.status_code == 401 and challenge.startswith('Bearer realm="toolgate"')
    assert where == f"{base}/.well-known/oauth-protected-resource/mcp"
    assert metadata == {"resource": gateway.url, "authorization_servers": ["https://id.example.com/realms/acme"],
                        "bearer_methods_supported": ["header"], "scopes_supported": ["mcp:tools", "mcp:resources"]}
