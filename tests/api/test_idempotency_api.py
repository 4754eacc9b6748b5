"""Idempotency through HTTP (DESIGN §4, tests/data/cases/README.md "Idempotency" cases 1-14), with
the real app, engine, contracts and Redis. The createTicket flow and the 14 cases run on a
standalone Redis and on a 3-master Redis Cluster (``ON_BOTH``); the rest on the standalone."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest

from app.redis_client import build_redis
from app.settings import Settings
from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.idempotency import SUPPORT, decide, idempotency_keys, report, ticket, ticket_input
from tests.support.servers import free_port

REPORT_INPUT = {"start_date": "2025-01-01", "end_date": "2025-01-31"}


ON_BOTH = pytest.mark.parametrize("redis_settings", ["standalone", "cluster"], indirect=True)


@pytest.fixture
def redis_settings(request, redis_server):
    """Settings overrides naming the Redis of this run (flushed): ``standalone`` unless the
    test is parametrized with ``cluster``."""
    # A generous socket timeout: a loaded test machine must not turn slow answers into 503s
    # (the timeout itself is tested in tests/unit/test_redis_client.py and tests/faults/).
    if getattr(request, "param", "standalone") == "cluster":
        url, cluster = request.getfixturevalue("redis_cluster").url, True
    else:
        url, cluster = redis_server.url, False
    overrides = {"redis_url": url, "redis_cluster": cluster, "redis_socket_timeout_ms": 2000}
    redis = build_redis(Settings(**overrides))
    redis.run("flush", lambda c: c.flushall())
    redis.close()
    return overrides


@pytest.fixture
def idem_app(make_app, redis_settings):
    """``idem_app(**overrides)``: an app on this run's Redis; its Redis client is closed after
    the test (a cluster client left to the garbage collector may drop unclosed sockets)."""
    apps = []

    def build(**overrides):
        apps.append(make_app(**{**redis_settings, **overrides}))
        return apps[-1]

    yield build
    for app in apps:
        app.extensions["toolgate"].idempotency.redis.close()


@pytest.fixture
def app(idem_app):
    return idem_app()


@pytest.fixture
def redis(redis_settings):
    """A Redis connection to inspect what the gateway stored."""
    connection = build_redis(Settings(**redis_settings))
    yield connection
    connection.close()


def _reserved(resp) -> dict:
    assert resp.status_code == 200, resp.get_json()
    info = resp.get_json()["idempotency"]
    assert info["state"] == "reserved" and info["replayed"] is False
    return info


def _replayed(resp) -> dict:
    assert resp.status_code == 200, resp.get_json()
    info = resp.get_json()["idempotency"]
    assert info["state"] == "replayed" and info["replayed"] is True
    return info


class ToolService:
    """A tool service in front of the gateway: executes createTicket only on a reservation."""

    def __init__(self, client) -> None:
        self.client = client
        self.executions = 0

    def create_ticket(self, tool_input: dict, **who) -> dict:
        resp = decide(self.client, "createTicket", tool_input, **who)
        assert resp.status_code == 200, resp.get_json()
        info = resp.get_json()["idempotency"]
        if info["state"] == "replayed":
            return info["result"]
        self.executions += 1
        result = ticket(f"T-{self.executions}", tool_input["title"])
        done = report(self.client, info["key"], "complete",
                      {"result": result, "reservation_token": info["reservation_token"]}, **who)
        assert done.status_code == 200, done.get_json()
        return result


# --- the createTicket flow of the design documents -------------------------------------------

@ON_BOTH
def test_create_ticket_flow_reserve_complete_replay_conflict(client):
    tool_input = ticket_input()
    key = tool_input["clientMutationId"]
    info = _reserved(decide(client, "createTicket", tool_input))
    assert info["key"] == key and info["lease_expires_at"].endswith("Z")
    done = report(client, key, "complete", {"result": ticket(), "reservation_token": info["reservation_token"]})
    assert done.status_code == 200, done.get_json()
    assert done.get_json()["state"] == "completed" and done.get_json()["retention_expires_at"].endswith("Z")
    replay = _replayed(decide(client, "createTicket", tool_input))
    assert replay["result"]["id"] == "T-1001" and replay["outcome"] == "completed"
    other = decide(client, "createTicket", {**tool_input, "title": "Another title"})
    error = assert_error(other, 422, "CONFLICT", retryable=False)
    assert "retry_after_seconds" not in error


# --- the 14 cases ---------------------------------------------------------------------------

@ON_BOTH
def test_case01_fresh_key_one_policy_evaluation_and_the_tool_runs_once(idem_app, opa_server):
    client = idem_app(engine="opa", opa_url=opa_server.url).test_client()
    service = ToolService(client)
    tool_input = ticket_input()
    first = service.create_ticket(tool_input)
    assert len(_decisions(opa_server)) == 1
    assert service.create_ticket(tool_input) == first
    assert service.executions == 1
    assert len(_decisions(opa_server)) == 2  # the replay was decided by the policy again


def _decisions(opa_server) -> list:
    """The sidecar's decision queries (not the session reads it is asked once per tool)."""
    return [call for call in opa_server.calls if call["path"].startswith("/v1/data/toolgate/decision?")]


