"""What a call through ``toolgate mcp`` leads to upstream, with real peers: the SDK client
(both protocol generations, and raw JSON-RPC over HTTP for a transport retry), the SDK upstream
of ``upstream_server.py`` over stdio and over Streamable HTTP, and the npm
``@modelcontextprotocol/server-filesystem`` (installed by scripts/install.sh in
``tests/mcp/peers``).

- keys: a call without a client key is one request (its session and JSON-RPC id); two
  different requests are never merged, a transport retry is replayed;
- error results release the key unless the contract says they are final;
- an upstream gone before the call is a retryable ``-32603`` and releases the key;
- the tool cache: a call never lists the upstreams again, a denied call reaches no upstream;
- upstream identity: ``input.tool.upstream``, prefixes, and a collision refuses to start.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import MCPError

from tests.conftest import PROJECT_ROOT
from tests.mcp.conftest import MCP_DIR, Gateway, gateway_env, http_upstream, start_gateway, stdio_upstream, stop

pytestmark = pytest.mark.anyio

PEERS = MCP_DIR / "peers"
FILESYSTEM_SERVER = PEERS / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
MODES = ["legacy", "2026-07-28"]


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def decision(result: types.CallToolResult) -> dict[str, Any]:
    return (result.meta or {})["toolgate/decision"]


def node() -> str:
    """The Node.js the project installs (22), else the one on PATH."""
    pinned = PROJECT_ROOT / ".tools" / "node22" / "bin" / "node"
    found = str(pinned) if pinned.exists() else shutil.which("node")
    if found is None or not FILESYSTEM_SERVER.exists():
        pytest.fail("the npm MCP peers are not installed: run scripts/install.sh")
    return found


@pytest.fixture
def files_gateway(tmp_path: Path, redis_server, redis_client):
    """``toolgate mcp`` in front of the npm filesystem server, allowed the folder ``files``."""
    root = tmp_path / "files"
    root.mkdir()
    upstream = {"name": "files", "command": [node(), str(FILESYSTEM_SERVER), str(root)]}
    running = start_gateway(tmp_path, redis_server.url, upstream=upstream)
    yield running, root
    stop(running.process)


@pytest.mark.parametrize("mode", MODES)
async def test_a_b_a_writes_all_run_and_the_file_ends_with_the_last_one(files_gateway, mode: str) -> None:
    """Issue 23 finding 1: the third write was answered with the first one's replayed result."""
    gateway, root = files_gateway
    target = str(root / "p.txt")
    async with gateway.client(gateway.token("u-1", "files"), mode=mode) as client:
        answers = [await client.call_tool("write_file", {"path": target, "content": content}) for content in ("v1", "v2", "v1")]
    assert [decision(a)["replayed"] for a in answers] == [False, False, False]
    assert (root / "p.txt").read_text() == "v1"


@pytest.mark.parametrize("mode", MODES)
async def test_an_error_result_releases_the_key_so_the_fixed_call_runs(files_gateway, mode: str) -> None:
    """Issue 23 finding 2: a write into a missing folder was replayed as an error for 24 h."""
    gateway, root = files_gateway
    target = str(root / "new" / "p.txt")
    key = {"toolgate/idempotencyKey": f"write-{mode}"}
    async with gateway.client(gateway.token("u-1", "files"), mode=mode) as client:
        failed = await client.call_tool("write_file", {"path": target, "content": "v1"}, meta=key)
        await client.call_tool("create_directory", {"path": str(root / "new")})
        again = await client.call_tool("write_file", {"path": target, "content": "v1"}, meta=key)
    assert failed.is_error and not decision(failed)["replayed"]
    assert not again.is_error and not decision(again)["replayed"], text(again)
    assert (root / "new" / "p.txt").read_text() == "v1"
    fails = gateway.records(event="execution_fail")
    assert [r.reasons for r in fails] == [("upstream files answered an error result", "execution released")]


async def test_an_error_result_of_a_contract_with_final_errors_is_replayed(gateway: Gateway) -> None:
    key = {"toolgate/idempotencyKey": "charge-1"}
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        declined = await client.call_tool("charge", {"amount": 900}, meta=key)
        again = await client.call_tool("charge", {"amount": 900}, meta=key)
    assert declined.is_error and text(declined) == "card declined"
    assert again.is_error and decision(again)["replayed"] and text(again) == "card declined"
    assert [e["tool"] for e in gateway.executions()] == ["charge"]


