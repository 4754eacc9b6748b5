"""Signed checkpoints against a rewritten database, on SQLite and PostgreSQL: what the hash
chain alone cannot see (a truncated tail with its head row rewound, a rewind followed by new
records, a re-hashed chain, a deleted tenant, a tenant inserted behind the gateway's back) is
caught by ``verify`` with the checkpoint key, which also names the newest checkpoint the log
still matches. Tampering is raw SQL, as by someone with write access to the database but not
to the checkpoint key or the checkpoint file."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from pathlib import Path

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.audit.chain import verify_chains
from app.audit.checkpoints import (
    CheckpointingLog,
    CheckpointLogInvalid,
    CheckpointWriter,
    read_checkpoints,
    sign_statement,
)
from app.audit.records import GENESIS_HASH, AuditEvent, AuditRecord, ChainHead
from app.audit.sinks import FileSink, RedisStreamSink, SinkLine, read_file
from app.audit.stores import open_decision_log
from app.receipts.keys import KeyRing
from app.redis_client import RedisConnection
from app.settings import Settings
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)
from tests.unit.test_audit_chain import raw_sql

SECRET = b"c" * 32


@pytest.fixture
def ring() -> KeyRing:
    return KeyRing.from_private_key(Ed25519PrivateKey.generate())


@pytest.fixture
def store(audit_dsn):  # noqa: F811
    s = open_decision_log(audit_dsn)
    yield s
    s.close()


@pytest.fixture
def sink(tmp_path: Path) -> FileSink:
    return FileSink(tmp_path / "sink" / "checkpoints.jsonl")


@pytest.fixture
def log(store, ring, sink):
    """The gateway's writer (its clock never due during a test: flushes are explicit)."""
    return CheckpointingLog(store, CheckpointWriter(ring, [sink]), interval_s=86_400)


def event(tenant: str, i: int, *, days_ago: float = 0) -> AuditEvent:
    when = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago, microseconds=-i)
    return AuditEvent(event="decide", tenant=tenant, request_id=f"req-{tenant}-{i}", subject_id="u-1", tool="readFile",
                      version="1", decision="allow", reasons=("allowed by policy",), input={"path": f"/srv/{i}"}, time=when)


def append(log, n: int, tenant: str = "acme", **kwargs) -> list[AuditRecord]:
    return [log.append(event(tenant, i, **kwargs)) for i in range(n)]


def signed(store, ring, sink):
    return read_checkpoints(read_file(sink.path), ring.public, store.log_id())


def verify(store, ring, sink, **kwargs):
    return verify_chains(store, SECRET, signed=signed(store, ring, sink), **kwargs)


def truncate(dsn: str, tenant: str, keep: int) -> None:
    """Delete the records of ``tenant`` after seq ``keep`` and rewind its head row to match."""
    import sqlite3

    import psycopg

    if dsn.startswith("postgresql://"):
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT hash, decision_id FROM decision_records WHERE tenant = %s AND seq = %s",
                               (tenant, keep)).fetchone()
    else:
        conn2 = sqlite3.connect(dsn)
        row = conn2.execute("SELECT hash, decision_id FROM decision_records WHERE tenant = ? AND seq = ?",
                            (tenant, keep)).fetchone()
        conn2.close()
    raw_sql(
        dsn,
        ("DELETE FROM decision_records WHERE tenant = ? AND seq > ?", (tenant, keep)),
        ("UPDATE decision_chain_heads SET seq = ?, hash = ?, decision_id = ? WHERE tenant = ?", (keep, row[0], row[1], tenant)),
    )


def rehash_from(store, dsn: str, tenant: str, seq: int) -> None:
    """Change the reasons of record ``seq`` and re-hash the chain from there on, head row
    included: a consistent rewrite that the hash chain alone accepts."""
    entries = list(store.iter_chain(tenant))
    prev = entries[seq - 2].hash if seq > 1 else GENESIS_HASH
    statements = []
    for entry in entries[seq - 1 :]:
        content = {**entry.content, "prev_hash": prev}
        if entry.columns["seq"] == seq:
            content["reasons"] = ["rewritten after the fact"]
        text = rfc8785.dumps(content)
        prev = hashlib.sha256(text).hexdigest()
        statements.append(("UPDATE decision_records SET doc = ?, hash = ? WHERE decision_id = ?",
                           (text.decode(), prev, entry.columns["decision_id"])))
    statements.append(("UPDATE decision_chain_heads SET hash = ? WHERE tenant = ?", (prev, tenant)))
    raw_sql(dsn, *statements)


def test_chains_register_and_checkpoint_and_verify(store, log, ring, sink):
    append(log, 3)
    append(log, 2, "globex")
    log.flush()
    append(log, 2)  # not under a checkpoint yet: vouched for by the chain alone
    lines = [json.loads(line.text) for line in read_file(sink.path)]
    assert [(s["type"], [h["tenant"] for h in s["heads"]]) for s in lines] == [
        ("register", ["acme"]), ("register", ["globex"]), ("checkpoint", ["acme", "globex"])
    ]
    assert all(s["log"] == store.log_id() and s["kid"] == ring.kid for s in lines)
    found = signed(store, ring, sink)
    assert found.registered == {"acme", "globex"} and found.statements == 3 and not found.other_logs
    report = verify_chains(store, SECRET, signed=found)
    assert (report.ok, report.signed, report.tenants, report.records, report.covered) == (True, True, 2, 7, 5)


