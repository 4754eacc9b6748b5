"""AuthZEN Authorization API 1.0 through the HTTP interface: the specification's request
examples (api/authorization-api-1_0.md of the OpenID AuthZEN working group, §6-§7, §9, §12)
sent as written, answered with its response shapes; decided by the real engine with the test
policy of tests/mcp/policies (readers may read documents that are not private) and recorded
as dry runs."""

from __future__ import annotations

import pytest

from tests.mcp.conftest import CONTRACTS, POLICIES
from tests.support.calls import auth
from tests.support.errors import assert_error

ALICE = "alice@example.com"

#: §6.1 "Example Request" (the Access Evaluation API).
EVALUATION = {
    "subject": {"type": "user", "id": ALICE},
    "resource": {"type": "account", "id": "123"},
    "action": {"name": "can_read", "properties": {"method": "GET"}},
    "context": {"time": "1985-10-26T01:22-07:00"},
}
#: §7.1.2.1 "Evaluate read action for three documents".
THREE_DOCUMENTS = {
    "subject": {"type": "user", "id": ALICE},
    "action": {"name": "read"},
    "evaluations": [{"resource": {"type": "document", "id": n}} for n in ("1", "2", "3")],
}
#: §7.1.1 defaults, the third evaluation overriding the action.
DEFAULTS = {
    "subject": {"type": "user", "id": ALICE},
    "context": {"time": "2024-05-31T15:22-07:00"},
    "action": {"name": "can_read"},
    "evaluations": [
        {"resource": {"type": "document", "id": "boxcarring.md"}},
        {"resource": {"type": "document", "id": "subject-search.md"}},
        {"action": {"name": "can_edit"}, "resource": {"type": "document", "id": "resource-search.md"}},
    ],
}


@pytest.fixture
def client(make_app):
    return make_app(policy_dir=POLICIES, contracts_dir=CONTRACTS).test_client()


def reader(**kw):
    return auth(ALICE, roles=["reader"], **kw)


def decisions(body) -> list[bool]:
    return [answer["decision"] for answer in body["evaluations"]]


def test_the_single_evaluation_example_is_answered_with_a_decision(client) -> None:
    response = client.post("/access/v1/evaluation", json=EVALUATION,
                           headers={**reader(), "X-Request-ID": "bfe9eb29-ab87-4ca3-be83-a1d5d8305716"})
    body = response.get_json()
    assert response.status_code == 200 and response.headers["X-Request-Id"] == "bfe9eb29-ab87-4ca3-be83-a1d5d8305716"
    assert body["decision"] is True
    assert body["context"]["toolgate_decision"] == "allow"


def test_execute_all_answers_every_evaluation_in_order(client) -> None:
    body = client.post("/access/v1/evaluations", json={**THREE_DOCUMENTS, "options": {"evaluations_semantic": "execute_all"}},
                       headers=reader()).get_json()
    assert decisions(body) == [True, False, True]
    assert body["evaluations"][1]["context"]["reason"] == "document 2 is private"
    assert "decision" not in body  # §7.2: omitted when evaluations are present


def test_deny_on_first_deny_stops_at_the_first_denial(client) -> None:
    body = client.post("/access/v1/evaluations", json={**THREE_DOCUMENTS, "options": {"evaluations_semantic": "deny_on_first_deny"}},
                       headers=reader()).get_json()
    assert decisions(body) == [True, False]


def test_permit_on_first_permit_stops_at_the_first_permit(client) -> None:
    body = client.post("/access/v1/evaluations", json={**THREE_DOCUMENTS, "options": {"evaluations_semantic": "permit_on_first_permit"}},
                       headers=reader()).get_json()
    assert decisions(body) == [True]


def test_defaults_fill_each_evaluation_and_an_evaluation_overrides_them(client) -> None:
    body = client.post("/access/v1/evaluations", json=DEFAULTS, headers=reader()).get_json()
    assert decisions(body) == [True, False, False]
    assert body["evaluations"][2]["context"]["reasons"] == ["no role of the caller may use can_edit"]