@ON_BOTH
def test_case02_a_fresh_token_for_the_same_subject_still_replays(client):
    tool_input = ticket_input()
    headers = [auth("u-1", "acme", SUPPORT) for _ in range(2)]
    assert headers[0] != headers[1]
    first = client.post("/v1/decide", json=decide_body("createTicket", tool_input), headers=headers[0])
    info = _reserved(first)
    report(client, info["key"], "complete", {"result": ticket()})
    _replayed(client.post("/v1/decide", json=decide_body("createTicket", tool_input), headers=headers[1]))


@ON_BOTH
def test_case03_key_order_and_whitespace_do_not_change_the_fingerprint(client):
    tool_input = ticket_input()
    info = _reserved(decide(client, "createTicket", tool_input))
    report(client, info["key"], "complete", {"result": ticket()})
    reordered = {k: tool_input[k] for k in reversed(list(tool_input))}
    raw = json.dumps({"input": reordered, "version": "1", "tool": "createTicket"}, indent=3).encode()
    resp = client.post("/v1/decide", data=raw, content_type="application/json", headers=auth(roles=SUPPORT))
    assert _replayed(resp)["result"] == ticket()


@ON_BOTH
def test_case04_other_payload_is_422_and_the_record_is_untouched(client, redis):
    tool_input = ticket_input()
    info = _reserved(decide(client, "createTicket", tool_input))
    report(client, info["key"], "complete", {"result": ticket()})
    keys = idempotency_keys(redis)
    before = redis.run("test", lambda c: c.hgetall(keys[0]))
    assert_error(decide(client, "createTicket", {**tool_input, "priority": "low"}), 422, "CONFLICT", retryable=False)
    assert redis.run("test", lambda c: c.hgetall(keys[0])) == before
    assert _replayed(decide(client, "createTicket", tool_input))["result"] == ticket()


