"""The per-tenant hash chain: tamper detection by ``verify`` and purge checkpoints, on SQLite
and PostgreSQL. Tampering is done with raw SQL, as an attacker with database access would."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import sqlite3

import psycopg
import pytest

from app.audit.chain import verify_chains
from app.audit.records import GENESIS_HASH, AuditEvent, AuditRecord
from app.audit.stores import open_decision_log
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)

SECRET = b"c" * 32


@pytest.fixture
def store(audit_dsn):  # noqa: F811
    s = open_decision_log(audit_dsn)
    yield s
    s.close()


def raw_sql(dsn: str, *statements: tuple[str, tuple]) -> None:
    """Run statements (``?`` placeholders) in one transaction straight on the database."""
    if dsn.startswith("postgresql://"):
        with psycopg.connect(dsn) as conn:
            for sql, params in statements:
                conn.execute(sql.replace("?", "%s"), params)
        return
    conn = sqlite3.connect(dsn)
    with conn:
        for sql, params in statements:
            conn.execute(sql, params)
    conn.close()


def append(store, n: int, tenant: str = "acme", *, days_ago: float = 0, **fields) -> list[AuditRecord]:
    when = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago)
    return [
        store.append(
            AuditEvent(
                event="decide", tenant=tenant, request_id=f"req-{tenant}-{i}", subject_id="u-1", tool="readFile",
                version="1", decision="allow", reasons=("allowed by policy",), input={"path": f"/srv/{i}", "n": i / 3},
                time=when + dt.timedelta(microseconds=i), **fields,
            )
        )
        for i in range(n)
    ]


def test_a_fresh_chain_links_every_record_and_verifies(store):
    records = append(store, 6) + append(store, 3, "globex")
    acme = [r for r in records if r.tenant == "acme"]
    assert [r.seq for r in acme] == [1, 2, 3, 4, 5, 6]
    assert acme[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(acme))
    report = verify_chains(store, SECRET)
    assert (report.ok, report.tenants, report.records) == (True, 2, 9)
    head = store.chain_head("acme")
    assert (head.seq, head.hash, head.decision_id) == (6, acme[-1].hash, acme[-1].decision_id)


def test_a_changed_field_in_the_record_is_caught(store, audit_dsn):  # noqa: F811
    records = append(store, 6)
    target = records[3]
    raw_sql(audit_dsn, ("UPDATE decision_records SET doc = REPLACE(doc, '\"allow\"', '\"deny\"') WHERE decision_id = ?",
                        (target.decision_id,)))
    broken = verify_chains(store, SECRET).broken
    assert broken is not None
    assert (broken.decision_id, broken.seq) == (target.decision_id, 4)
    assert "changed" in broken.reason


def test_a_changed_indexed_column_is_caught(store, audit_dsn):  # noqa: F811
    records = append(store, 6)
    raw_sql(audit_dsn, ("UPDATE decision_records SET decision = 'deny' WHERE decision_id = ?", (records[2].decision_id,)))
    broken = verify_chains(store, SECRET).broken
    assert broken.decision_id == records[2].decision_id
    assert "columns" in broken.reason


def test_a_deleted_record_is_caught_at_the_next_one(store, audit_dsn):  # noqa: F811
    records = append(store, 6)
    raw_sql(audit_dsn, ("DELETE FROM decision_records WHERE decision_id = ?", (records[2].decision_id,)))
    broken = verify_chains(store, SECRET).broken
    assert broken.decision_id == records[3].decision_id
    assert "missing" in broken.reason


def test_a_deleted_last_record_is_caught_by_the_chain_head(store, audit_dsn):  # noqa: F811
    records = append(store, 4)
    raw_sql(audit_dsn, ("DELETE FROM decision_records WHERE decision_id = ?", (records[-1].decision_id,)))
    broken = verify_chains(store, SECRET).broken
    assert broken.decision_id == records[-1].decision_id
    assert "end of the chain" in broken.reason


def test_two_reordered_records_are_caught(store, audit_dsn):  # noqa: F811
    records = append(store, 6)
    a, b = records[2], records[3]  # seq 3 and 4 swap places
    raw_sql(
        audit_dsn,
        ("UPDATE decision_records SET seq = -1 WHERE decision_id = ?", (a.decision_id,)),
        ("UPDATE decision_records SET seq = 3 WHERE decision_id = ?", (b.decision_id,)),
        ("UPDATE decision_records SET seq = 4 WHERE decision_id = ?", (a.decision_id,)),
    )
    broken = verify_chains(store, SECRET).broken
    assert (broken.decision_id, broken.seq) == (b.decision_id, 3)
    assert "reordered" in broken.reason


def test_swapped_contents_of_two_rows_are_caught(store, audit_dsn):  # noqa: F811
    records = append(store, 5)
    a, b = records[1], records[2]
    raw_sql(
        audit_dsn,
        ("UPDATE decision_records SET seq = -1 WHERE decision_id = ?", (a.decision_id,)),
        ("UPDATE decision_records SET seq = 2 WHERE decision_id = ?", (b.decision_id,)),
        ("UPDATE decision_records SET seq = 3 WHERE decision_id = ?", (a.decision_id,)),
        ("UPDATE decision_records SET doc = REPLACE(doc, '\"seq\":3', '\"seq\":2') WHERE decision_id = ?",
         (b.decision_id,)),
    )
    broken = verify_chains(store, SECRET).broken
    assert broken.decision_id == b.decision_id


def test_verify_of_one_tenant_ignores_the_others(store, audit_dsn):  # noqa: F811
    append(store, 3)
    globex = append(store, 3, "globex")
    raw_sql(audit_dsn, ("DELETE FROM decision_records WHERE decision_id = ?", (globex[0].decision_id,)))
    assert verify_chains(store, SECRET, tenants=["acme"]).ok
    assert verify_chains(store, SECRET).broken.tenant == "globex"


def test_purge_leaves_a_signed_checkpoint_and_a_verifiable_chain(store):
    old = append(store, 5, days_ago=40)
    recent = append(store, 3)
    append(store, 2, "globex", days_ago=1)
    before = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    checkpoints = store.purge(before, checkpoint_secret=SECRET, batch_size=2)
    assert [(c.tenant, c.seq, c.hash, c.decision_id) for c in checkpoints] == [
        ("acme", 5, old[-1].hash, old[-1].decision_id)
    ]
    assert store.get(old[0].decision_id) is None and store.get(recent[0].decision_id) is not None
    assert verify_chains(store, SECRET).ok
    after = append(store, 1)[0]
    assert (after.seq, after.prev_hash) == (9, recent[-1].hash)
    assert verify_chains(store, SECRET).ok
    assert store.purge(before, checkpoint_secret=SECRET) == []


def test_purging_everything_keeps_the_chain_verifiable(store):
    records = append(store, 4, days_ago=10)
    store.purge(dt.datetime.now(dt.UTC), checkpoint_secret=SECRET)
    assert store.chain_head("acme").seq == 4 and store.checkpoint("acme").hash == records[-1].hash
    report = verify_chains(store, SECRET)
    assert report.ok and report.records == 0
    assert append(store, 1)[0].seq == 5
    assert verify_chains(store, SECRET).ok


def test_a_forged_checkpoint_is_caught(store, audit_dsn):  # noqa: F811
    records = append(store, 6, days_ago=5)
    store.purge(records[2].time, checkpoint_secret=SECRET)
    assert store.checkpoint("acme").seq == 2
    # Hide records 3 and 4 by deleting them and moving the checkpoint forward without the key.
    raw_sql(
        audit_dsn,
        ("DELETE FROM decision_records WHERE seq IN (3, 4)", ()),
        ("UPDATE decision_checkpoints SET seq = 4, hash = ?, decision_id = ?", (records[3].hash, records[3].decision_id)),
    )
    broken = verify_chains(store, SECRET).broken
    assert broken.decision_id == records[3].decision_id and "signature" in broken.reason
    assert not verify_chains(store, b"another key" * 3).ok


def test_an_unknown_event_or_decision_is_refused():
    with pytest.raises(ValueError):
        AuditEvent(event="delete_everything", tenant="t", request_id="r")
    with pytest.raises(ValueError):
        AuditEvent(event="decide", tenant="t", request_id="r", decision="maybe")
    with pytest.raises(ValueError):
        AuditEvent(event="decide", tenant="", request_id="r")


def test_sealed_text_is_rfc8785_of_the_content():
    """``seal`` assembles the canonical text from members canonicalized before the write lock;
    it must be byte for byte RFC 8785 of the whole content (nested keys outside the BMP sort
    by UTF-16 code units, numbers in ECMAScript form, non-ASCII text unescaped)."""
    import rfc8785

    from app.audit.chain import canonical_members, seal

    event = AuditEvent(
        event="decide", tenant="acme", request_id="req-1", subject_id="ü-1", tool="readFile", version="1",
        decision="allow", reasons=("allowed by policy", "naïve \u2028 \"quoted\""),
        input={"\U0001f600": 1, "\uffff": 2, "a": [1e21, 0.1, -0.0, 2**53 - 1], "z": {"y": None, "x": True}},
        durations_ms={"policy": 1.25, "auth": 0.001},
    )
    for members in (None, canonical_members(event)):
        record, text = seal(event, 7, "ab" * 32, members)
        assert text.encode() == rfc8785.dumps(record.content())
        assert record.hash == hashlib.sha256(text.encode()).hexdigest()


def test_large_floats_in_a_record_read_back_and_verify(store):
    """RFC 8785 writes 1e16 as 10000000000000000; read back as an integer it could not be
    canonicalized again (beyond 2^53) and ``verify`` would call the chain broken."""
    event = AuditEvent(event="decide", tenant="acme", request_id="req-big", subject_id="u-1", tool="send_money",
                       version="1", decision="user-approval", input={"amount": 1e16, "small": 12.5, "exact": 2**53 - 1,
                                                                     "neg": -1e300, "whole": 12.0})
    record = store.append(event)
    read = store.get(record.decision_id)
    assert read is not None and read.hash == record.hash
    assert read.input == {"amount": 1e16, "small": 12.5, "exact": 2**53 - 1, "neg": -1e300, "whole": 12}
    assert isinstance(read.input["amount"], float) and isinstance(read.input["exact"], int)
    report = verify_chains(store, SECRET)
    assert report.ok and report.records == 1
