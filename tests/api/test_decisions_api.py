"""The decision log through the HTTP API and the ``toolgate audit`` commands, on SQLite and on
PostgreSQL: every decide call recorded with the fields of its response, nothing secret stored,
auditor queries with every filter, tenant isolation, pagination while calls arrive."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import uuid
from pathlib import Path

import jwt
import psycopg
import pytest

from app.audit.queries import DecisionQuery
from app.audit.records import AuditEvent, hash_idempotency_key
from app.cli import main
from tests.support.calls import auth, decide_body, make_token
from tests.support.decision_cases import CASES
from tests.support.errors import assert_error
from tests.support.paths import BANKING_CALLS
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
AUDITOR = ["auditor"]


@pytest.fixture
def audit_app(make_app, audit_dsn):  # noqa: F811
    app = make_app(audit_dsn=audit_dsn, audit_platform_tenant="ops")
    yield app
    app.extensions["toolgate"].decision_log.close()


@pytest.fixture
def client(audit_app):
    return audit_app.test_client()


def records_of(app, **filters) -> list:
    return list(app.extensions["toolgate"].decision_reader.iter_records(DecisionQuery(**filters)))


def _calls():
    """(headers, body or raw bytes, the expected error or None) of a decide suite: every shared
    decision case, the AgentDojo banking calls, and error outcomes after authentication. An
    expected error is the arguments of ``assert_error`` after the response."""
    for case in CASES:
        headers = {**auth(case.sub, case.tenant, list(case.roles)), "Idempotency-Key": f"k-{uuid.uuid4().hex}"}
        yield headers, decide_body(case.tool, case.input, context={"conversation_id": "conv-cases"}, **case.extra), None
    for line in BANKING_CALLS.read_text().splitlines():
        call = json.loads(line)
        headers = {**auth("emma", "bank-demo", ["account_holder"]), "Idempotency-Key": f"k-{uuid.uuid4().hex}",
                   "traceparent": TRACEPARENT}
        yield headers, decide_body(call["function"], call["args"]), None
    agent = auth(roles=["support_agent"])
    invalid = {"retryable": False}
    yield (agent, decide_body("readFile", {"path": "/srv/a", "unexpected": 1}),
           (422, "VALIDATION_ERROR", {**invalid, "path": "/unexpected"}))
    yield agent, b"{not json", (400, "VALIDATION_ERROR", invalid)
    yield (agent, decide_body("createTicket", {"title": "t"}),
           (422, "VALIDATION_ERROR", {**invalid, "path": ["/description", "/clientMutationId"]}))
    yield (agent, decide_body("deleteFile", {"path": "/tmp/x"}),  # a mutating tool without a key
           (400, "VALIDATION_ERROR", {**invalid, "path": "/headers/Idempotency-Key"}))
    yield auth(roles=["developer"]), decide_body("brandNewTool", {"q": "dynamic"}), None
    same = {**auth(roles=["admin"]), "Idempotency-Key": "same-key-twice"}
    pay = decide_body("processPayment", {"amount": 10, "currency": "EUR", "recipient": "acct_1"})
    yield same, pay, None
    yield same, pay, (409, "CONFLICT", {"retryable": True})  # the first is still processing


def test_every_decide_call_is_recorded_with_the_fields_of_its_response(client, audit_app):
    responses = []
    for headers, body, expected_error in _calls():
        if isinstance(body, bytes):
            resp = client.post("/v1/decide", data=body, headers={**headers, "Content-Type": "application/json"})
        else:
            resp = client.post("/v1/decide", json=body, headers=headers)
        if expected_error is None:
            assert resp.status_code == 200, resp.get_json()
        else:
            status, code, options = expected_error
            assert_error(resp, status, code, **options)
        responses.append((headers, resp))

    records = {r.decision_id: r for r in records_of(audit_app)}
    assert len(records) == len(responses)  # one record per call, no more
    for headers, resp in responses:
        data = resp.get_json()
        record = records[resp.headers["X-Decision-Id"]]
        assert record.event == "decide" and record.request_id == resp.headers["X-Request-Id"] == data["request_id"]
        assert record.trace_id == (TRACEPARENT.split("-")[1] if "traceparent" in headers else None)
        claims = jwt.decode(headers["Authorization"].split()[1], options={"verify_signature": False})
        assert (record.tenant, record.subject_id, list(record.roles)) == (claims["tenant"], claims["sub"], claims["roles"])
        assert set(record.durations_ms) >= {"auth"}
        if resp.status_code == 200:
            assert record.decision_id == data["decision_id"]
            assert (record.decision, list(record.reasons), record.policy_revision) == (
                data["decision"], data["reasons"], data["policy_revision"])
            assert (record.tool, record.version) == (data["tool"]["name"], data["tool"]["version"])
            assert record.input == data["input"] and record.ai_sdk_status == data["ai_sdk_status"]
            assert record.approval_id == (data.get("approval") or {}).get("approval_id")
            assert record.replayed == ((data.get("idempotency") or {}).get("state") == "replayed")
            assert len(record.input_fingerprint) == 64 and record.error_code is None
            assert record.engine == "embedded" and {"validate", "policy"} <= set(record.durations_ms)
        else:
            assert record.error_code == data["error"]["code"] and record.decision is None
    conversation = records_of(audit_app, tenant="acme", error_code=None)
    assert any(r.conversation_id == "conv-cases" for r in conversation)


def test_calls_that_fail_authentication_are_not_recorded(client, audit_app):
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}))
    assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}),
                       headers={"Authorization": "Bearer not.a.token"})
    assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)
    assert records_of(audit_app) == []


def _stored_text(dsn: str) -> str:
    """Everything the store holds, as text (the SQLite files' bytes, or every PostgreSQL row)."""
    if dsn.startswith("postgresql://"):
        with psycopg.connect(dsn) as conn:
            tables = ("decision_records", "decision_chain_heads", "decision_checkpoints", "decision_schema")
            return "\n".join(str(row) for t in tables for row in conn.execute(f"SELECT {t}::text FROM {t}"))
    conn = sqlite3.connect(dsn)
    conn.execute("PRAGMA wal_checkpoint(FULL)")
    conn.close()
    files = [Path(dsn), Path(dsn + "-wal")]
    return "\n".join(p.read_bytes().decode("latin-1") for p in files if p.exists())


def test_nothing_secret_is_stored(client, audit_app, audit_dsn):  # noqa: F811
    password = "Correct-Horse-Battery-7731"
    raw_key = "raw-idempotency-key-5521"
    token = make_token("emma", "bank-demo", ["account_holder"])
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": raw_key}
    ok = client.post("/v1/decide", json=decide_body("update_password", {"password": password}), headers=headers)
    assert ok.status_code == 200 and ok.get_json()["input"] == {"password": "[REDACTED]"}
    bad = client.post("/v1/decide", json=decide_body("update_password", {"password": password, "confirm": password}),
                      headers=headers)
    assert_error(bad, 422, "VALIDATION_ERROR", retryable=False, path="/confirm")
    records = records_of(audit_app)
    assert [r.input for r in records] == [{"password": "[REDACTED]"}, None]
    assert records[0].redacted_paths == ("/password",)
    key_hash = hash_idempotency_key(audit_app.extensions["toolgate"].settings.audit_key_hash_secret.get_secret_value(),
                                    raw_key)
    assert records[0].idempotency_key_hash == key_hash

    stored = _stored_text(audit_dsn)
    assert "emma" in stored and key_hash in stored  # the scan does see the records
    for secret in (password, raw_key, token, token.split(".")[2], "Bearer"):
        assert secret not in stored


def _corpus(app) -> list:
    log = app.extensions["toolgate"].decision_log
    key_hash_secret = app.extensions["toolgate"].settings.audit_key_hash_secret.get_secret_value()
    start = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
    specs = [
        {"tenant": "acme", "subject_id": "alice", "tool": "readFile", "decision": "allow"},
        {"tenant": "acme", "subject_id": "bob", "tool": "deleteFile", "decision": "deny", "reasons": ("not allowed",)},
        {"tenant": "acme", "subject_id": "alice", "tool": "processPayment", "decision": "user-approval",
         "approval_id": "ap-1"},
        {"tenant": "acme", "subject_id": "alice", "tool": "readFile", "error_code": "VALIDATION_ERROR",
         "request_id": "req-x"},
        {"tenant": "acme", "subject_id": "carol", "tool": "processPayment", "decision": "allow",
         "event": "approval_answer", "approval_id": "ap-1", "approver_id": "carol"},
        {"tenant": "acme", "subject_id": "bob", "tool": "createTicket", "decision": "allow",
         "idempotency_key_hash": hash_idempotency_key(key_hash_secret, "ticket-key-1")},
        {"tenant": "globex", "subject_id": "alice", "tool": "readFile", "decision": "allow", "approval_id": "ap-1"},
    ]
    records = []
    for i, spec in enumerate(specs):
        values = {"event": "decide", "request_id": f"req-{i}", "version": "1", "time": start + dt.timedelta(hours=i)}
        records.append(log.append(AuditEvent(**{**values, **spec})))
    return records


def _ids(resp) -> list[str]:
    assert resp.status_code == 200, resp.get_json()
    return [r["decision_id"] for r in resp.get_json()["records"]]


def test_auditors_filter_on_every_field(client, audit_app):
    records = _corpus(audit_app)
    acme = [r for r in records if r.tenant == "acme"]
    expect = lambda pred: sorted((r.decision_id for r in acme if pred(r)), reverse=True)  # noqa: E731
    cases = {
        "": lambda r: True,
        "subject=alice": lambda r: r.subject_id == "alice",
        "tool=processPayment": lambda r: r.tool == "processPayment",
        "decision=deny": lambda r: r.decision == "deny",
        "event=approval_answer": lambda r: r.event == "approval_answer",
        "error_code=VALIDATION_ERROR": lambda r: r.error_code == "VALIDATION_ERROR",
        "request_id=req-x": lambda r: r.request_id == "req-x",
        "approval_id=ap-1": lambda r: r.approval_id == "ap-1",
        "idempotency_key=ticket-key-1": lambda r: r.tool == "createTicket",
        "since=2025-06-01T02:00:00Z": lambda r: r.time.hour >= 2,
        "until=2025-06-01T02:00:00%2B00:00": lambda r: r.time.hour < 2,
        "subject=alice&since=2025-06-01T01:00:00Z&until=2025-06-01T05:00:00Z":
            lambda r: r.subject_id == "alice" and 1 <= r.time.hour < 5,
        "tenant=acme&decision=allow": lambda r: r.decision == "allow",
    }
    headers = auth("aud-1", "acme", AUDITOR)
    for query, pred in cases.items():
        assert _ids(client.get(f"/v1/decisions?{query}", headers=headers)) == expect(pred), query
    one = client.get(f"/v1/decisions/{acme[1].decision_id}", headers=headers).get_json()["record"]
    assert one == json.loads(json.dumps(acme[1].to_dict()))


def test_an_auditor_sees_only_its_own_tenant(client, audit_app):
    records = _corpus(audit_app)
    globex = next(r for r in records if r.tenant == "globex")
    acme_auditor = auth("aud-1", "acme", AUDITOR)
    listed = client.get("/v1/decisions?limit=1000", headers=acme_auditor).get_json()["records"]
    assert {r["tenant"] for r in listed} == {"acme"}
    assert client.get("/v1/decisions?approval_id=ap-1", headers=acme_auditor).get_json()["records"][0]["tenant"] == "acme"
    assert_error(client.get("/v1/decisions?tenant=globex", headers=acme_auditor), 403, "FORBIDDEN", retryable=False)
    assert_error(client.get(f"/v1/decisions/{globex.decision_id}", headers=acme_auditor), 404, "NOT_FOUND",
                 retryable=False)

    platform = auth("root-aud", "ops", ["platform_auditor"])
    assert len(_ids(client.get("/v1/decisions", headers=platform))) == len(records)
    assert _ids(client.get("/v1/decisions?tenant=globex", headers=platform)) == [globex.decision_id]
    assert client.get(f"/v1/decisions/{globex.decision_id}", headers=platform).status_code == 200


def test_a_platform_role_in_a_tenant_token_counts_for_nothing(client, audit_app):
    """Only tokens of the configured platform tenant (ops here) hold platform roles: a tenant
    cannot grant itself the platform by naming the role."""
    records = _corpus(audit_app)
    globex = next(r for r in records if r.tenant == "globex")
    posing = auth("mallory", "acme", ["platform_auditor"])
    assert_error(client.get("/v1/decisions?tenant=globex", headers=posing), 403, "FORBIDDEN", retryable=False)
    assert_error(client.get(f"/v1/decisions/{globex.decision_id}", headers=posing), 403, "FORBIDDEN", retryable=False)
    both = auth("aud-2", "acme", ["platform_auditor", "auditor"])
    assert {r["tenant"] for r in client.get("/v1/decisions", headers=both).get_json()["records"]} == {"acme"}


def test_callers_without_an_auditor_role_are_refused(client, audit_app):
    records = _corpus(audit_app)
    for roles in (["support_agent"], ["admin", "approver"], []):
        headers = auth("u-1", "acme", roles)
        for path in ("/v1/decisions", f"/v1/decisions/{records[0].decision_id}"):
            assert_error(client.get(path, headers=headers), 403, "FORBIDDEN", retryable=False)
    assert_error(client.get("/v1/decisions"), 401, "UNAUTHENTICATED", retryable=False)


def test_bad_query_parameters_are_refused(client, audit_app):
    headers = auth("aud-1", "acme", AUDITOR)
    for query in ("colour=red", "since=2025-06-01", "since=2025-06-01T00:00:00", "until=yesterday", "limit=0",
                  "limit=1001", "limit=ten", "decision=maybe", "event=other", "cursor=bogus", "tool=a&tool=b"):
        resp = client.get(f"/v1/decisions?{query}", headers=headers)
        # the problem names the parameter (a bare name, not a JSON Pointer)
        assert_error(resp, 400, "VALIDATION_ERROR", retryable=False, path=query.split("=", 1)[0])
    for unknown in ("not-an-id", "01ARZ3NDEKTSV4RRFFQ69G5FAV"):
        assert_error(client.get(f"/v1/decisions/{unknown}", headers=headers), 404, "NOT_FOUND", retryable=False)


def test_pages_have_no_duplicate_or_gap_while_decide_calls_arrive(client, audit_app):
    log = audit_app.extensions["toolgate"].decision_log
    before = {log.append(AuditEvent(event="decide", tenant="acme", request_id=f"r{i}")).decision_id for i in range(55)}
    headers = auth("aud-1", "acme", AUDITOR)
    agent = auth(roles=["support_agent"])
    seen, cursor = [], None
    while True:
        resp = client.get("/v1/decisions?limit=20" + (f"&cursor={cursor}" if cursor else ""), headers=headers)
        seen += _ids(resp)
        for _ in range(3):  # new calls are recorded between two pages
            assert client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/x"}), headers=agent).status_code == 200
        cursor = resp.get_json()["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == len(before) and set(seen) == before
    assert seen == sorted(seen, reverse=True)


def test_audit_commands_query_export_verify_and_purge(client, audit_app, audit_dsn, monkeypatch, capsys, tmp_path):  # noqa: F811
    monkeypatch.setenv("TOOLGATE_AUDIT_DSN", audit_dsn)
    monkeypatch.setenv("TOOLGATE_CHECKPOINT_FILE", str(audit_app.extensions["toolgate"].settings.checkpoint_path))
    records = _corpus(audit_app)
    agent = auth(roles=["support_agent"])
    assert client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/x"}), headers=agent).status_code == 200
    capsys.readouterr()

    assert main(["audit", "query", "--tenant", "acme", "--decision", "deny"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("TIME") and len(out) == 2 and records[1].decision_id in out[1]

    assert main(["audit", "query", "--subject", "alice", "--format", "jsonl", "--limit", "2"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["subject_id"] for line in captured.out.splitlines()] == ["alice", "alice"]
    assert "more: --cursor " in captured.err

    target = tmp_path / "export.csv"
    assert main(["audit", "export", "--since", "2025-06-01", "--until", "2025-06-02", "--format", "csv",
                 "--out", str(target)]) == 0
    lines = target.read_text().splitlines()
    assert lines[0].startswith("decision_id,event,time") and len(lines) == 1 + len(records)

    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.startswith("ok: 2 chains")
    assert main(["audit", "purge", "--before", "2025-06-01T03:00:00Z"]) == 0
    assert "tenant acme: purged through seq 3" in capsys.readouterr().out
    assert main(["audit", "verify", "--tenant", "acme"]) == 0
    capsys.readouterr()

    audit_app.extensions["toolgate"].decision_log.close()
    _delete(audit_dsn, records[4].decision_id)
    assert main(["audit", "verify"]) == 1
    assert f"decision_id {records[5].decision_id}" in capsys.readouterr().out
    assert main(["audit", "purge", "--before", "2030-01-01"]) == 1


def _delete(dsn: str, decision_id: str) -> None:
    if dsn.startswith("postgresql://"):
        with psycopg.connect(dsn) as conn:
            conn.execute("DELETE FROM decision_records WHERE decision_id = %s", (decision_id,))
        return
    conn = sqlite3.connect(dsn)
    with conn:
        conn.execute("DELETE FROM decision_records WHERE decision_id = ?", (decision_id,))
    conn.close()


def test_responses_match_the_openapi_document(client, audit_app):
    from jsonschema import Draft202012Validator

    records = _corpus(audit_app)
    doc = client.get("/openapi.json").get_json()
    operations = {"list": doc["paths"]["/v1/decisions"]["get"], "one": doc["paths"]["/v1/decisions/{decision_id}"]["get"]}

    def check(operation: str, resp) -> None:
        schema = operations[operation]["responses"][str(resp.status_code)]["content"]["application/json"]["schema"]
        Draft202012Validator({**schema, "components": doc["components"]}).validate(resp.get_json())

    auditor = auth("aud-1", "acme", AUDITOR)
    check("list", client.get("/v1/decisions?limit=2", headers=auditor))
    check("list", client.get("/v1/decisions?limit=0", headers=auditor))
    check("list", client.get("/v1/decisions", headers=auth(roles=["support_agent"])))
    check("one", client.get(f"/v1/decisions/{records[0].decision_id}", headers=auditor))
    check("one", client.get(f"/v1/decisions/{records[-1].decision_id}", headers=auditor))


def test_an_unexpected_failure_is_recorded_as_internal_error(make_app, monkeypatch):
    app = make_app()
    deps = app.extensions["toolgate"]

    def broken(*args, **kwargs):
        raise RuntimeError("engine bug")

    monkeypatch.setattr(deps.engine, "evaluate", broken)
    resp = app.test_client().post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}),
                                  headers=auth(roles=["support_agent"]))
    assert_error(resp, 500, "INTERNAL_ERROR", retryable=False)
    (record,) = records_of(app)
    assert (record.decision_id, record.error_code, record.decision) == (resp.headers["X-Decision-Id"], "INTERNAL_ERROR", None)
