"""The session under faults and hostile input (docs/session.md): Redis stopped or hanging fails
every decide call closed (no decision without ``input.session``), conversation ids that are
not valid ids fall into the subject's one "no conversation" (so they cannot open fresh
conversations), and limits a policy names wrongly deny. Each test owns a real redis-server."""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid

import pytest

from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.session_policy import write_session_policy


@pytest.fixture
def session_app(make_app, own_redis, tmp_path):
    return make_app(policy_dir=write_session_policy(tmp_path / "policy"), redis_url=own_redis.url,
                    redis_socket_timeout_ms=300)


def _delete(client, context: dict) -> object:
    headers = {**auth("u-1", "acme", ["admin"]), "Idempotency-Key": uuid.uuid4().hex}
    return client.post("/v1/decide", json=decide_body("deleteFile", {"path": "/srv/x"}, context=context), headers=headers)


def _read(client) -> object:
    return client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}), headers=auth("u-1", "acme", ["admin"]))


def _unavailable(resp) -> None:
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert resp.headers["Retry-After"] == "1"


def test_redis_stopped_fails_every_call_closed_and_records_it(session_app, own_redis):
    client = session_app.test_client()
    assert _read(client).get_json()["decision"] == "allow"
    own_redis.stop()
    resp = _read(client)
    _unavailable(resp)
    record = session_app.extensions["toolgate"].decision_reader.get(resp.headers["X-Decision-Id"])
    assert record.error_code == "DEPENDENCY_UNAVAILABLE" and record.decision is None
    _unavailable(_delete(client, {"conversation_id": "c-1"}))
    own_redis.start()
    assert _read(client).get_json()["decision"] == "allow"  # the same app reconnects


def test_hanging_redis_fails_within_the_socket_timeout(session_app, own_redis):
    client = session_app.test_client()
    assert _read(client).status_code == 200
    os.kill(own_redis.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        _unavailable(_read(client))
        assert time.monotonic() - started < 1.5
    finally:
        os.kill(own_redis.proc.pid, signal.SIGCONT)
    assert _read(client).status_code == 200


@pytest.mark.parametrize("hostile", ["x" * 129, "", "tab\there", "ünïcode", 42, None, ["c-1"], {"id": "c-1"}])
def test_a_conversation_id_that_is_no_id_is_the_no_conversation(session_app, hostile):
    client = session_app.test_client()
    assert _delete(client, {}).get_json()["decision"] == "allow"
    again = _delete(client, {"conversation_id": hostile})
    assert again.status_code == 200 and again.get_json()["reasons"] == ["one delete per conversation"]


@pytest.mark.parametrize("hostile", ["*", "{c}", "c}:limit", "toolgate:sess:{x}:timeline", "a b"])
def test_hostile_conversation_ids_are_their_own_conversations(session_app, hostile):
    client = session_app.test_client()
    assert _delete(client, {"conversation_id": hostile}).get_json()["decision"] == "allow"
    assert _delete(client, {"conversation_id": hostile}).get_json()["decision"] == "deny"
    assert _delete(client, {"conversation_id": hostile + "-2"}).get_json()["decision"] == "allow"


BAD_LIMIT = """package toolgate

import rego.v1

decision := {"decision": "allow", "reasons": ["ok"],
	"limits": [{"id": "bad id with spaces", "scope": "subject", "window_s": 60, "max": 1}]}
"""


def test_a_limit_the_policy_names_wrongly_is_a_deny(make_app, own_redis, tmp_path):
    (tmp_path / "bad" / "toolgate").mkdir(parents=True)
    (tmp_path / "bad" / "toolgate" / "decision.rego").write_text(BAD_LIMIT)
    client = make_app(policy_dir=tmp_path / "bad", redis_url=own_redis.url).test_client()
    resp = _read(client).get_json()
    assert resp["decision"] == "deny" and resp["reasons"] == ["no policy decision"]


def test_large_arguments_are_left_out_of_recent_calls(make_app, own_redis, monkeypatch, tmp_path):
    seen = []
    # The shipped policy with the files family also reading session.recent (built only for a
    # family that declares it, docs/session.md "Facts on demand").
    policy = tmp_path / "policy"
    shutil.copytree(POLICY_DIR, policy)
    files = policy / "tools" / "files" / "files.rego"
    files.write_text(files.read_text().replace("session_reads := {", 'session_reads := {"session.recent", '))
    app = make_app(redis_url=own_redis.url, session_max_args_bytes=64, policy_dir=policy)
    deps = app.extensions["toolgate"]
    evaluate = deps.engine.evaluate

    def spy(document, **kw):
        seen.append(document)
        return evaluate(document, **kw)

    monkeypatch.setattr(deps.engine, "evaluate", spy)
    client = app.test_client()
    headers = auth("u-1", "acme", ["support_agent"])
    for path in ("/srv/" + "a" * 100, "/srv/short"):
        client.post("/v1/decide", json=decide_body("readFile", {"path": path}), headers=headers)
    client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/z"}), headers=headers)
    recent = seen[-1]["session"]["recent"]
    assert [r["args"] for r in recent] == [{"path": "/srv/short"}, None]
