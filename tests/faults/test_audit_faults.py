"""The decision log store is unavailable: decide answers 503 DEPENDENCY_UNAVAILABLE (retryable,
Retry-After) and never a decision, whatever the outcome would have been; the gateway recovers
when the store is back. SQLite made read-only or locked; PostgreSQL stopped."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.audit.queries import DecisionQuery
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.postgres import fresh_database, shared_postgres

AGENT = {"roles": ["support_agent"]}


def _allow(client):
    return client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/reports/q1.csv"}), headers=auth(**AGENT))


def _invalid(client):
    return client.post("/v1/decide", json=decide_body("readFile", {"nope": 1}), headers=auth(**AGENT))


def assert_fails_closed(resp) -> None:
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert "decision" not in resp.get_json()


@contextmanager
def read_only(paths: list[Path]) -> Iterator[None]:
    """Make files unwritable, for root too (the immutable attribute; root ignores modes)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.fail("chattr (e2fsprogs) is needed to make a file read-only for root")
        result = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.fail(f"this filesystem has no immutable attribute (chattr +i): {result.stderr.strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
    else:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)


def test_a_read_only_sqlite_store_fails_closed(make_app, tmp_path):
    path = tmp_path / "log" / "decisions.sqlite"
    app = make_app(audit_dsn=str(path))
    client = app.test_client()
    assert _allow(client).status_code == 200
    # The database and its write-ahead log; not the -shm index, which SQLite maps into memory
    # (a mapped file turned immutable kills the process with SIGBUS instead of an error).
    files = [path, path.with_name(path.name + "-wal")]
    assert all(p.exists() for p in files)
    with read_only(files):
        assert_fails_closed(_allow(client))  # the running gateway, connection already open
        assert_fails_closed(_invalid(client))  # an error outcome needs its record too
        restarted = make_app(audit_dsn=str(path))  # a gateway started on the read-only store
        assert_fails_closed(_allow(restarted.test_client()))
    assert _allow(client).status_code == 200  # writable again: recovered
    records = list(app.extensions["toolgate"].decision_reader.iter_records(DecisionQuery()))
    assert [r.decision for r in records] == ["allow", "allow"]


def test_a_locked_sqlite_store_fails_closed_after_its_timeout(make_app, tmp_path):
    path = tmp_path / "decisions.sqlite"
    client = make_app(audit_dsn=str(path), audit_timeout_ms=200).test_client()
    assert _allow(client).status_code == 200
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        assert_fails_closed(_allow(client))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert _allow(client).status_code == 200


def _wait_ready(client, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "the decision log did not come back"
        time.sleep(0.2)


def test_a_stopped_postgresql_fails_closed_and_recovers(make_app):
    server = shared_postgres()
    dsn = fresh_database()
    app = make_app(audit_dsn=dsn, audit_timeout_ms=1000)
    started_while_down = None
    try:
        client = app.test_client()
        assert _allow(client).status_code == 200
        server.stop()
        try:
            assert_fails_closed(_allow(client))
            assert_fails_closed(_invalid(client))
            ready = client.get("/readyz")
            assert ready.status_code == 503 and ready.get_json()["checks"]["decision_log"] == "unavailable"
            started_while_down = make_app(audit_dsn=dsn, audit_timeout_ms=1000)  # starts; refuses to decide
            assert_fails_closed(_allow(started_while_down.test_client()))
        finally:
            server.start()
        _wait_ready(client)
        assert _allow(client).status_code == 200
        assert _allow(started_while_down.test_client()).status_code == 200
        records = list(app.extensions["toolgate"].decision_reader.iter_records(DecisionQuery()))
        assert [r.decision for r in records] == ["allow", "allow", "allow"]
    finally:
        app.extensions["toolgate"].decision_log.close()
        if started_while_down is not None:
            started_while_down.extensions["toolgate"].decision_log.close()


def test_a_key_reserved_by_an_unrecorded_allow_is_released(make_app, tmp_path):
    """The allow was never returned (503), so the retry with the same key must not meet a
    reservation (409) left by it: it is decided afresh and recorded."""
    path = tmp_path / "decisions.sqlite"
    client = make_app(audit_dsn=str(path), audit_timeout_ms=200).test_client()
    payment = decide_body("processPayment", {"amount": 120.5, "currency": "EUR", "recipient": "acct_42"})
    headers = {**auth(roles=["admin"]), "Idempotency-Key": "pay-key-7"}
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        assert_fails_closed(client.post("/v1/decide", json=payment, headers=headers))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    retry = client.post("/v1/decide", json=payment, headers=headers)
    assert retry.status_code == 200, retry.get_json()
    assert retry.get_json()["decision"] == "allow" and retry.get_json()["idempotency"]["state"] == "reserved"


def test_a_failed_batch_fails_every_call_in_it_and_releases_their_keys(make_app, tmp_path):
    """Calls whose records wait behind a batch go together into the next one; when the store
    stays locked that batch fails, and every call in it answers 503 and gives its key back:
    each retry is decided afresh (reserved), not refused as in flight."""
    path = tmp_path / "decisions.sqlite"
    app = make_app(audit_dsn=str(path), audit_timeout_ms=300)
    store = app.extensions["toolgate"].decision_reader
    sizes: list[int] = []
    real_commit = store._batches._commit

    def counting(batch):
        sizes.append(len(batch))
        return real_commit(batch)

    store._batches._commit = counting
    keys = [f"pay-batch-{i}" for i in range(6)]

    def pay(key: str):
        payment = decide_body("processPayment", {"amount": 12.5, "currency": "EUR", "recipient": "acct_42"})
        return app.test_client().post("/v1/decide", json=payment, headers={**auth(roles=["admin"]), "Idempotency-Key": key})

    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with ThreadPoolExecutor(len(keys)) as pool:
            answers = list(pool.map(pay, keys))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    for answer in answers:
        assert_fails_closed(answer)
    assert max(sizes) > 1  # calls shared a failed batch
    for key in keys:
        retry = pay(key)
        assert retry.status_code == 200, retry.get_json()
        assert retry.get_json()["idempotency"]["state"] == "reserved"
