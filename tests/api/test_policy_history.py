"""``input.history`` is built by the gateway from its own decision log for the verified subject
and conversation, never from what the caller sends (case pc-17). The case's policy is
written here, not in the shipped ``policies/``."""

from __future__ import annotations

import uuid

import pytest

from tests.support.calls import auth, decide_body

ONE_IRREVERSIBLE_ACTION = """package toolgate

import rego.v1

irreversible if {
	input.tool.name == "git"
	input.call.input.args[0] in {"push", "delete"}
}

earlier := object.get(input.history, ["tools", "git"], 0)

decision := {"decision": "deny", "reasons": ["only one irreversible action per conversation"]} if {
	irreversible
	earlier > 0
} else := {"decision": "allow", "reasons": ["first irreversible action"]}
"""


@pytest.fixture
def history_client(make_app, tmp_path):
    (tmp_path / "toolgate").mkdir()
    (tmp_path / "toolgate" / "decision.rego").write_text(ONE_IRREVERSIBLE_ACTION)
    return make_app(policy_dir=tmp_path).test_client()


def _push(client, conversation_id, client_history=None, sub="u-alice"):
    context = {"conversation_id": conversation_id}
    if client_history is not None:
        context["history"] = client_history
    body = decide_body("git", {"args": ["push", "origin", "main"]}, context=context)
    return client.post("/v1/decide", json=body, headers=auth(sub, "acme", ["developer"])).get_json()


def test_pc17_second_irreversible_action_in_a_conversation_is_denied(history_client):
    """pc-17: the client sends a trimmed history that omits the first push; the gateway's own
    record decides. (History counts allowed calls per tool, so the policy reads ``git``.)"""
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    assert _push(history_client, conversation)["decision"] == "allow"
    second = _push(history_client, conversation, client_history=[])
    assert second["decision"] == "deny"
    assert second["reasons"] == ["only one irreversible action per conversation"]


def test_history_is_per_conversation_and_subject(history_client):
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    assert _push(history_client, conversation)["decision"] == "allow"
    assert _push(history_client, f"conv-{uuid.uuid4().hex[:8]}")["decision"] == "allow"
    assert _push(history_client, conversation, sub="u-bob")["decision"] == "allow"


def test_no_conversation_means_no_history(history_client):
    body = decide_body("git", {"args": ["push"]})
    headers = auth("u-alice", "acme", ["developer"])
    assert history_client.post("/v1/decide", json=body, headers=headers).get_json()["decision"] == "allow"
    assert history_client.post("/v1/decide", json=body, headers=headers).get_json()["decision"] == "allow"