def test_a_truncated_tail_with_its_head_rewound_is_caught(store, log, ring, sink, audit_dsn):  # noqa: F811
    records = append(log, 3)
    log.flush()
    records += append(log, 3)
    log.flush()
    append(log, 2)
    truncate(audit_dsn, "acme", keep=4)
    assert verify_chains(store, SECRET).ok  # what verify said before: the chain alone is consistent
    broken = verify(store, ring, sink).broken
    assert broken is not None and broken.tenant == "acme"
    assert (broken.seq, broken.decision_id) == (6, records[5].decision_id)
    assert "records missing at the end of the chain" in broken.reason and "ends at seq 4" in broken.reason
    assert broken.last_good is not None and (broken.last_good.seq, broken.last_good.hash) == (3, records[2].hash)


def test_a_rewind_followed_by_new_records_is_caught(store, log, ring, sink, audit_dsn):  # noqa: F811
    records = append(log, 3)
    log.flush()
    records += append(log, 3)
    log.flush()
    truncate(audit_dsn, "acme", keep=4)
    append(log, 4)  # the gateway goes on after the rewound head: seq 5..8 again, other records
    assert verify_chains(store, SECRET).ok
    broken = verify(store, ring, sink).broken
    assert broken.seq == 6 and "re-hashed or the record replaced" in broken.reason
    assert broken.last_good.seq == 3


def test_a_re_hashed_chain_is_caught_since_the_last_good_checkpoint(store, log, ring, sink, audit_dsn):  # noqa: F811
    records = append(log, 3)
    log.flush()
    append(log, 3)
    log.flush()
    rehash_from(store, audit_dsn, "acme", seq=5)
    assert verify_chains(store, SECRET).ok
    broken = verify(store, ring, sink).broken
    assert broken.seq == 6 and "differs from the checkpoint signed" in broken.reason
    assert (broken.last_good.seq, broken.last_good.decision_id) == (3, records[2].decision_id)


def test_a_chain_re_hashed_from_its_first_record_matches_no_checkpoint(store, log, ring, sink, audit_dsn):  # noqa: F811
    append(log, 4)
    log.flush()
    rehash_from(store, audit_dsn, "acme", seq=1)
    assert verify_chains(store, SECRET).ok
    broken = verify(store, ring, sink).broken
    assert broken.seq == 1 and broken.last_good is None  # even the registration differs


def test_a_deleted_tenant_is_caught(store, log, ring, sink, audit_dsn):  # noqa: F811
    append(log, 3)
    globex = append(log, 2, "globex")
    log.flush()
    raw_sql(audit_dsn, *((f"DELETE FROM {table} WHERE tenant = ?", ("globex",))
                         for table in ("decision_records", "decision_chain_heads", "decision_checkpoints")))
    assert verify_chains(store, SECRET).ok
    broken = verify(store, ring, sink).broken
    assert (broken.tenant, broken.seq, broken.decision_id) == ("globex", 2, globex[-1].decision_id)
    assert "deleted" in broken.reason and "signed registry" in broken.reason
    assert verify(store, ring, sink, tenants=["acme"]).ok


def test_a_tenant_written_behind_the_gateway_is_not_in_the_registry(store, log, ring, sink):
    append(log, 2)
    log.flush()
    store.append(event("ghost", 0))  # straight into the store: no gateway signed it
    broken = verify(store, ring, sink).broken
    assert broken.tenant == "ghost" and "not in the signed tenant registry" in broken.reason


def test_purged_records_stay_verifiable_behind_the_checkpoints(store, log, ring, sink):
    old = append(log, 4, days_ago=40)
    log.flush()
    append(log, 3)
    log.flush()
    store.purge(dt.datetime.now(dt.UTC) - dt.timedelta(days=30), checkpoint_secret=SECRET)
    assert store.checkpoint("acme").seq == 4 and store.get(old[0].decision_id) is None
    report = verify(store, ring, sink)
    assert report.ok and report.records == 3 and report.covered == 3


def test_a_purge_checkpoint_that_differs_from_the_signed_one_is_caught(store, log, ring, sink, audit_dsn):  # noqa: F811
    append(log, 4, days_ago=40)
    log.flush()
    append(log, 2)
    rehash_from(store, audit_dsn, "acme", seq=1)  # rewrite history, then purge it away
    store.purge(dt.datetime.now(dt.UTC) - dt.timedelta(days=30), checkpoint_secret=SECRET)
    broken = verify(store, ring, sink).broken
    assert broken.seq == 4 and "purge checkpoint differs" in broken.reason