@ON_BOTH
def test_case05_twenty_concurrent_requests_one_reservation(idem_app):
    app = idem_app(threads=20)  # one pooled Redis connection per request thread
    tool_input = ticket_input()

    def burst() -> list:
        barrier = threading.Barrier(20)
        responses: list = []

        def call() -> None:
            client = app.test_client()
            barrier.wait()
            responses.append(decide(client, "createTicket", tool_input))

        threads = [threading.Thread(target=call) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return responses

    responses = burst()
    reserved = [r for r in responses if r.status_code == 200]
    assert len(reserved) == 1 and reserved[0].get_json()["idempotency"]["state"] == "reserved"
    for resp in responses:
        if resp.status_code != 200:
            error = assert_error(resp, 409, "CONFLICT", retryable=True)
            assert int(resp.headers["Retry-After"]) == error["retry_after_seconds"] >= 1
    report(app.test_client(), tool_input["clientMutationId"], "complete", {"result": ticket()})
    assert all(_replayed(resp)["result"] == ticket() for resp in burst())


@ON_BOTH
def test_case06_two_tenants_with_one_key_and_payload_are_independent(client):
    tool_input = ticket_input()
    key = tool_input["clientMutationId"]
    _reserved(decide(client, "createTicket", tool_input, tenant="acme"))
    _reserved(decide(client, "createTicket", tool_input, tenant="globex"))
    report(client, key, "complete", {"result": ticket("T-acme")}, tenant="acme")
    assert_error(decide(client, "createTicket", tool_input, tenant="globex"), 409, "CONFLICT", retryable=True)
    report(client, key, "complete", {"result": ticket("T-globex")}, tenant="globex")
    assert _replayed(decide(client, "createTicket", tool_input, tenant="acme"))["result"]["id"] == "T-acme"
    assert _replayed(decide(client, "createTicket", tool_input, tenant="globex"))["result"]["id"] == "T-globex"


@ON_BOTH
def test_case07_another_subject_of_the_tenant_has_its_own_record_never_the_result(client):
    """Keys are scoped by tenant and subject (DESIGN §4): the reference case's 422 was the
    symptom of another subject being able to pre-claim a guessable key; now bob's call with
    alice's key is bob's own, and nothing alice did shows."""
    tool_input = ticket_input()
    info = _reserved(decide(client, "createTicket", tool_input, sub="alice"))
    report(client, info["key"], "complete", {"result": ticket()}, sub="alice")
    bobs = _reserved(decide(client, "createTicket", tool_input, sub="bob"))
    assert "T-1001" not in json.dumps(bobs)
    report(client, info["key"], "complete", {"result": ticket("T-bob")}, sub="bob")
    assert _replayed(decide(client, "createTicket", tool_input, sub="alice"))["result"]["id"] == "T-1001"
    assert _replayed(decide(client, "createTicket", tool_input, sub="bob"))["result"]["id"] == "T-bob"


@ON_BOTH
def test_a_key_pre_claimed_by_another_subject_does_not_block_the_victim(client):
    """Issue: another subject could pre-claim a guessable key and the victim got 422."""
    tool_input = ticket_input()
    _reserved(decide(client, "createTicket", {**tool_input, "title": "squatted"}, sub="mallory"))
    _reserved(decide(client, "createTicket", tool_input, sub="alice"))


@ON_BOTH
def test_case08_rejected_requests_touch_no_key_and_the_corrected_one_works(client, redis):
    tool_input = ticket_input()
    body = decide_body("createTicket", tool_input)
    bad_token = client.post("/v1/decide", json=body, headers={"Authorization": "Bearer not.a.token"})
    assert_error(bad_token, 401, "UNAUTHENTICATED", retryable=False)
    assert_error(decide(client, "createTicket", {**tool_input, "priority": "urgent"}), 422, "VALIDATION_ERROR",
                 retryable=False, path="/priority")
    assert_error(decide(client, "createTicket", {**tool_input, "color": "red"}), 422, "VALIDATION_ERROR",
                 retryable=False, path="/color")
    assert idempotency_keys(redis) == []
    _reserved(decide(client, "createTicket", tool_input))


@ON_BOTH
def test_case09_policy_changed_to_deny_after_completion_denies_without_the_result(idem_app, client, tmp_path):
    tool_input = ticket_input()
    info = _reserved(decide(client, "createTicket", tool_input))
    report(client, info["key"], "complete", {"result": ticket()})
    frozen = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, frozen)
    (frozen / "tools" / "tickets" / "tickets.rego").write_text(
        'package tools.tickets\n\ngoverns.createTicket := {"versions": ["1"]}\n\n'
        'deny contains {"rule": "frozen", "message": "ticket creation is frozen"}\n'
    )
    resp = decide(idem_app(policy_dir=frozen).test_client(), "createTicket", tool_input)
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["decision"] == "deny" and body["reasons"] == ["ticket creation is frozen"]
    assert "idempotency" not in body and "T-1001" not in resp.get_data(as_text=True)
    assert _replayed(decide(client, "createTicket", tool_input))["result"] == ticket()


@ON_BOTH
def test_case10_crashed_executor_leaves_an_unknown_outcome_unless_retry_safe(idem_app):
    client = idem_app(idempotency_lease_s=1).test_client()
    tool_input = ticket_input()
    assert _reserved(decide(client, "createTicket", tool_input))["lease_expires_at"]
    _reserved(decide(client, "exportReport", REPORT_INPUT, key="report-1"))  # retry_safe: true
    time.sleep(1.1)
    error = assert_error(decide(client, "createTicket", tool_input), 409, "CONFLICT", retryable=False)
    assert error["details"] == {"outcome": "unknown"} and "retry_after_seconds" not in error
    _reserved(decide(client, "exportReport", REPORT_INPUT, key="report-1"))


