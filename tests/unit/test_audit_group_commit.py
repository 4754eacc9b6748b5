"""Group commit of the decision log (app.audit.batches, app.audit.sql_writer), on SQLite and
PostgreSQL: the records that arrive while a batch is written go into the next transaction
together, every caller gets its own committed record, chains stay linear, a batch that fails
fails every call in it and leaves none of its records, and each record is encoded once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.audit import chain
from app.audit.batches import Batches
from app.audit.chain import verify_chains
from app.audit.dialects.sqlite import SqliteDecisionStore
from app.audit.records import AuditEvent
from app.audit.sql_writer import encoded
from app.audit.stores import open_decision_log
from app.errors import DependencyUnavailable
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)

SECRET = b"k" * 32


def _event(i: int | str, tenant: str = "acme", **fields) -> AuditEvent:
    return AuditEvent(event="decide", tenant=tenant, request_id=f"req-{i}", subject_id="u-1", tool="readFile",
                      version="1", decision="allow", **fields)


@pytest.fixture
def store(audit_dsn):  # noqa: F811
    s = open_decision_log(audit_dsn)
    yield s
    s.close()


def _count_transactions(store, monkeypatch) -> list[int]:
    """The size of every batch ``store`` commits from now on."""
    sizes: list[int] = []
    real_commit = store._commit

    def counting(batch):
        sizes.append(len(batch))
        return real_commit(batch)

    monkeypatch.setattr(store._batches, "_commit", counting)
    return sizes


def test_concurrent_appends_share_transactions_and_keep_chains(store, monkeypatch):
    sizes = _count_transactions(store, monkeypatch)
    results: dict[int, str] = {}

    def append(i: int) -> None:
        results[i] = store.append(_event(i, tenant=("acme", "globex")[i % 2])).request_id

    threads = [threading.Thread(target=append, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"req-{i}" for i in range(64)}
    assert sum(sizes) == 64 and len(sizes) < 64  # some appends rode along in another call's transaction
    report = verify_chains(store, SECRET)
    assert report.ok and report.records == 64 and report.tenants == 2


def _blocked_writer(store, monkeypatch) -> tuple[threading.Event, threading.Event, list[int]]:
    """Hold the first batch in its commit until ``release`` is set; ``entered`` is set once it
    is there. Returns ``(entered, release, batch sizes)``."""
    entered, release = threading.Event(), threading.Event()
    sizes: list[int] = []
    real_commit = store._commit

    def commit(batch):
        sizes.append(len(batch))
        if len(sizes) == 1:
            entered.set()
            assert release.wait(10)
        return real_commit(batch)

    monkeypatch.setattr(store._batches, "_commit", commit)
    return entered, release, sizes


def _run(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args)
    thread.start()
    return thread


def test_the_calls_that_arrive_during_a_commit_are_written_together_next(store, monkeypatch):
    entered, release, sizes = _blocked_writer(store, monkeypatch)
    records: dict[str, object] = {}

    def append(i: int | str) -> None:
        records[str(i)] = store.append(_event(i))

    first = _run(append, "first")
    assert entered.wait(10)
    waiting = [_run(append, i) for i in range(5)]
    while len(store._batches._queue) < 5:  # all five queued behind the batch being written
        threading.Event().wait(0.005)
    release.set()
    for thread in [first, *waiting]:
        thread.join(10)
    assert sizes == [1, 5]
    assert sorted(records) == ["0", "1", "2", "3", "4", "first"]
    report = verify_chains(store, SECRET)
    assert report.ok and report.records == 6


def test_a_failing_batch_fails_every_call_in_it_and_keeps_none_of_its_records(store, monkeypatch):
    entered, release, _ = _blocked_writer(store, monkeypatch)
    real_append_in = store._append_in

    def failing_for_bad(cur, events):
        if any(event.request_id == "req-bad" for event, _ in events):
            raise DependencyUnavailable("the decision log is unavailable", log_detail="test")
        return real_append_in(cur, events)

    monkeypatch.setattr(store, "_append_in", failing_for_bad)
    outcomes: dict[str, object] = {}

    def append(i: int | str) -> None:
        try:
            outcomes[str(i)] = store.append(_event(i)).seq
        except DependencyUnavailable as exc:
            outcomes[str(i)] = exc

    first = _run(append, "first")
    assert entered.wait(10)
    batch = [_run(append, i) for i in (1, "bad", 2)]
    while len(store._batches._queue) < 3:
        threading.Event().wait(0.005)
    release.set()
    for thread in [first, *batch]:
        thread.join(10)
    assert outcomes["first"] == 1
    assert all(isinstance(outcomes[i], DependencyUnavailable) for i in ("1", "bad", "2"))
    assert verify_chains(store, SECRET).records == 1
    assert store.append(_event(3)).seq == 2  # the next batch is written


def test_a_bug_in_a_batch_is_logged_and_answered_as_unavailable(store, monkeypatch, caplog):
    """Any exception (not only a store error) fails the batch with ``DependencyUnavailable``
    and logs the bug with its traceback; the store stays usable."""

    def buggy(cur, events):
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(store, "_append_in", buggy)
    with pytest.raises(DependencyUnavailable):
        store.append(_event("bad"))
    assert any(getattr(r, "event", None) == "audit_append_bug" and r.exc_info for r in caplog.records)
    monkeypatch.undo()
    assert store.append(_event(1)).seq == 1


def test_one_batch_of_interleaved_tenants_extends_each_chain_in_order(store):
    store.append(_event("first"))
    batch = [encoded(_event(1)), encoded(_event(2, tenant="globex")), encoded(_event(3)), encoded(_event(4))]
    records = store._commit(batch)
    assert [(r.tenant, r.seq) for r in records] == [("acme", 2), ("globex", 1), ("acme", 3), ("acme", 4)]
    assert records[2].prev_hash == records[0].hash and records[3].prev_hash == records[2].hash
    store.append(_event(5))  # the head moved to the batch's last acme record
    report = verify_chains(store, SECRET)
    assert report.ok and report.records == 6 and report.tenants == 2


def test_a_record_is_encoded_once(tmp_path: Path, monkeypatch):
    """One RFC 8785 pass over the record's document: its three runs around the chain fields,
    nothing encoded again under the write lock."""
    store = SqliteDecisionStore(tmp_path / "decisions.sqlite")
    calls: list[object] = []
    real = chain.canonical_json

    def counting(value):
        calls.append(value)
        return real(value)

    monkeypatch.setattr(chain, "canonical_json", counting)
    try:
        store.append(_event(1, input={"amount": 12.5}, policy_input={"session": {"calls": {"1h": 3}}}))
    finally:
        store.close()
    documents = [value for value in calls if isinstance(value, dict)]
    assert len(documents) == 3  # before prev_hash, between prev_hash and seq, after seq
    assert {"input", "policy_input"} <= set(documents[0]) and "time" in documents[2]


def test_a_policy_input_without_a_canonical_form_is_not_kept(store):
    """The record is written without it (the call is not failed for it), as before the policy
    input was encoded with the rest of the record."""
    record = store.append(_event(1, policy_input={"n": 2**64}, policy_input_redacted=("/context/prompt",)))
    assert record.policy_input is None and record.policy_input_redacted == ()
    read = store.get(record.decision_id)
    assert read is not None and read.policy_input is None and read.hash == record.hash
    assert verify_chains(store, SECRET).ok


def test_a_value_without_a_canonical_form_elsewhere_fails_only_its_call(store):
    with pytest.raises(DependencyUnavailable):
        store.append(_event(1, input={"n": 2**64}))
    assert store.append(_event(2)).seq == 1


def test_batches_hand_each_caller_its_own_result():
    batches: Batches[int, int] = Batches(lambda items: [item * 10 for item in items])
    results: dict[int, int] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, batches.submit(i))) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: i * 10 for i in range(20)}
