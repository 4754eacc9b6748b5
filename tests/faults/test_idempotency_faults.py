"""Idempotency under faults (DESIGN §4): Redis stopped, restarted empty or hanging; leases that
expire without a report; late reports. Each test owns a real redis-server it can stop."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import yaml

from app.audit.queries import DecisionQuery
from app.audit.stores import open_decision_log
from app.cli import main
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.idempotency import decide, report, ticket, ticket_input
from tests.support.paths import CONTRACTS_DIR

REPORT_INPUT = {"start_date": "2025-01-01", "end_date": "2025-01-31"}



@pytest.fixture
def app_on(make_app, own_redis):
    """``app_on(**overrides)``: an app on ``own_redis`` with a socket timeout that a loaded test
    machine does not hit by accident (2 s) unless the test sets its own. Each app's Redis pool
    is closed at the end (its connections outlive a stopped and restarted server)."""
    apps = []

    def build(**overrides):
        app = make_app(**{"redis_url": own_redis.url, "redis_socket_timeout_ms": 2000, **overrides})
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.extensions["toolgate"].redis.close()


def _state(resp) -> str:
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()["idempotency"]["state"]


def _unavailable(resp) -> None:
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert resp.headers["Retry-After"] == "1"


def test_redis_stopped_mid_run_allows_nothing_then_recovers(app_on, own_redis, opa_server):
    client = app_on(engine="opa", opa_url=opa_server.url).test_client()
    reserved = ticket_input()
    assert _state(decide(client, "createTicket", reserved)) == "reserved"
    asked = len(opa_server.calls)

    own_redis.stop()
    _unavailable(decide(client, "createTicket", ticket_input()))
    _unavailable(decide(client, "createTicket", reserved))
    _unavailable(report(client, reserved["clientMutationId"], "complete", {"result": ticket()}))
    # Read-only calls too: the session (input.session) the files family reads is in Redis, and
    # no decision is made without it.
    _unavailable(decide(client, "readFile", {"path": "/srv/reports/q1.csv"}))
    assert len(opa_server.calls) == asked  # the policy was never asked
    # A tool whose family reads no session is asked, but its answer is not returned: its event
    # cannot be written.
    _unavailable(decide(client, "exportReport", REPORT_INPUT))

    own_redis.start()  # back, empty: the same app reconnects without a restart
    assert _state(decide(client, "createTicket", ticket_input())) == "reserved"


def test_redis_restarted_empty_forgets_completed_keys(app_on, own_redis):
    """The durability limit stated in docs/operators.md: without persistence a restart loses records."""
    client = app_on().test_client()
    tool_input = ticket_input()
    assert _state(decide(client, "createTicket", tool_input)) == "reserved"
    assert report(client, tool_input["clientMutationId"], "complete", {"result": ticket()}).status_code == 200
    assert _state(decide(client, "createTicket", tool_input)) == "replayed"
    own_redis.restart_empty()
    assert _state(decide(client, "createTicket", tool_input)) == "reserved"  # treated as new


@pytest.mark.serial  # the 503 must come within 1.5 s
def test_hanging_redis_fails_within_the_socket_timeout(app_on, own_redis):
    client = app_on(redis_socket_timeout_ms=300).test_client()
    assert _state(decide(client, "createTicket", ticket_input())) == "reserved"
    os.kill(own_redis.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        _unavailable(decide(client, "createTicket", ticket_input()))
        assert time.monotonic() - started < 1.5
        started = time.monotonic()
        _unavailable(decide(client, "exportReport", REPORT_INPUT))
        assert time.monotonic() - started < 1.5
    finally:
        os.kill(own_redis.proc.pid, signal.SIGCONT)
    assert _state(decide(client, "createTicket", ticket_input())) == "reserved"


def _resolve(monkeypatch, capsys, redis_url: str, key: str, outcome: str) -> tuple[int, str, str]:
    """``toolgate idempotency resolve`` in this process, configured through the environment
    (its decision log is ``TOOLGATE_AUDIT_DSN``, set by ``cli_audit_dsn``)."""
    monkeypatch.setenv("TOOLGATE_REDIS_URL", redis_url)
    monkeypatch.setenv("TOOLGATE_REDIS_SOCKET_TIMEOUT_MS", "2000")
    code = main(["idempotency", "resolve", "--tenant", "acme", "--subject", "u-1", "--key", key, "--as", outcome])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def cli_audit_dsn(tmp_path, monkeypatch):
    dsn = str(tmp_path / "cli-decisions.sqlite")
    monkeypatch.setenv("TOOLGATE_AUDIT_DSN", dsn)
    return dsn


def _resolutions(dsn: str) -> list:
    store = open_decision_log(dsn)
    try:
        return store.query(DecisionQuery(tenant="acme", event="idempotency_resolve"), limit=100).records
    finally:
        store.close()


def test_expired_lease_blocks_until_an_operator_resolves(app_on, own_redis, monkeypatch, capsys, cli_audit_dsn):
    client = app_on(idempotency_lease_s=1).test_client()
    tool_input = ticket_input()
    key = tool_input["clientMutationId"]
    assert _state(decide(client, "createTicket", tool_input)) == "reserved"
    running = ticket_input()
    assert _state(decide(app_on().test_client(), "createTicket", running)) == "reserved"  # a 60 s lease
    code, _, err = _resolve(monkeypatch, capsys, own_redis.url, running["clientMutationId"], "released")
    assert code == 1 and "still in progress" in err
    time.sleep(1.1)
    blocked = decide(client, "createTicket", tool_input)
    assert assert_error(blocked, 409, "CONFLICT", retryable=False)["details"] == {"outcome": "unknown"}

    code, out, _ = _resolve(monkeypatch, capsys, own_redis.url, key, "released")
    assert code == 0 and json.loads(out) == {"tenant": "acme", "subject": "u-1", "key": key, "state": "released"}
    assert _state(decide(client, "createTicket", tool_input)) == "reserved"
    time.sleep(1.1)
    code, out, _ = _resolve(monkeypatch, capsys, own_redis.url, key, "completed")
    assert code == 0 and json.loads(out)["state"] == "completed"
    records = _resolutions(cli_audit_dsn)
    assert [r.reasons for r in records] == [
        ("resolved as completed by an operator",), ("resolved as released by an operator",)
    ]
    assert all(r.idempotency_key_hash and key not in r.idempotency_key_hash for r in records)
    replay = decide(client, "createTicket", tool_input).get_json()["idempotency"]
    assert replay["state"] == "replayed" and replay["outcome"] == "completed" and replay["result"] is None

    done = ticket_input()
    reserved = decide(client, "createTicket", done).get_json()["idempotency"]
    assert report(client, reserved["key"], "complete", {"result": ticket()}).status_code == 200
    code, _, err = _resolve(monkeypatch, capsys, own_redis.url, reserved["key"], "released")
    assert code == 1 and "completed" in err  # releasing a completed call would run it again
    assert decide(client, "createTicket", done).get_json()["idempotency"]["state"] == "replayed"
    code, _, err = _resolve(monkeypatch, capsys, own_redis.url, "no-such-key", "completed")
    assert code == 1 and "no idempotency record" in err
    code, _, err = _resolve(monkeypatch, capsys, own_redis.url, "bad\x7fkey", "completed")
    assert code == 2
    own_redis.stop()
    code, _, err = _resolve(monkeypatch, capsys, own_redis.url, key, "completed")
    assert code == 1 and "unavailable" in err


@pytest.fixture
def retry_safe_delete(tmp_path):
    """A contracts dir where deleteFile is retry_safe with a 2 s lease (the default is 60 s)."""
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    spec = yaml.safe_load((CONTRACTS_DIR / "deleteFile.v1.yaml").read_text())
    spec.update(retry_safe=True, lease_s=2)
    (contracts / "deleteFile.v1.yaml").write_text(yaml.safe_dump(spec))
    return contracts


def test_retry_safe_lease_expiry_reclaims_and_a_late_complete_is_refused(app_on, retry_safe_delete):
    client = app_on(contracts_dir=retry_safe_delete).test_client()
    call = {"path": "/srv/tmp/old.log"}
    admin = {"roles": ["admin"]}
    first = decide(client, "deleteFile", call, key="del-1", **admin)
    assert _state(first) == "reserved"
    busy = decide(client, "deleteFile", call, key="del-1", **admin)
    assert_error(busy, 409, "CONFLICT", retryable=True)
    assert busy.headers["Retry-After"] in ("1", "2")  # the contract's lease
    time.sleep(2.1)
    # The expired lease keeps its share of "one delete per conversation" spent (the first call
    # may have run), so the re-claim is sent in another conversation.
    body = decide_body("deleteFile", call, context={"conversation_id": "c-reclaim"})
    second = client.post("/v1/decide", json=body, headers={**auth("u-1", "acme", ["admin"]), "Idempotency-Key": "del-1"})
    assert _state(second) == "reserved"
    old_token = first.get_json()["idempotency"]["reservation_token"]
    new_token = second.get_json()["idempotency"]["reservation_token"]
    late = report(client, "del-1", "complete", {"result": {"deleted": "first"}, "reservation_token": old_token}, **admin)
    assert assert_error(late, 409, "CONFLICT", retryable=False)["details"] == {"reason": "stale_reservation"}
    done = report(client, "del-1", "complete", {"result": {"deleted": "second"}, "reservation_token": new_token}, **admin)
    assert done.status_code == 200
    replay = decide(client, "deleteFile", call, key="del-1", **admin).get_json()["idempotency"]
    assert replay["state"] == "replayed" and replay["result"] == {"deleted": "second"}


def test_readyz_reports_redis_down_and_back(app_on, own_redis):
    client = app_on().test_client()
    assert client.get("/readyz").status_code == 200
    own_redis.stop()
    down = client.get("/readyz")
    assert down.status_code == 503, down.get_json()
    assert down.get_json()["status"] == "unavailable" and down.get_json()["checks"]["redis"] == "unavailable"
    assert down.get_json()["checks"]["decision_log"] == "ok"
    own_redis.start()
    assert client.get("/readyz").get_json()["checks"]["redis"] == "ok"
