"""``GET /v1/capabilities`` through the HTTP interface with the real engine: the contracts a
caller may use, from the test policy's capability document (tests/mcp/policies), failing
closed."""

from __future__ import annotations

import shutil

from tests.mcp.conftest import CONTRACTS, POLICIES
from tests.support.calls import auth
from tests.support.errors import assert_error
from tests.support.paths import POLICY_DIR
from tests.support.servers import free_port


def names(response) -> list[str]:
    return [tool["name"] for tool in response.get_json()["tools"]]


def test_a_caller_sees_the_contracts_its_roles_may_use(make_app) -> None:
    client = make_app(policy_dir=POLICIES, contracts_dir=CONTRACTS).test_client()
    agent = client.get("/v1/capabilities", headers=auth("u-1", roles=["agent"]))
    reader = client.get("/v1/capabilities", headers=auth("u-2", roles=["reader"]))
    assert agent.status_code == 200 and names(agent) == ["charge", "transfer"]  # both mutating tools of the MCP suite
    assert reader.status_code == 200 and names(reader) == []  # readers are granted no registered tool
    [transfer] = [t for t in agent.get_json()["tools"] if t["name"] == "transfer"]
    assert transfer["input_schema"]["required"] == ["amount", "to"] and transfer["mutating"] is True


def test_the_shipped_policies_list_the_granted_and_governed_tools(make_app) -> None:
    """policies/toolgate/capability: the role grants of policies/data.json, each tool with a family."""
    client = make_app().test_client()
    support = client.get("/v1/capabilities", headers=auth("u-1", roles=["support_agent"]))
    auditor = client.get("/v1/capabilities", headers=auth("u-2", roles=["auditor"]))
    nobody = client.get("/v1/capabilities", headers=auth("u-3", roles=["approver"]))
    assert support.status_code == 200 and names(support) == ["createTicket", "exportReport", "readFile"]
    assert names(auditor) == ["exportReport"] and names(nobody) == []
    # files.delete_not_enabled is `unavailable`: it depends on the tenant only, never on a path
    acme_admin = client.get("/v1/capabilities", headers=auth("u-4", roles=["admin"]))
    globex_admin = client.get("/v1/capabilities", headers=auth("u-5", tenant="globex", roles=["admin"]))
    assert "deleteFile" in names(acme_admin)
    assert names(globex_admin) == [n for n in names(acme_admin) if n != "deleteFile"]


def test_a_policy_without_a_capability_document_lists_nothing(make_app, tmp_path) -> None:
    """Undefined is "may not": a copy of the shipped policies without the capability package."""
    policies = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, policies)
    shutil.rmtree(policies / "toolgate" / "capability")
    client = make_app(policy_dir=policies).test_client()
    response = client.get("/v1/capabilities", headers=auth("u-1", roles=["admin"]))
    assert response.status_code == 200 and response.get_json()["tools"] == []


def test_an_unreachable_policy_engine_lists_nothing(make_app) -> None:
    client = make_app(engine="opa", opa_url=f"http://127.0.0.1:{free_port()}", opa_deadline_ms=300,
                      policy_dir=POLICIES, contracts_dir=CONTRACTS).test_client()
    response = client.get("/v1/capabilities", headers=auth("u-1", roles=["agent"]))
    assert_error(response, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)


def test_capabilities_need_a_token(make_app) -> None:
    assert_error(make_app().test_client().get("/v1/capabilities"), 401, "UNAUTHENTICATED", retryable=False)
