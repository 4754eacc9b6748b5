"""Group commit of the SQLite decision log (app.audit.sqlite): concurrent appends of one
process share transactions, every caller gets its own committed record, chains stay intact,
and a failing group is retried record by record."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.audit.chain import canonical_members, verify_chains
from app.audit.dialects.sqlite import SqliteDecisionStore, _Pending
from app.audit.records import AuditEvent
from app.errors import DependencyUnavailable


def _event(i: int | str, tenant: str = "acme") -> AuditEvent:
    return AuditEvent(event="decide", tenant=tenant, request_id=f"req-{i}", subject_id="u-1", tool="readFile",
                      version="1", decision="allow")


@pytest.fixture
def store(tmp_path: Path):
    s = SqliteDecisionStore(tmp_path / "decisions.sqlite")
    yield s
    s.close()


def test_concurrent_appends_share_transactions_and_keep_chains(store, monkeypatch):
    transactions = []
    real_write = store._write

    def counting_write():
        transactions.append(1)
        return real_write()

    monkeypatch.setattr(store, "_write", counting_write)
    results: dict[int, str] = {}

    def append(i: int) -> None:
        record = store.append(_event(i, tenant=("acme", "globex")[i % 2]))
        results[i] = record.request_id

    threads = [threading.Thread(target=append, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"req-{i}" for i in range(64)}
    assert len(transactions) < 64  # some appends rode along in another thread's transaction
    report = verify_chains(store, b"k" * 32)
    assert report.ok and report.records == 64 and report.tenants == 2


def _pending(event: AuditEvent) -> _Pending:
    return _Pending(event, canonical_members(event))


def test_a_failing_group_is_retried_one_record_at_a_time(store, monkeypatch):
    real_append_in = store._append_in

    def failing_for_bad(cur, events):
        if any(event.request_id == "req-bad" for event, _ in events):
            raise DependencyUnavailable("the decision log is unavailable", log_detail="test")
        return real_append_in(cur, events)

    monkeypatch.setattr(store, "_append_in", failing_for_bad)
    group = [_pending(_event(1)), _pending(_event("bad")), _pending(_event(2))]
    store._commit_group(group)
    assert group[0].record is not None and group[2].record is not None
    assert isinstance(group[1].error, DependencyUnavailable) and group[1].record is None
    assert verify_chains(store, b"k" * 32).records == 2


def test_a_bug_in_one_record_fails_only_that_record(store, monkeypatch):
    """Any exception (not only a store error) in one record leaves the other members of its
    group committed; the failing one gets a 503 and the bug is logged."""
    real_append_in = store._append_in

    def buggy_for_bad(cur, events):
        if any(event.request_id == "req-bad" for event, _ in events):
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return real_append_in(cur, events)

    monkeypatch.setattr(store, "_append_in", buggy_for_bad)
    group = [_pending(_event(1)), _pending(_event("bad", tenant="evil")), _pending(_event(2, tenant="globex"))]
    store._commit_group(group)
    assert group[0].record is not None and group[2].record is not None
    assert isinstance(group[1].error, DependencyUnavailable) and group[1].record is None
    assert verify_chains(store, b"k" * 32).records == 2


def test_one_group_of_interleaved_tenants_extends_each_chain_in_order(store):
    store.append(_event("first"))
    group = [_pending(_event(1)), _pending(_event(2, tenant="globex")), _pending(_event(3)), _pending(_event(4))]
    store._commit_group(group)
    assert [(p.record.tenant, p.record.seq) for p in group] == [("acme", 2), ("globex", 1), ("acme", 3), ("acme", 4)]
    assert group[2].record.prev_hash == group[0].record.hash and group[3].record.prev_hash == group[2].record.hash
    store.append(_event(5))  # the head moved to the group's last acme record
    report = verify_chains(store, b"k" * 32)
    assert report.ok and report.records == 6 and report.tenants == 2
