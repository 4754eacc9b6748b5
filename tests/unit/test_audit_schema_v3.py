"""Schema version 3 of the decision log, on SQLite and PostgreSQL alike: a version 2 log with
records migrates in place (its chains still verify, its records read back without a shadow),
the ``shadow_outcome`` column is indexed and filtered on, and the revision archive keeps one
bundle per revision."""

from __future__ import annotations

import hashlib
import json

import pytest
import rfc8785

from app.audit import sql_base
from app.audit.chain import verify_chains
from app.audit.queries import DecisionQuery
from app.audit.records import GENESIS_HASH, AuditEvent
from app.audit.schema import MIGRATIONS, SCHEMA_VERSION
from app.audit.stores import open_decision_log
from app.policy.archive import ArchivedBundleInvalid, PolicyArchive
from app.policy.bundle import read_directory
from app.timefmt import epoch_us
from tests.conftest import POLICY_DIR
from tests.support.postgres import audit_dsn  # noqa: F401  (fixture)

SECRET = b"test-checkpoint-secret"
V2_COLUMNS = (
    "decision_id, tenant, seq, time_us, event, request_id, subject_id, conversation_id, tool, decision, error_code,"
    " approval_id, idempotency_key_hash, replayed, doc, hash"
)


def _v2_row(seq: int, prev_hash: str) -> tuple:
    """A record as a version 2 gateway wrote it: no shadow, no policy input members."""
    event = AuditEvent(event="decide", tenant="acme", request_id=f"old-{seq}", subject_id="u-1", tool="readFile",
                       version="1", decision="allow")
    doc = event.to_doc()
    for member in ("policy_input", "policy_input_redacted", "policy_decision", "shadow"):
        del doc[member]
    content = {**doc, "seq": seq, "prev_hash": prev_hash}
    text = rfc8785.dumps(content)
    return (doc["decision_id"], "acme", seq, epoch_us(event.time), "decide", doc["request_id"], "u-1", None,
            "readFile", "allow", None, None, None, 0, text.decode(), hashlib.sha256(text).hexdigest())


def _version_2_log(dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A version 2 log holding two records; returns the second record's hash."""
    monkeypatch.setattr(sql_base, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(sql_base, "MIGRATIONS", MIGRATIONS[:2])
    store = open_decision_log(dsn)
    try:
        store.ensure_schema()
        first = _v2_row(1, GENESIS_HASH)
        second = _v2_row(2, first[-1])
        with store._write() as cur:
            for row in (first, second):
                cur.execute(store._sql(f"INSERT INTO decision_records ({V2_COLUMNS}) VALUES ({', '.join('?' * 16)})"), row)
            cur.execute(store._sql("INSERT INTO decision_chain_heads (tenant, seq, hash, decision_id) VALUES (?, ?, ?, ?)"),
                        ("acme", 2, second[-1], second[0]))
    finally:
        store.close()
        monkeypatch.undo()
    return str(second[-1])


def test_a_version_2_log_migrates_and_its_chains_still_verify(audit_dsn, monkeypatch):  # noqa: F811
    _version_2_log(audit_dsn, monkeypatch)
    store = open_decision_log(audit_dsn)
    try:
        store.probe()
        with store._read() as cur:
            cur.execute("SELECT MAX(version) FROM decision_schema")
            assert cur.fetchone()[0] == SCHEMA_VERSION >= 3
        old = store.query(DecisionQuery(tenant="acme")).records
        assert [r.seq for r in old] == [2, 1] and all(r.shadow is None and r.policy_input is None for r in old)
        shadowed = store.append(AuditEvent(
            event="decide", tenant="acme", request_id="new", tool="readFile", decision="allow", policy_decision="allow",
            shadow={"source": "candidate", "revision": "sha256:c", "decision": "deny", "reasons": ["no"],
                    "matched_rules": [], "error": None, "agrees": False},
        ))
        assert shadowed.seq == 3
        report = verify_chains(store, SECRET)
        assert report.ok and report.records == 3
        assert [r.decision_id for r in store.query(DecisionQuery(shadow_outcome="disagrees")).records] == [shadowed.decision_id]
        assert store.query(DecisionQuery(shadow_outcome="agrees")).records == []
    finally:
        store.close()


def test_shadow_outcomes_are_indexed_columns_that_verify_checks(audit_dsn):  # noqa: F811
    store = open_decision_log(audit_dsn)
    try:
        def shadow(**fields):
            base = {"source": "candidate", "revision": None, "decision": None, "reasons": [], "matched_rules": [],
                    "error": None, "agrees": None}
            return {**base, **fields}

        made = {
            "agrees": store.append(AuditEvent(event="decide", tenant="acme", request_id="a", decision="allow",
                                              shadow=shadow(decision="allow", agrees=True))),
            "disagrees": store.append(AuditEvent(event="decide_dry_run", tenant="acme", request_id="d", decision="allow",
                                                 shadow=shadow(decision="deny", agrees=False))),
            "error": store.append(AuditEvent(event="decide", tenant="acme", request_id="e", decision="deny",
                                             shadow=shadow(error="timeout"))),
        }
        store.append(AuditEvent(event="decide", tenant="acme", request_id="n", decision="allow"))
        for outcome, record in made.items():
            assert [r.decision_id for r in store.query(DecisionQuery(shadow_outcome=outcome)).records] == [record.decision_id]
        with store._read() as cur:
            cur.execute(store._sql("SELECT shadow_outcome FROM decision_records WHERE request_id = ?"), ("n",))
            assert cur.fetchone()[0] is None
        assert verify_chains(store, SECRET).ok
        with store._write() as cur:  # an auditor-visible column changed behind the chain's back
            cur.execute(store._sql("UPDATE decision_records SET shadow_outcome = 'agrees' WHERE request_id = ?"), ("d",))
        report = verify_chains(store, SECRET)
        assert not report.ok and "indexed columns" in report.broken.reason
    finally:
        store.close()


def test_the_revision_archive_keeps_each_revision_once(audit_dsn):  # noqa: F811
    store = open_decision_log(audit_dsn)
    try:
        archive = PolicyArchive(store)
        bundle = read_directory(POLICY_DIR)
        assert archive.keep(bundle) is True
        assert archive.keep(bundle) is False  # once per process
        assert PolicyArchive(store).keep(bundle) is False  # and once per store
        again = archive.get(bundle.revision)
        assert again is not None and again.revision == bundle.revision and dict(again.files) == dict(bundle.files)
        assert archive.get("sha256:0000000000000000") is None
        assert [r.revision for r in store.archived_revisions()] == [bundle.revision]
        # A row changed in the store no longer hashes to its revision: refused, never used.
        other = read_directory(POLICY_DIR / "tools" / "files")
        from app.policy.bundle import build_tarball

        with store._write() as cur:
            import base64

            cur.execute(store._sql("UPDATE policy_revisions SET bundle = ? WHERE revision = ?"),
                        (base64.b64encode(build_tarball(other)).decode(), bundle.revision))
        with pytest.raises(ArchivedBundleInvalid, match="does not hash"):
            archive.get(bundle.revision)
        assert json.dumps([r.source for r in store.archived_revisions()])
    finally:
        store.close()