def test_evaluations_without_an_array_behave_like_one_evaluation(client) -> None:
    body = client.post("/access/v1/evaluations", json=EVALUATION, headers=reader()).get_json()
    assert body["decision"] is True and "evaluations" not in body


def test_a_tool_resource_maps_to_that_tool_and_its_arguments(client) -> None:
    allowed = {"subject": {"type": "identity", "id": "u-1"}, "action": {"name": "tools/call", "properties": {"arguments": {"amount": 50, "to": "bob"}}},
               "resource": {"type": "tool", "id": "transfer"}}
    approval = {**allowed, "action": {"name": "tools/call", "properties": {"arguments": {"amount": 500, "to": "bob"}}}}
    headers = auth("u-1", roles=["agent"])
    assert client.post("/access/v1/evaluation", json=allowed, headers=headers).get_json()["decision"] is True
    body = client.post("/access/v1/evaluation", json=approval, headers=headers).get_json()
    assert body["decision"] is False and body["context"]["toolgate_decision"] == "user-approval"


def test_every_evaluation_is_recorded_as_a_dry_run(client) -> None:
    client.post("/access/v1/evaluations", json=THREE_DOCUMENTS, headers=reader())
    records = client.get("/v1/decisions?event=decide_dry_run", headers=auth("aud-1", roles=["auditor"])).get_json()["records"]
    assert sorted(r["input"]["resource"]["id"] for r in records) == ["1", "2", "3"]
    assert {r["subject_id"] for r in records} == {ALICE}


def test_another_subject_than_the_caller_is_refused(client) -> None:
    other = {**EVALUATION, "subject": {"type": "user", "id": "bob@example.com"}}
    assert_error(client.post("/access/v1/evaluation", json=other, headers=reader()), 403, "FORBIDDEN", retryable=False)
    body = client.post("/access/v1/evaluations", json={"evaluations": [other]}, headers=reader()).get_json()
    assert body["evaluations"] == [{"decision": False, "context": {"error": {
        "status": 403, "code": "FORBIDDEN", "message": "the evaluation's subject is not the authenticated caller"}}}]


@pytest.mark.parametrize(("body", "missing"), [
    ({}, ["/subject", "/action", "/resource"]),
    ({"subject": {"type": "user", "id": ALICE}, "action": {"name": "read"}}, ["/resource"]),
    ({**EVALUATION, "subject": {"id": ALICE}}, ["/subject/type"]),
])
def test_an_omitted_required_attribute_is_a_bad_request(client, body, missing) -> None:
    response = client.post("/access/v1/evaluation", json=body, headers=reader())
    assert_error(response, 400, "VALIDATION_ERROR", retryable=False, path=missing)


def test_an_evaluation_lacking_an_entity_without_default_is_closed_with_an_error(client) -> None:
    body = client.post("/access/v1/evaluations", json={"evaluations": [{"action": {"name": "read"}}]}, headers=reader()).get_json()
    [answer] = body["evaluations"]
    assert answer["decision"] is False and answer["context"]["error"]["status"] == 400


def test_unknown_members_are_ignored(client) -> None:
    body = {**EVALUATION, "extension": {"x": 1}, "options": {"another_option": "value"}}
    assert client.post("/access/v1/evaluation", json=body, headers=reader()).get_json()["decision"] is True


def test_a_request_without_a_token_is_unauthorized(client) -> None:
    response = client.post("/access/v1/evaluation", json=EVALUATION)
    assert_error(response, 401, "UNAUTHENTICATED", retryable=False)