@ON_BOTH
def test_case11_late_complete_after_reclaim_does_not_overwrite(idem_app):
    client = idem_app(idempotency_lease_s=1).test_client()
    first = _reserved(decide(client, "exportReport", REPORT_INPUT, key="report-2"))
    time.sleep(1.1)
    second = _reserved(decide(client, "exportReport", REPORT_INPUT, key="report-2"))
    assert second["reservation_token"] != first["reservation_token"]
    late = report(client, "report-2", "complete", {"result": {"rows": 1}, "reservation_token": first["reservation_token"]})
    assert assert_error(late, 409, "CONFLICT", retryable=False)["details"] == {"reason": "stale_reservation"}
    ok = report(client, "report-2", "complete", {"result": {"rows": 2}, "reservation_token": second["reservation_token"]})
    assert ok.status_code == 200
    assert _replayed(decide(client, "exportReport", REPORT_INPUT, key="report-2"))["result"] == {"rows": 2}


@ON_BOTH
def test_case12_lease_and_retention_are_separate_ttls(idem_app, redis):
    client = idem_app(idempotency_lease_s=60, idempotency_retention_s=7200).test_client()
    tool_input = ticket_input()
    _reserved(decide(client, "createTicket", tool_input))
    keys = idempotency_keys(redis)
    lease = next(k for k in keys if k.endswith(":lease"))
    record = next(k for k in keys if k.endswith(":record"))
    # margins of 10 s: the lease is 60 s, the retention 7200 s, so the two cannot be confused
    assert 50_000 < redis.run("t", lambda c: c.pttl(lease)) <= 60_000
    assert 7_250_000 < redis.run("t", lambda c: c.pttl(record)) <= 7_260_000  # lease + retention
    report(client, tool_input["clientMutationId"], "complete", {"result": ticket()})
    assert redis.run("t", lambda c: c.pttl(lease)) == -2
    assert 7_190_000 < redis.run("t", lambda c: c.pttl(record)) <= 7_200_000