async def _post(http: httpx2.AsyncClient, url: str, message: dict[str, Any], headers: dict[str, str]) -> tuple[httpx2.Response, Any]:
    """POST one JSON-RPC message; the response and the JSON-RPC answer with its id (SSE or JSON)."""
    response = await http.post(url, json=message, headers={"Accept": "application/json, text/event-stream", **headers})
    if "id" not in message or response.status_code == 202:
        return response, None
    if response.headers["content-type"].startswith("application/json"):
        return response, response.json()
    answers = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return response, next(a for a in answers if a.get("id") == message["id"])


async def test_a_transport_retry_of_the_same_request_is_replayed_and_runs_once(gateway: Gateway) -> None:
    """The same JSON-RPC id in the same session (what a transport resends) is the same call."""
    bearer = {"Authorization": f"Bearer {gateway.token('u-1', 'agent')}"}
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add_note", "arguments": {"name": "n", "text": "t"}}}
    async with httpx2.AsyncClient(timeout=60) as http:
        response, _ = await _post(http, gateway.url, initialize, bearer)
        session = {**bearer, "Mcp-Session-Id": response.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        await _post(http, gateway.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        _, first = await _post(http, gateway.url, call, session)
        _, resent = await _post(http, gateway.url, call, session)
        _, another = await _post(http, gateway.url, {**call, "id": 8}, session)
    replayed = [answer["result"]["_meta"]["toolgate/decision"]["replayed"] for answer in (first, resent, another)]
    assert replayed == [False, True, False]
    assert resent["result"]["content"] == first["result"]["content"]
    assert [e["tool"] for e in gateway.executions()] == ["add_note", "add_note"]


async def test_a_client_that_reconnects_is_another_caller_of_the_same_request_ids(gateway: Gateway) -> None:
    """A new session reuses JSON-RPC ids from 0: its calls are new calls, not replays."""
    token = gateway.token("u-1", "agent")
    for _ in range(2):
        async with gateway.client(token, mode="legacy") as client:
            result = await client.call_tool("add_note", {"name": "n", "text": "t"})
            assert not decision(result)["replayed"]
    assert [e["tool"] for e in gateway.executions()] == ["add_note", "add_note"]


@pytest.mark.parametrize("mode", MODES)
async def test_an_upstream_gone_before_the_call_is_a_retryable_internal_error_and_releases_the_key(
    tmp_path: Path, redis_server, redis_client, mode: str
) -> None:
    """Issue 23 finding 4: -32602 Unknown tool on 2026-07-28, "outcome unknown" for 24 h on legacy."""
    upstream, url = http_upstream(tmp_path)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    gateway = start_gateway(tmp_path, redis_server.url, upstream={"name": "notes", "url": url},
                            TOOLGATE_MCP_CONNECT_TIMEOUT_MS="2000")
    key = {"toolgate/idempotencyKey": "note-1"}
    try:
        async with gateway.client(gateway.token("u-1", "agent"), mode=mode) as client:
            await client.list_tools()
            stop(upstream)
            with pytest.raises(MCPError) as unavailable:
                await client.call_tool("add_note", {"name": "n", "text": "t"}, meta=key)
            upstream, _ = http_upstream(tmp_path, port)
            done = await client.call_tool("add_note", {"name": "n", "text": "t"}, meta=key)
    finally:
        stop(upstream)
        stop(gateway.process)
    assert unavailable.value.error.code == types.INTERNAL_ERROR
    assert unavailable.value.error.data == {"retryable": True}
    assert not done.is_error and not decision(done)["replayed"]
    assert [e["tool"] for e in gateway.executions()] == ["add_note"]
    [failure] = gateway.records(event="execution_fail")
    assert failure.reasons == ("upstream notes refused the connection; the call was not sent", "execution released")


@pytest.mark.parametrize("mode", MODES)
async def test_calls_never_list_the_upstream_again_and_a_denied_call_reaches_it_not_at_all(gateway: Gateway, mode: str) -> None:
    """Issue 23 finding 3: every tools/call re-listed every upstream on 2026-07-28."""
    async with gateway.client(gateway.token("u-1", "agent"), mode=mode) as client:
        await client.list_tools()
        listed = gateway.listings()
        allowed = [await client.call_tool("read_note", {"name": "welcome"}) for _ in range(3)]
        denied = await client.call_tool("add_note", {"name": "creds", "text": "a password"})
    assert all(not a.is_error for a in allowed) and decision(denied)["decision"] == "deny"
    assert gateway.listings() == listed
    assert [e["tool"] for e in gateway.executions()] == ["read_note"] * 3


async def test_an_upstream_that_changes_its_tools_is_listed_again_on_its_notification(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent"), mode="legacy") as client:
        await client.list_tools()
        listed = gateway.listings()
        await client.call_tool("add_note", {"name": "tool-changed", "text": "announce"})
        await client.call_tool("read_note", {"name": "welcome"})
    assert gateway.listings() == listed + 1


async def test_the_policy_sees_the_upstream_of_a_tool_and_prefixes_keep_two_upstreams_apart(
    tmp_path: Path, redis_server, redis_client
) -> None:
    archive = {**stdio_upstream(tmp_path), "name": "archive", "tool_prefix": "archive."}
    gateway = start_gateway(tmp_path, redis_server.url, upstreams=[stdio_upstream(tmp_path), archive])
    try:
        async with gateway.client(gateway.token("u-1", "agent")) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            read = await client.call_tool("archive.read_note", {"name": "welcome"})
            refused = await client.call_tool("archive.add_note", {"name": "n", "text": "t"})
            added = await client.call_tool("add_note", {"name": "n", "text": "t"})
    finally:
        stop(gateway.process)
    assert {"read_note", "add_note", "archive.read_note", "archive.add_note"} <= names
    assert not read.is_error and not added.is_error
    assert decision(refused)["reasons"] == ["upstream archive may only be read"]
    assert [e["tool"] for e in gateway.executions()] == ["read_note", "add_note"]


def test_two_upstreams_offering_the_same_tool_without_a_prefix_refuse_to_start(tmp_path: Path, redis_server) -> None:
    command = f"{sys.executable} -m tests.mcp.upstream_server"
    env = gateway_env(tmp_path, redis_server.url)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "mcp", "--bind", "127.0.0.1:9", "--upstream", f"notes={command}",
         "--upstream", f"copy={command}"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "read_note (upstreams notes and copy)" in done.stderr


async def test_resources_and_prompts_are_listed_and_read_only_as_the_policy_allows(gateway: Gateway) -> None:
    """A viewer may use resources.read and prompts.get (tests/mcp/policies), an agent may not."""
    async with gateway.client(gateway.token("u-2", "viewer"), mode="legacy") as client:
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        read = await client.read_resource("note://welcome")
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        prompt = await client.get_prompt("greet", {"name": "Ada"})
    async with gateway.client(gateway.token("u-1", "agent"), mode="legacy") as client:
        hidden = (await client.list_resources()).resources
        with pytest.raises(MCPError) as denied:
            await client.read_resource("note://welcome")
    assert resources == ["note://welcome"] and read.contents[0].text == "hello from the upstream"
    assert prompts == ["greet"] and prompt.messages[0].content.text == "Greet Ada."
    assert hidden == [] and denied.value.error.code == types.INVALID_REQUEST
    assert denied.value.error.data["toolgate/decision"]["reasons"] == ["no role of the caller may use resources.read"]
    assert [(e["tool"], e["arguments"]) for e in gateway.executions()] == [
        ("resources/read", {"uri": "note://welcome"}), ("prompts/get", {"name": "greet"}),
    ]
    decided = [(r.tool, r.decision) for r in gateway.records(event="decide")]
    assert decided == [("resources.read", "allow"), ("prompts.get", "allow"), ("resources.read", "deny")]


async def test_an_upstreams_sampling_reaches_the_client_that_declared_it_and_is_refused_otherwise(gateway: Gateway) -> None:
    asked: list[str] = []

    async def model(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="short"), model="m")

    token = gateway.token("u-1", "agent")
    async with gateway.client(token, mode="legacy", sampling_callback=model) as client:
        answered = await client.call_tool("summarize", {"text": "a long text"})
    async with gateway.client(token, mode="legacy") as client:
        refused = await client.call_tool("summarize", {"text": "another text"})
    assert not answered.is_error and text(answered) == "summary: short" and asked == ["a long text"]
    assert refused.is_error and text(refused).startswith("sampling refused")
