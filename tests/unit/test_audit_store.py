"""The decision log stores (SQLite and PostgreSQL, same tests): round trip, schema, queries and
their filters, keyset pagination while records arrive, and concurrent writers keeping each
tenant chain linear."""

from __future__ import annotations

import datetime as dt
import multiprocessing

import pytest

from app.audit.chain import verify_chains
from app.audit.queries import DecisionQuery, decode_cursor, encode_cursor
from app.audit.records import AuditEvent, hash_idempotency_key
from app.audit.stores import open_decision_log
from app.errors import ValidationFailed
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)

NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
def store(audit_dsn):  # noqa: F811
    s = open_decision_log(audit_dsn)
    yield s
    s.close()


def event(**fields) -> AuditEvent:
    values = {"event": "decide", "tenant": "acme", "request_id": "req", "subject_id": "u-1", "tool": "readFile",
              "version": "1", "decision": "allow"}
    return AuditEvent(**{**values, **fields})


def test_every_field_round_trips(store):
    written = store.append(
        event(
            trace_id="0af7651916cd43dd8448eb211c80319c", roles=("support_agent", "auditor"), conversation_id="c-1",
            ai_sdk_status="not-applicable", reasons=("ok", "ünïcødé ✓"), policy_revision="sha256:abc", engine="opa",
            engine_decision_id="4ca636c1", input_fingerprint="f" * 64,
            input={"nested": {"list": [1, 2.5, None, True, "\u0000"]}, "big": 2**53 - 1, "float": 0.1},
            redacted_paths=("/password",), idempotency_key_hash=hash_idempotency_key("s", "k"), replayed=True,
            approval_id="ap-1", approver_id="u-2", error_code=None, durations_ms={"auth": 0.25, "policy": 1.5},
            time=dt.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC),
        )
    )
    read = store.get(written.decision_id)
    assert read == written
    assert read.to_dict()["time"] == "2025-03-01T12:00:00.123456Z"
    assert store.get(written.decision_id, tenant="globex") is None
    assert store.get("01ARZ3NDEKTSV4RRFFQ69G5FAV") is None


def test_opening_again_finds_the_current_schema(store, audit_dsn):  # noqa: F811
    first = store.append(event())
    again = open_decision_log(audit_dsn)
    try:
        again.probe()
        assert again.append(event()).seq == first.seq + 1
    finally:
        again.close()


def _corpus(store) -> list:
    """Records varying every filterable field, oldest first."""
    specs = [
        {"tenant": "acme", "subject_id": "alice", "tool": "readFile", "decision": "allow"},
        {"tenant": "acme", "subject_id": "bob", "tool": "deleteFile", "decision": "deny", "reasons": ("nope",)},
        {"tenant": "acme", "subject_id": "alice", "tool": "processPayment", "decision": "user-approval", "approval_id": "ap-7"},
        {"tenant": "acme", "subject_id": "alice", "tool": "readFile", "decision": None, "error_code": "VALIDATION_ERROR"},
        {"tenant": "acme", "subject_id": "carol", "tool": "processPayment", "decision": "allow", "event": "approval_answer",
         "approval_id": "ap-7", "approver_id": "carol"},
        {"tenant": "acme", "subject_id": "bob", "tool": "createTicket", "decision": "allow",
         "idempotency_key_hash": hash_idempotency_key("s", "key-1"), "request_id": "req-special"},
        {"tenant": "globex", "subject_id": "alice", "tool": "readFile", "decision": "allow"},
    ]
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    return [store.append(event(time=start + dt.timedelta(hours=i), **spec)) for i, spec in enumerate(specs)]