def test_the_pdp_metadata_names_the_endpoints(client, make_app) -> None:
    body = make_app(authzen_allowed_hosts="pdp.example.com").test_client().get(
        "/.well-known/authzen-configuration", base_url="https://pdp.example.com").get_json()
    assert body == {
        "policy_decision_point": "https://pdp.example.com",
        "access_evaluation_endpoint": "https://pdp.example.com/access/v1/evaluation",
        "access_evaluations_endpoint": "https://pdp.example.com/access/v1/evaluations",
    }
    pinned = make_app(authzen_pdp_url="https://pdp.toolgate.test").test_client()
    assert pinned.get("/.well-known/authzen-configuration").get_json()["policy_decision_point"] == "https://pdp.toolgate.test"


# --- PEP credentials, X-Request-ID and the decision context (issue 24) ---------------------

PEP = "pep-gateway"


@pytest.fixture
def pep_app(make_app):
    return make_app(policy_dir=POLICIES, contracts_dir=CONTRACTS, authzen_pep_role="authzen_pep")


def pep(**kw):
    return auth(PEP, roles=["authzen_pep"], **kw)


def test_a_pep_credential_asks_about_any_subject_of_its_tenant(pep_app) -> None:
    client = pep_app.test_client()
    bob = {**EVALUATION, "subject": {"type": "user", "id": "bob@example.com"}}
    assert client.post("/access/v1/evaluation", json=bob, headers=pep()).get_json()["decision"] is False
    body = client.post("/access/v1/evaluations", json={**THREE_DOCUMENTS, "subject": {"type": "user", "id": "bob"}},
                       headers=pep()).get_json()
    # The test policy grants by role; an asserted subject has none of its own: closed.
    assert decisions(body) == [False, False, False]
    records = client.get("/v1/decisions?event=decide_dry_run", headers=auth("aud-1", roles=["auditor"])).get_json()["records"]
    assert {(r["subject_id"], r["tenant"]) for r in records} == {("bob@example.com", "acme"), ("bob", "acme")}
    assert {r["policy_input"]["subject"]["asserted_by"] for r in records} == {PEP}
    assert {tuple(r["policy_input"]["subject"]["roles"]) for r in records} == {()}


def test_an_end_user_token_still_asks_about_itself_only(pep_app) -> None:
    other = {**EVALUATION, "subject": {"type": "user", "id": "bob@example.com"}}
    response = pep_app.test_client().post("/access/v1/evaluation", json=other, headers=reader())
    assert_error(response, 403, "FORBIDDEN", retryable=False)


def test_a_pep_asking_about_itself_is_decided_as_itself(pep_app) -> None:
    own = {**EVALUATION, "subject": {"type": "service", "id": PEP}}
    pep_app.test_client().post("/access/v1/evaluation", json=own, headers=pep())
    [record] = pep_app.test_client().get("/v1/decisions?event=decide_dry_run",
                                         headers=auth("aud-1", roles=["auditor"])).get_json()["records"]
    assert record["subject_id"] == PEP and "asserted_by" not in record["policy_input"]["subject"]


def test_an_asserted_subject_id_that_is_not_printable_is_a_bad_request(pep_app) -> None:
    body = {**EVALUATION, "subject": {"type": "user", "id": "bob\nadmin"}}
    response = pep_app.test_client().post("/access/v1/evaluation", json=body, headers=pep())
    assert_error(response, 400, "VALIDATION_ERROR", retryable=False, path=["/subject/id"])


def test_without_the_pep_setting_the_role_gives_no_right_to_assert(client) -> None:
    other = {**EVALUATION, "subject": {"type": "user", "id": "bob@example.com"}}
    assert_error(client.post("/access/v1/evaluation", json=other, headers=pep()), 403, "FORBIDDEN", retryable=False)


@pytest.mark.parametrize("request_id", ["req/42+AbC==", "{\"x\":1}", "a" * 128, "~!@#$%^&*()"])
def test_a_safe_request_id_comes_back_as_sent(client, request_id) -> None:
    response = client.post("/access/v1/evaluation", json=EVALUATION, headers={**reader(), "X-Request-ID": request_id})
    assert response.status_code == 200 and response.headers["X-Request-Id"] == request_id


