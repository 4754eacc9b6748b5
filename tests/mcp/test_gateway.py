"""``toolgate mcp`` end to end: a real SDK client session (Streamable HTTP, bearer JWT) through
the gateway to the real SDK upstream of ``upstream_server.py`` over stdio, decided by the real
embedded engine with the test policies, with a real Redis and decision log."""

from __future__ import annotations

from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import MCPError

from app import create_app
from tests.mcp.conftest import Gateway

pytestmark = pytest.mark.anyio


def decision(result: types.CallToolResult) -> dict[str, Any]:
    return (result.meta or {})["toolgate/decision"]


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def answer_approval(gateway: Gateway, approval_id: str, approved: bool, approver: str = "u-9") -> None:
    """An approver answers through the HTTP API of a gateway app on the same Redis and log."""
    app = create_app(gateway.settings)
    token = gateway.token(approver, "approver")
    response = app.test_client().post(
        f"/v1/approvals/{approval_id}", json={"approved": approved, "reason": "checked"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.get_json()


async def test_the_upstream_executes_exactly_the_allowed_calls_and_each_is_recorded(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        read = await client.call_tool("read_note", {"name": "welcome"})
        added = await client.call_tool("add_note", {"name": "todo", "text": "buy milk"})
        denied = await client.call_tool("add_note", {"name": "creds", "text": "my password is hunter2"})
        not_granted = await client.call_tool("delete_note", {"name": "welcome"})
    assert not read.is_error and text(read) == "hello from the upstream" and decision(read)["decision"] == "allow"
    assert not added.is_error and added.structured_content == {"notes": 2}
    assert denied.is_error and decision(denied)["decision"] == "deny"
    assert "notes must not hold passwords" in text(denied)
    assert not_granted.is_error and decision(not_granted)["reasons"] == ["no role of the caller may use delete_note"]
    assert [(e["tool"], e["arguments"]) for e in gateway.executions()] == [
        ("read_note", {"name": "welcome"}), ("add_note", {"name": "todo", "text": "buy milk"}),
    ]
    decides = gateway.records(event="decide")
    assert [(r.tool, r.decision) for r in decides] == [
        ("read_note", "allow"), ("add_note", "allow"), ("add_note", "deny"), ("delete_note", "deny"),
    ]
    assert [r.decision_id for r in decides] == [decision(r)["decision_id"] for r in (read, added, denied, not_granted)]
    [report] = gateway.records(event="execution_complete")
    assert report.idempotency_key_hash == decides[1].idempotency_key_hash is not None
    assert decides[0].idempotency_key_hash is None  # read-only: no key, nothing stored


async def test_tools_list_shows_only_the_tools_a_role_may_use(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        agent = {tool.name for tool in (await client.list_tools()).tools}
    async with gateway.client(gateway.token("u-2", "viewer")) as client:
        viewer = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert agent == {"read_note", "add_note", "transfer", "charge", "summarize", "crash", "malformed", "slow"}
    # delete_note is granted to viewers by name, but it is destructive (no annotations) and
    # viewers may not use destructive tools: an input-independent rule hides it.
    assert set(viewer) == {"read_note"}
    assert viewer["read_note"].annotations.read_only_hint is True
    assert gateway.records(event="decide") == []  # listing decides nothing


async def test_a_retried_call_replays_the_stored_result_instead_of_running_twice(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        key = {"toolgate/idempotencyKey": "tr-1"}
        first = await client.call_tool("transfer", {"amount": 40, "to": "bob"}, meta=key)
        retry = await client.call_tool("transfer", {"amount": 40, "to": "bob"}, meta=key)
        unkeyed = await client.call_tool("transfer", {"amount": 40, "to": "bob"})  # another request: another call
    assert first.structured_content == retry.structured_content
    assert decision(first)["replayed"] is False and decision(retry)["replayed"] is True
    assert unkeyed.structured_content != first.structured_content and decision(unkeyed)["replayed"] is False
    assert [e["tool"] for e in gateway.executions()] == ["transfer", "transfer"]
    assert [r.replayed for r in gateway.records(event="decide")] == [False, True, False]


async def test_an_approval_without_elicitation_names_the_approval_and_the_retry_proceeds(gateway: Gateway) -> None:
    key = {"toolgate/idempotencyKey": "tr-carol"}
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        pending = await client.call_tool("transfer", {"amount": 500, "to": "carol"}, meta=key)
        approval = (pending.meta or {})["toolgate/approval"]
        assert pending.is_error and decision(pending)["decision"] == "user-approval"
        assert approval["request_reason"] == "transfers over 100 need approval"
        assert approval["approval_id"] in text(pending)
        again = await client.call_tool("transfer", {"amount": 500, "to": "carol"}, meta=key)
        assert (again.meta or {})["toolgate/approval"]["approval_id"] == approval["approval_id"]  # the same approval
        assert gateway.executions() == []
        answer_approval(gateway, approval["approval_id"], approved=True)
        done = await client.call_tool("transfer", {"amount": 500, "to": "carol"}, meta=key)
        replay = await client.call_tool("transfer", {"amount": 500, "to": "carol"}, meta=key)
    assert not done.is_error and decision(done)["reasons"] == ["allowed by the test policy"]
    assert decision(replay)["replayed"] is True and replay.structured_content == done.structured_content
    assert [e["arguments"] for e in gateway.executions()] == [{"amount": 500, "to": "carol"}]
    assert [r.approval_id for r in gateway.records(event="decide")][-2:] == [approval["approval_id"]] * 2


async def test_a_denied_approval_denies_the_retry_with_the_approvers_reason(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        pending = await client.call_tool("transfer", {"amount": 700, "to": "dave"})
        answer_approval(gateway, pending.meta["toolgate/approval"]["approval_id"], approved=False)
        retry = await client.call_tool("transfer", {"amount": 700, "to": "dave"})
    assert retry.is_error and decision(retry)["decision"] == "deny" and "checked" in text(retry)
    assert gateway.executions() == []


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_account_holders_elicitation_never_approves_her_own_transfer(gateway: Gateway, mode: str) -> None:
    """Her MCP session is the requester's own: an answer from it is never an approval (a
    requester confirms her own call only with a step-up token, when the policy allows it)."""
    asked: list[types.ElicitRequestParams] = []
    metas: list[dict[str, Any]] = []

    async def confirm(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        # The request's _meta: on its params (handshake), on the context (a 2026-07-28 input request).
        metas.append({**(context.meta or {}), **(params.meta or {})})
        return types.ElicitResult(action="accept", content={"approve": True})

    async with gateway.client(gateway.token("u-5", "account_holder"), elicitation_callback=confirm, mode=mode) as client:
        result = await client.call_tool("transfer", {"amount": 300, "to": "erin"})
    assert result.is_error and decision(result)["decision"] == "user-approval", text(result)
    assert len(asked) == 1 and "needs an approver's answer" in asked[0].message
    if mode == "legacy":  # the SDK (2.3) hands a 2026-07-28 input request's callback no _meta
        structured = metas[0]["toolgate/approval"]
        assert structured["approval_id"] == result.meta["toolgate/approval"]["approval_id"]
        assert structured["request_reason"] == "transfers over 100 need approval"
    assert gateway.executions() == []
    assert gateway.records(event="approval_answer") == []


async def test_declining_the_elicitation_leaves_the_approval_pending(gateway: Gateway) -> None:
    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with gateway.client(gateway.token("u-5", "account_holder"), elicitation_callback=decline, mode="legacy") as client:
        result = await client.call_tool("transfer", {"amount": 300, "to": "erin"})
    assert result.is_error and decision(result)["decision"] == "user-approval"
    assert gateway.executions() == []


async def test_an_approver_must_answer_when_the_caller_may_not_approve_herself(gateway: Gateway) -> None:
    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={})

    async with gateway.client(gateway.token("u-1", "agent"), elicitation_callback=accept, mode="legacy") as client:
        pending = await client.call_tool("transfer", {"amount": 900, "to": "frank"})
        assert pending.is_error and decision(pending)["decision"] == "user-approval"
        answer_approval(gateway, pending.meta["toolgate/approval"]["approval_id"], approved=True)
        done = await client.call_tool("transfer", {"amount": 900, "to": "frank"})
    assert not done.is_error
    assert len(gateway.executions()) == 1
    assert gateway.records(event="approval_answer")[0].approver_id == "u-9"


async def test_arguments_against_the_upstream_schema_are_refused_before_any_decision(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        dynamic = await client.call_tool("add_note", {"name": "x", "text": "t", "extra": 1})
        registered = await client.call_tool("transfer", {"amount": "a lot", "to": "bob"})
    assert dynamic.is_error and dynamic.meta["toolgate/error"]["code"] == "VALIDATION_ERROR"
    assert registered.is_error and registered.meta["toolgate/error"]["details"]["problems"][0]["path"] == "/amount"
    assert gateway.executions() == []
    assert [r.error_code for r in gateway.records(event="decide")] == ["VALIDATION_ERROR", "VALIDATION_ERROR"]


async def test_an_upstream_crash_is_an_mcp_error_recorded_and_the_next_call_reconnects(gateway: Gateway) -> None:
    key = {"toolgate/idempotencyKey": "crash-1"}
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        with pytest.raises(MCPError) as crashed:
            await client.call_tool("crash", {}, meta=key)
        replayed = await client.call_tool("crash", {}, meta=key)  # its outcome is unknown: it is never run again
        after = await client.call_tool("read_note", {"name": "welcome"})
    assert "failed (closed)" in crashed.value.error.message
    assert replayed.is_error and decision(replayed)["replayed"] is True and "is not run again" in text(replayed)
    assert not after.is_error
    pids = {e["pid"] for e in gateway.executions()}
    assert [e["tool"] for e in gateway.executions()] == ["crash", "read_note"] and len(pids) == 2
    [failure] = gateway.records(event="execution_fail")
    assert "whether it ran is unknown" in failure.reasons[0] and failure.reasons[-1] == "execution failed"


async def test_a_malformed_upstream_result_is_not_forwarded(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        with pytest.raises(MCPError) as malformed:
            await client.call_tool("malformed", {})
    assert "failed (malformed)" in malformed.value.error.message
    assert [e["tool"] for e in gateway.executions()] == ["malformed"]
    assert "malformed result" in gateway.records(event="execution_fail")[0].reasons[0]


async def test_a_timed_out_upstream_call_is_an_mcp_error_with_a_failure_record(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        with pytest.raises(MCPError) as timed_out:
            await client.call_tool("slow", {"seconds": 10})
    assert "failed (timeout)" in timed_out.value.error.message
    [failure] = gateway.records(event="execution_fail")
    assert failure.tool == "slow" and failure.error_code == "DEPENDENCY_UNAVAILABLE"


async def test_requests_without_a_valid_bearer_token_are_refused(gateway: Gateway) -> None:
    async with httpx2.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer not-a-jwt"}):
            response = await http.post(gateway.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer ")
            assert response.json()["error"]["code"] == "UNAUTHENTICATED"


async def test_a_body_that_is_not_strict_json_is_a_parse_error_that_echoes_nothing(gateway: Gateway) -> None:
    """As on the HTTP API: the SDK would take the last of two equal keys, so that what a client
    sees it send and what is decided could differ."""
    call = '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {%s}}'
    bodies = [
        call % '"name": "transfer", "arguments": {"amount": 500, "amount": 5, "to": "bob"}',
        call % '"name": "read_note", "name": "transfer", "arguments": {"to": "bob"}',
        call % '"name": "transfer", "arguments": {"amount": NaN, "to": "bob"}',
        call % '"name": "transfer", "arguments": {"amount": 50.000000000000001, "to": "bob"}',
        call % '"name": "transfer", "arguments": {"amount": 9007199254740993, "to": "bob"}',
    ]
    headers = {"Authorization": f"Bearer {gateway.token('u-1', 'agent')}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient() as http:
        for body in bodies:
            response = await http.post(gateway.url, content=body.encode(), headers=headers)
            assert response.status_code == 400, response.text
            assert response.json()["id"] is None and response.json()["error"]["code"] == -32700
            assert "bob" not in response.text and "transfer" not in response.text
    assert gateway.records() == [] and gateway.executions() == []


async def test_an_upstream_cannot_plant_gateway_metadata_in_its_result(gateway: Gateway) -> None:
    """The client reads ``toolgate/*`` entries as the gateway's word (a pending approval, an
    error): an upstream's own are dropped, its other entries kept."""
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        result = await client.call_tool("read_note", {"name": "planted"})
    meta = result.meta or {}
    assert [key for key in meta if key.startswith("toolgate/")] == ["toolgate/decision"]
    assert meta["example.com/trace"] == "t-1"
    assert meta["toolgate/decision"]["decision"] == "allow" and meta["toolgate/decision"]["decision_id"] != "planted"


async def test_an_unknown_tool_is_an_invalid_params_error(gateway: Gateway) -> None:
    async with gateway.client(gateway.token("u-1", "agent")) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
    assert unknown.value.error.code == types.INVALID_PARAMS
