"""Schema version 4 of the decision log: every query its readers make for an auditor, the
console and the chain walk is answered through an index that narrows its filters (SQLite's
``EXPLAIN QUERY PLAN`` of the statements the store actually runs), while a record writes fewer
index pages (partial indexes, no indexes for the policy history the session replaced); a
version 3 log migrates in place on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest

from app.audit import sql_base
from app.audit.chain import verify_chains
from app.audit.dialects.sqlite import SqliteDecisionStore
from app.audit.queries import DecisionQuery
from app.audit.records import AuditEvent, hash_idempotency_key
from app.audit.schema import MIGRATIONS
from app.audit.stores import open_decision_log
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)

START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
KEY = hash_idempotency_key("s", "k-1")
#: The exact-match filters of ``DecisionQuery``, each with a value the corpus holds.
FILTERS = {
    "subject_id": "alice", "tool": "readFile", "decision": "allow", "event": "decide", "error_code": "CONFLICT",
    "request_id": "req-1", "approval_id": "ap-1", "idempotency_key_hash": KEY, "shadow_outcome": "agrees",
}
#: The filters a platform auditor (no tenant) may look a record up by: each has an index of its own.
TENANTLESS = ("request_id", "approval_id", "idempotency_key_hash")
PARTIAL = ("decision_records_error", "decision_records_approval", "decision_records_key", "decision_records_shadow")


@pytest.fixture
def store(tmp_path):
    s = SqliteDecisionStore(tmp_path / "decisions.sqlite")
    base = {"tenant": "acme", "request_id": "req-1", "subject_id": "alice", "tool": "readFile", "version": "1"}
    for i, extra in enumerate([
        {"decision": "allow", "idempotency_key_hash": KEY, "shadow": {"agrees": True, "error": None}},
        {"decision": "user-approval", "approval_id": "ap-1"},
        {"decision": None, "error_code": "CONFLICT"},
        {"decision": "deny", "tenant": "globex"},
    ]):
        s.append(AuditEvent(event="decide", time=START + dt.timedelta(hours=i), **{**base, **extra}))
    yield s
    s.close()


def _statements(store: SqliteDecisionStore, read) -> list[str]:
    """The statements on ``decision_records`` that ``read(store)`` runs, with their values."""
    seen: list[str] = []
    store._connection().set_trace_callback(seen.append)
    try:
        read(store)
    finally:
        store._connection().set_trace_callback(None)
    return [sql for sql in seen if "decision_records" in sql and sql.lstrip().upper().startswith("SELECT")]


def _plan(path, sql: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]


def _reads() -> dict[str, object]:
    since, until = START, START + dt.timedelta(days=1)
    cursor = "d1-" + "Z" * 26
    reads: dict[str, object] = {
        "get": lambda s: s.get("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        "get in tenant": lambda s: s.get("01ARZ3NDEKTSV4RRFFQ69G5FAV", tenant="acme"),
        "tenant": lambda s: s.query(DecisionQuery(tenant="acme")),
        "tenant, next page": lambda s: s.query(DecisionQuery(tenant="acme"), cursor=cursor),
        "tenant, time range": lambda s: s.query(DecisionQuery(tenant="acme", since=since, until=until)),
        "tenant, export": lambda s: list(s.iter_records(DecisionQuery(tenant="acme", since=since, until=until), batch_size=1)),
        "tenant and tool, time range (console charts, policy intel)": lambda s: list(
            s.iter_records(DecisionQuery(tenant="acme", tool="readFile", since=since, until=until))
        ),
        "every tenant, time range": lambda s: s.query(DecisionQuery(since=since, until=until)),
        "chain walk": lambda s: list(s.iter_chain("acme")),
    }
    for name, value in FILTERS.items():
        reads[f"tenant, {name}"] = lambda s, n=name, v=value: s.query(DecisionQuery(tenant="acme", **{n: v}))
        reads[f"tenant, {name}, next page"] = lambda s, n=name, v=value: s.query(
            DecisionQuery(tenant="acme", **{n: v}), cursor=cursor
        )
    for name in TENANTLESS:
        reads[f"every tenant, {name}"] = lambda s, n=name: s.query(DecisionQuery(**{n: FILTERS[n]}))
    return reads


@pytest.mark.parametrize("name", list(_reads()))
def test_every_read_searches_an_index(store, name):
    statements = _statements(store, _reads()[name])
    assert statements, "the read ran no statement on decision_records"
    for sql in statements:
        plan = _plan(store.path, sql)
        on_records = [step for step in plan if "decision_records" in step]
        assert on_records and all(step.startswith("SEARCH") and "INDEX" in step for step in on_records), (sql, plan)
        for column in FILTERS:  # the index itself narrows every filter the read sets (or its time range)
            if f"{column} = " in sql:
                assert all(f"{column}=?" in step or "time_us>?" in step for step in on_records), (sql, plan)


def test_indexes_of_mostly_null_columns_are_partial(store):
    """The indexes of a column most records leave NULL (error code, approval, key, shadow
    outcome) are partial: a record without a value adds no entry to them, which is what makes a
    commit write fewer pages."""
    with sqlite3.connect(store.path) as conn:
        partial = {row[1]: row[4] for row in conn.execute("PRAGMA index_list(decision_records)")}
    assert {name: partial.get(name) for name in PARTIAL} == dict.fromkeys(PARTIAL, 1)
    assert "decision_records_conversation" not in partial and "decision_records_subject_time" not in partial


def test_a_version_3_log_migrates_and_its_records_are_found(audit_dsn, monkeypatch):  # noqa: F811
    """SQLite and PostgreSQL: a version 3 log with records takes the version 4 indexes in
    place; every record is still found by the lookups whose indexes were rebuilt, and its
    chain verifies."""
    monkeypatch.setattr(sql_base, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(sql_base, "MIGRATIONS", MIGRATIONS[:3])
    old = open_decision_log(audit_dsn)
    try:
        written = [old.append(AuditEvent(event="decide", tenant="acme", request_id=f"req-{i}", tool="readFile",
                                         version="1", **extra))
                   for i, extra in enumerate([{"decision": "user-approval", "approval_id": "ap-1"},
                                              {"decision": "allow", "idempotency_key_hash": KEY},
                                              {"decision": None, "error_code": "CONFLICT"}])]
    finally:
        old.close()
        monkeypatch.undo()
    store = open_decision_log(audit_dsn)
    try:
        store.probe()
        for record, lookup in zip(written, [{"approval_id": "ap-1"}, {"idempotency_key_hash": KEY},
                                            {"error_code": "CONFLICT"}], strict=True):
            for query in (DecisionQuery(tenant="acme", **lookup), DecisionQuery(**lookup)):
                assert [r.decision_id for r in store.query(query).records] == [record.decision_id]
        assert [r.decision_id for r in store.query(DecisionQuery(request_id="req-1")).records] == [written[1].decision_id]
        assert verify_chains(store, b"k" * 32).ok
    finally:
        store.close()