@pytest.mark.parametrize("request_id", ["two words", "a" * 129, "caf\u00e9", "tab\there"])
def test_an_unsafe_request_id_is_refused_not_replaced(client, request_id) -> None:
    response = client.post("/access/v1/evaluations", json=THREE_DOCUMENTS,
                           headers={**reader(), "X-Request-ID": request_id.encode().decode("latin-1")})
    assert_error(response, 400, "VALIDATION_ERROR", retryable=False, path=["/headers/X-Request-ID"])
    assert response.headers["X-Request-Id"] != request_id


def test_options_include_context_false_answers_the_decision_alone(client) -> None:
    body = client.post("/access/v1/evaluations", json={**THREE_DOCUMENTS, "options": {"include_context": False}},
                       headers=reader()).get_json()
    assert body == {"evaluations": [{"decision": True}, {"decision": False}, {"decision": True}]}
    single = client.post("/access/v1/evaluation", json={**EVALUATION, "options": {"include_context": False}}, headers=reader())
    assert single.get_json() == {"decision": True}


@pytest.mark.parametrize("value", ["yes", "no", "off", "true", 0, 1])
def test_options_include_context_takes_only_a_json_boolean(client, value) -> None:
    """``"yes"`` or ``0`` is refused, as decide refuses ``"dry_run": "yes"``; never read as a
    boolean."""
    for path, body in (("/access/v1/evaluation", EVALUATION), ("/access/v1/evaluations", THREE_DOCUMENTS)):
        response = client.post(path, json={**body, "options": {"include_context": value}}, headers=reader())
        assert_error(response, 400, "VALIDATION_ERROR", retryable=False, path=["/options/include_context"])


def test_the_setting_drops_context_and_a_request_may_ask_for_it_back(make_app) -> None:
    client = make_app(policy_dir=POLICIES, contracts_dir=CONTRACTS, authzen_decision_context=False).test_client()
    refused = {"evaluations": [{**EVALUATION, "subject": {"type": "user", "id": "bob@example.com"}}]}
    assert client.post("/access/v1/evaluations", json=refused, headers=reader()).get_json() == {"evaluations": [{"decision": False}]}
    assert client.post("/access/v1/evaluation", json=EVALUATION, headers=reader()).get_json() == {"decision": True}
    asked = client.post("/access/v1/evaluation", json={**EVALUATION, "options": {"include_context": True}}, headers=reader())
    assert asked.get_json()["context"]["toolgate_decision"] == "allow"


# --- a mapped call that fails the tool's contract (issue 26) ----------------------------------

def _tool_call(arguments, **entities):
    return {"subject": {"type": "identity", "id": "u-1"}, "resource": {"type": "tool", "id": "transfer"},
            "action": {"name": "tools/call", "properties": {"arguments": arguments}}, **entities}


def test_arguments_that_fail_the_contract_are_a_bad_request_at_the_requests_paths(client) -> None:
    response = client.post("/access/v1/evaluation", json=_tool_call({"amount": "lots", "to": "bob", "memo": "x"}),
                           headers=auth("u-1", roles=["agent"]))
    assert_error(response, 400, "VALIDATION_ERROR", retryable=False,
                 path=["/action/properties/arguments/memo", "/action/properties/arguments/amount"])


def test_in_a_batch_each_problem_names_where_its_entity_was_written(client) -> None:
    batch = {**_tool_call({"amount": 0, "to": "bob"}),
             "evaluations": [{}, {"action": {"name": "tools/call", "properties": {"arguments": {"to": "bob"}}}}]}
    body = client.post("/access/v1/evaluations", json=batch, headers=auth("u-1", roles=["agent"])).get_json()
    errors = [answer["context"]["error"] for answer in body["evaluations"]]
    assert [e["status"] for e in errors] == [400, 400]
    assert [[p["path"] for p in e["details"]["problems"]] for e in errors] == [
        ["/action/properties/arguments/amount"], ["/evaluations/1/action/properties/arguments"]]