@ON_BOTH
def test_case13_redis_down_is_503_for_mutating_tools_before_the_policy(idem_app, redis_settings, opa_server):
    down = {**redis_settings, "redis_url": f"redis://127.0.0.1:{free_port()}/0"}
    client = idem_app(engine="opa", opa_url=opa_server.url, **down).test_client()
    resp = decide(client, "createTicket", ticket_input())
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert resp.headers["Retry-After"] == "1"
    assert_error(decide(client, "exportReport", REPORT_INPUT, key="r-1"), 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    # A read-only call without a key fails closed too: when its policy reads the session
    # (readFile: the files family), the session cannot be read and the policy is never asked
    # without it.
    assert_error(decide(client, "readFile", {"path": "/srv/a.csv"}), 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert _decisions(opa_server) == []
    # When its policy reads no session (exportReport), its event cannot be noted: still 503.
    assert_error(decide(client, "exportReport", REPORT_INPUT), 503, "DEPENDENCY_UNAVAILABLE", retryable=True)


HOSTILE_KEYS = ["*", "?", "[a-z]*", "k*", "k:record", "{k}", "k}:lease", "{acme}:k", "acme k", " k", "k "]


@ON_BOTH
def test_case14_hostile_keys_cannot_reach_another_tenants_record(client, redis):
    victim = ticket_input()
    _reserved(decide(client, "createTicket", victim, key="k"))
    report(client, "k", "complete", {"result": ticket("T-victim")})
    for hostile in HOSTILE_KEYS:
        attack = decide(client, "createTicket", victim, key=hostile, tenant="evil")
        assert attack.status_code == 200 and attack.get_json()["idempotency"]["state"] == "reserved", hostile
        assert "T-victim" not in attack.get_data(as_text=True)
    assert_error(report(client, "k", "complete", {"result": ticket()}, tenant="evil"), 404, "NOT_FOUND", retryable=False)
    names = idempotency_keys(redis)
    assert len(names) == 1 + 2 * len(HOSTILE_KEYS)  # the victim's record; a record and a lease per attack
    assert not any(h.strip() in name.removeprefix("toolgate:idem:") for name in names for h in HOSTILE_KEYS)
    assert _replayed(decide(client, "createTicket", victim, key="k"))["result"]["id"] == "T-victim"


# --- keys -----------------------------------------------------------------------------------

def test_mutating_tool_without_key_is_400(client):
    resp = client.post("/v1/decide", json=decide_body("deleteFile", {"path": "/tmp/x"}), headers=auth(roles=["admin"]))
    assert_error(resp, 400, "VALIDATION_ERROR", retryable=False, path=["/headers/Idempotency-Key"])


def test_malformed_key_is_400_before_redis(idem_app):
    client = idem_app(redis_url=f"redis://127.0.0.1:{free_port()}/0").test_client()  # Redis is down
    for key in ["", "x" * 256, "caf\u00e9", "tab\there"]:
        headers = {**auth(roles=SUPPORT), "Idempotency-Key": key}
        resp = client.post("/v1/decide", json=decide_body("createTicket", ticket_input()), headers=headers)
        assert_error(resp, 400, "VALIDATION_ERROR", retryable=False, path=["/headers/Idempotency-Key"])


def test_header_key_wins_over_client_mutation_id(client):
    tool_input = ticket_input()
    info = _reserved(decide(client, "createTicket", tool_input, key="header-key"))
    assert info["key"] == "header-key"
    _reserved(decide(client, "createTicket", tool_input))  # clientMutationId is another key


def test_read_only_tool_without_key_has_no_idempotency(client, redis):
    resp = decide(client, "exportReport", REPORT_INPUT)
    assert resp.status_code == 200 and "idempotency" not in resp.get_json()
    assert idempotency_keys(redis) == []


def test_deny_reserves_nothing(client, redis):
    resp = decide(client, "createTicket", ticket_input(), roles=["auditor"])
    assert resp.get_json()["decision"] == "deny" and "idempotency" not in resp.get_json()
    assert idempotency_keys(redis) == []


# --- execution reports ----------------------------------------------------------------------

def test_reports_need_a_valid_token(client):
    resp = client.post("/v1/executions/k/complete", json={"result": {}})
    assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")


def test_unknown_key_other_subject_and_other_tenant_are_404(client):
    tool_input = ticket_input()
    key = _reserved(decide(client, "createTicket", tool_input))["key"]
    assert_error(report(client, "no-such-key", "complete", {"result": ticket()}), 404, "NOT_FOUND", retryable=False)
    for malformed in ("caf\u00e9", "bell\x07", "x" * 256):  # no record can have such a key
        assert_error(report(client, malformed, "complete", {"result": ticket()}), 404, "NOT_FOUND", retryable=False)
    assert_error(report(client, key, "complete", {"result": ticket()}, sub="u-2"), 404, "NOT_FOUND", retryable=False)
    assert_error(report(client, key, "fail", {"retryable": True, "reason": "x"}, tenant="globex"), 404, "NOT_FOUND", retryable=False)


def test_result_must_match_the_output_schema(client):
    key = _reserved(decide(client, "createTicket", ticket_input()))["key"]
    resp = report(client, key, "complete", {"result": {**ticket(), "status": "pending"}})
    assert_error(resp, 422, "VALIDATION_ERROR", retryable=False, path=["/status"])
    assert_error(report(client, key, "complete", {"result": {"id": "T-1"}}), 422, "VALIDATION_ERROR", retryable=False,
                 path=["/title", "/status", "/priority"])
    assert report(client, key, "complete", {"result": ticket()}).status_code == 200


STRICT_BODIES = [  # (outcome, body, the problems' paths)
    ("complete", {"result": {}, "extra": 1}, ["/extra"]),
    ("complete", {}, ["/result"]),
    ("complete", {"result": {}, "reservation_token": "short"}, ["/reservation_token"]),
    ("fail", {"retryable": "yes", "reason": "x"}, ["/retryable"]),
    ("fail", {"retryable": False, "reason": ""}, ["/reason"]),
    ("fail", {"retryable": False}, ["/reason"]),
]


def test_report_bodies_are_strict(client, redis):
    key = _reserved(decide(client, "createTicket", ticket_input()))["key"]
    for outcome, body, paths in STRICT_BODIES:
        assert_error(report(client, key, outcome, body), 422, "VALIDATION_ERROR", retryable=False, path=paths)
    record = next(name for name in idempotency_keys(redis) if name.endswith(":record"))
    assert redis.run("t", lambda c: c.hget(record, "state")) == "processing"


def test_report_body_must_be_json(client):
    resp = client.post("/v1/executions/k/complete", data=b"{not json", content_type="application/json",
                       headers=auth(roles=SUPPORT))
    assert_error(resp, 400, "VALIDATION_ERROR", retryable=False)


def test_retryable_failure_releases_and_final_failure_replays(client):
    released = ticket_input()
    key = _reserved(decide(client, "createTicket", released))["key"]
    resp = report(client, key, "fail", {"retryable": True, "reason": "ticket system returned 503"})
    assert resp.status_code == 200 and resp.get_json()["state"] == "released"
    assert "retention_expires_at" not in resp.get_json()
    _reserved(decide(client, "createTicket", released))

    final = ticket_input()
    key = _reserved(decide(client, "createTicket", final))["key"]
    resp = report(client, key, "fail", {"retryable": False, "reason": "project is archived"})
    assert resp.status_code == 200 and resp.get_json()["state"] == "failed"
    replay = _replayed(decide(client, "createTicket", final))
    assert replay["outcome"] == "failed" and replay["failure_reason"] == "project is archived"
    assert "result" not in replay
    assert_error(report(client, key, "complete", {"result": ticket()}), 409, "CONFLICT", retryable=False)


def test_a_repeated_complete_is_answered_again_and_a_different_one_conflicts(client):
    key = _reserved(decide(client, "createTicket", ticket_input()))["key"]
    assert report(client, key, "complete", {"result": ticket()}).status_code == 200
    assert report(client, key, "complete", {"result": ticket()}).status_code == 200
    assert_error(report(client, key, "complete", {"result": ticket("T-2")}), 409, "CONFLICT", retryable=False)


def test_keys_with_url_characters_reach_their_record(client):
    for key in ["a/b", "a/complete", "x y", "50%", "k?q=1", "#frag"]:
        info = _reserved(decide(client, "createTicket", ticket_input(), key=key))
        assert info["key"] == key
        resp = report(client, key, "complete", {"result": ticket()})
        assert resp.status_code == 200 and resp.get_json()["key"] == key, key


def test_openapi_documents_the_execution_reports(client):
    doc = client.get("/openapi.json").get_json()
    for outcome, schema in (("complete", "CompleteReport"), ("fail", "FailReport")):
        operation = doc["paths"][f"/v1/executions/{{key}}/{outcome}"]["post"]
        assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(schema)
        assert {"200", "401", "404", "409", "422", "503"} <= set(operation["responses"])
    info = doc["components"]["schemas"]["IdempotencyInfo"]["properties"]
    assert {"reservation_token", "lease_expires_at", "result", "replayed", "outcome"} <= set(info)



def test_execution_reports_are_recorded_in_the_decision_log(app, client):
    """DESIGN §6: every execution report, refused ones included, is a decision record; the key
    is stored only as its keyed hash."""
    from app.audit.queries import DecisionQuery

    tool_input = ticket_input()
    key = tool_input["clientMutationId"]
    assert decide(client, "createTicket", tool_input).status_code == 200
    assert report(client, key, "complete", {"result": ticket()}).status_code == 200
    assert_error(report(client, key, "fail", {"retryable": True, "reason": "too late"}), 409, "CONFLICT", retryable=False)
    reader = app.extensions["toolgate"].decision_reader
    completes = reader.query(DecisionQuery(tenant="acme", event="execution_complete"), limit=10).records
    fails = reader.query(DecisionQuery(tenant="acme", event="execution_fail"), limit=10).records
    assert [(r.reasons, r.error_code) for r in completes] == [(("execution completed",), None)]
    assert [(r.reasons, r.error_code) for r in fails] == [(("too late",), "CONFLICT")]
    decide_record = reader.query(DecisionQuery(tenant="acme", event="decide"), limit=10).records[0]
    assert completes[0].idempotency_key_hash == decide_record.idempotency_key_hash
    assert key not in completes[0].idempotency_key_hash