def test_each_filter_selects_exactly_its_records(store):
    records = _corpus(store)
    hour = lambda i: dt.datetime(2025, 1, 1, i, tzinfo=dt.UTC)  # noqa: E731
    cases = {
        "tenant": (DecisionQuery(tenant="globex"), lambda r: r.tenant == "globex"),
        "subject": (DecisionQuery(tenant="acme", subject_id="alice"), lambda r: r.tenant == "acme" and r.subject_id == "alice"),
        "tool": (DecisionQuery(tool="processPayment"), lambda r: r.tool == "processPayment"),
        "decision": (DecisionQuery(decision="deny"), lambda r: r.decision == "deny"),
        "event": (DecisionQuery(event="approval_answer"), lambda r: r.event == "approval_answer"),
        "error_code": (DecisionQuery(error_code="VALIDATION_ERROR"), lambda r: r.error_code == "VALIDATION_ERROR"),
        "request_id": (DecisionQuery(request_id="req-special"), lambda r: r.request_id == "req-special"),
        "approval_id": (DecisionQuery(approval_id="ap-7"), lambda r: r.approval_id == "ap-7"),
        "idempotency_key": (DecisionQuery(idempotency_key_hash=hash_idempotency_key("s", "key-1")),
                            lambda r: r.idempotency_key_hash is not None),
        "since": (DecisionQuery(since=hour(2)), lambda r: r.time >= hour(2)),
        "until": (DecisionQuery(until=hour(2)), lambda r: r.time < hour(2)),
        "range+subject": (DecisionQuery(subject_id="alice", since=hour(1), until=hour(6)),
                          lambda r: r.subject_id == "alice" and hour(1) <= r.time < hour(6)),
        "none": (DecisionQuery(), lambda r: True),
    }
    for name, (query, wanted) in cases.items():
        expected = sorted((r.decision_id for r in records if wanted(r)), reverse=True)
        assert expected, name
        got = [r.decision_id for r in store.query(query, limit=1000).records]
        assert got == expected, name


def test_pages_have_no_duplicate_or_gap_while_records_arrive(store):
    initial = {store.append(event(request_id=f"r{i}")).decision_id for i in range(95)}
    seen: list[str] = []
    cursor = None
    while True:
        page = store.query(DecisionQuery(tenant="acme"), limit=20, cursor=cursor)
        seen += [r.decision_id for r in page.records]
        for i in range(7):  # newer records arrive between pages
            store.append(event(request_id=f"late{i}"))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert seen == sorted(seen, reverse=True)
    assert initial <= set(seen)
    assert len(seen) == len(initial)  # the late ones are newer than the first page


def test_limits_and_cursors_are_checked(store):
    store.append(event())
    for bad in (0, 1001):
        with pytest.raises(ValueError):
            store.query(DecisionQuery(), limit=bad)
    for cursor in ("not-a-cursor", encode_cursor("lowercase-not-ulid"), "ZDE6"):
        with pytest.raises(ValidationFailed):
            store.query(DecisionQuery(), cursor=cursor)
    assert decode_cursor(encode_cursor("01ARZ3NDEKTSV4RRFFQ69G5FAV")) == "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def test_iter_records_reads_oldest_first_across_batches(store):
    ids = [store.append(event(request_id=f"r{i}")).decision_id for i in range(23)]
    store.append(event(tenant="globex"))
    assert [r.decision_id for r in store.iter_records(DecisionQuery(tenant="acme"), batch_size=5)] == ids
    assert [r.decision_id for r in store.iter_records(DecisionQuery(tenant="acme"), batch_size=23)] == ids


def _writer(dsn: str, tenant: str, count: int) -> None:
    store = open_decision_log(dsn, timeout_ms=30_000)
    try:
        for i in range(count):
            store.append(AuditEvent(event="decide", tenant=tenant, request_id=f"w{i}", decision="allow", tool="t"))
    finally:
        store.close()


def test_concurrent_writers_keep_one_linear_chain(store, audit_dsn):  # noqa: F811
    """4 processes x 500 appends for one (new) tenant: every seq once, every link intact."""
    store.probe()  # schema in place before the race on the chain head
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_writer, args=(audit_dsn, "race", 500)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    report = verify_chains(store, b"k" * 32)
    assert report.ok, report.broken
    assert report.records == 2000
    assert store.chain_head("race").seq == 2000


def test_concurrent_threads_of_one_store_each_get_their_own_committed_record(store):
    """Threads of one worker (gthread) appending at once: every call returns its own record."""
    from concurrent.futures import ThreadPoolExecutor

    def write(i: int):
        return store.append(event(request_id=f"t{i}", tenant=("acme", "globex")[i % 2]))

    with ThreadPoolExecutor(max_workers=8) as pool:
        records = list(pool.map(write, range(400)))
    assert sorted(r.request_id for r in records) == sorted(f"t{i}" for i in range(400))
    for tenant in ("acme", "globex"):
        assert sorted(r.seq for r in records if r.tenant == tenant) == list(range(1, 201))
    assert all(store.get(r.decision_id) == r for r in records[::37])
    assert verify_chains(store, b"k" * 32).ok