def _lines(sink: FileSink) -> list[SinkLine]:
    return list(read_file(sink.path))


def test_a_changed_or_foreign_statement_is_refused(store, log, ring, sink):
    append(log, 3)
    log.flush()
    lines = _lines(sink)
    forged = lines[-1]._replace(text=lines[-1].text.replace('"seq":3', '"seq":2'))
    with pytest.raises(CheckpointLogInvalid, match="signature is not valid"):
        read_checkpoints([*lines[:-1], forged], ring.public, store.log_id())
    other = KeyRing.from_private_key(Ed25519PrivateKey.generate())
    with pytest.raises(CheckpointLogInvalid, match="not in the key set"):
        read_checkpoints(lines, other.public, store.log_id())
    stray = SinkLine("x:1", lines[-1].text.replace('"type"', '"kind"'), True)
    with pytest.raises(CheckpointLogInvalid, match="not a checkpoint statement"):
        read_checkpoints([stray], ring.public, store.log_id())
    twice = SinkLine("x:2", lines[-1].text[:-1] + ',"v":1}', True)
    with pytest.raises(CheckpointLogInvalid, match="not a JSON statement"):
        read_checkpoints([twice], ring.public, store.log_id())


def test_an_incomplete_last_line_is_skipped_and_noted(store, log, ring, sink):
    append(log, 2)
    log.flush()
    with open(sink.path, "a", encoding="utf-8") as handle:
        handle.write('{"heads":[{"decision_id"')  # a write cut short by a crash
    found = signed(store, ring, sink)
    assert found.statements == 2 and len(found.notes) == 1 and "incomplete" in found.notes[0]


def test_statements_of_another_log_are_kept_apart(store, ring, sink):
    line = sign_statement(ring, kind="checkpoint", log_id="f" * 32, writer="w", heads=[ChainHead("acme", 1, "a" * 64, None)])
    sink.append(line)
    found = signed(store, ring, sink)
    assert found.statements == 0 and found.other_logs == {"f" * 32: 1} and found.registered == set()


def test_the_log_id_is_made_once_with_the_schema(audit_dsn):  # noqa: F811
    first = open_decision_log(audit_dsn)
    second = open_decision_log(audit_dsn)
    try:
        assert len(first.log_id()) == 32 and first.log_id() == second.log_id()
    finally:
        first.close()
        second.close()
    other = open_decision_log(str(Path(audit_dsn).parent / "other.sqlite")) if not audit_dsn.startswith("postgresql") else None
    if other is not None:
        assert other.log_id() != first.log_id()
        other.close()


def test_statements_in_a_redis_stream_read_back_like_the_file(store, ring, sink, redis_server, redis_client, tmp_path):
    settings = Settings(redis_url=redis_server.url, audit_dsn=str(tmp_path / "unused.sqlite"))
    redis = RedisConnection(settings, pool_size=2)
    stream = RedisStreamSink(redis, "toolgate:test:checkpoints")
    log = CheckpointingLog(store, CheckpointWriter(ring, [sink, stream]), interval_s=86_400)
    append(log, 3)
    log.flush()
    from_stream = list(stream.read())
    assert [line.text for line in from_stream] == [line.text for line in read_file(sink.path)]
    assert redis_client.xlen("toolgate:test:checkpoints") == 2
    both = read_checkpoints([*read_file(sink.path), *from_stream], ring.public, store.log_id())
    assert both.statements == 2  # one statement read twice counts once
    assert verify_chains(store, SECRET, signed=both).ok
    redis.close()


def test_the_clock_flushes_each_interval(store, ring, sink):
    log = CheckpointingLog(store, CheckpointWriter(ring, [sink]), interval_s=1)
    append(log, 2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kinds = [json.loads(line.text)["type"] for line in read_file(sink.path)]
        if "checkpoint" in kinds:
            break
        time.sleep(0.2)
    assert kinds == ["register", "checkpoint"]
    assert verify(store, ring, sink).covered == 2


def test_a_failing_sink_never_fails_the_append_and_is_caught_up(store, ring, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the sink's folder should be")
    sink = FileSink(blocker / "checkpoints.jsonl")
    log = CheckpointingLog(store, CheckpointWriter(ring, [sink]), interval_s=86_400)
    from prometheus_client import REGISTRY

    def errors() -> float:
        labels = {"kind": "register", "outcome": "error"}
        return REGISTRY.get_sample_value("toolgate_audit_checkpoints_total", labels) or 0.0

    before = errors()
    records = append(log, 3)  # the registration cannot be written: logged, counted, kept
    assert [r.seq for r in records] == [1, 2, 3]
    assert errors() == before + 1
    log.flush()  # still failing: nothing lost
    blocker.unlink()
    log.flush()
    kinds = [json.loads(line.text)["type"] for line in read_file(sink.path)]
    assert kinds == ["register", "checkpoint"]
    report = verify_chains(store, SECRET, signed=read_checkpoints(read_file(sink.path), ring.public, store.log_id()))
    assert report.ok and report.covered == 3
