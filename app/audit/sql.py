"""The SQL store shared by the SQLite and PostgreSQL backends: schema, migrations, statements.

One code path for both databases. A backend supplies only its connections and transactions
(``_write()``: a transaction holding the database's write lock on SQLite or a plain
transaction on PostgreSQL; ``_read()``: a cursor outside an explicit transaction), its
placeholder style (statements here use ``?``), the row lock clause of the chain head
(``FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serialises writers) and a
schema lock. Both translate their library errors into ``DependencyUnavailable``.

Appending locks the tenant's row in ``decision_chain_heads``, so concurrent writers (threads,
gunicorn workers, gateway instances) extend each chain one record at a time.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from abc import abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Iterator, Sequence

from app.audit import (
    GENESIS_HASH,
    INDEXED_FIELDS,
    MAX_PAGE,
    AuditEvent,
    AuditRecord,
    ChainEntry,
    ChainHead,
    Checkpoint,
    DecisionPage,
    DecisionQuery,
    DecisionStore,
    SubjectHistory,
    decode_cursor,
    encode_cursor,
    to_epoch_us,
    utc_now,
)
from app.audit.chain import canonical_members, parse_content, seal, sign_checkpoint
from app.errors import DependencyUnavailable

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1


def canonical_members_or_unavailable(event: AuditEvent) -> dict[str, bytes]:
    """``canonical_members(event)``, before the write lock. A value that cannot be
    canonicalized (a bug: the pipeline stores only canonicalizable input) is logged and
    raised as ``DependencyUnavailable``, so only this call fails."""
    try:
        return canonical_members(event)
    except Exception as exc:  # noqa: BLE001 - any failure is this record's alone
        log.error("decision record could not be canonicalized", exc_info=exc, extra={"event": "audit_append_bug"})
        raise DependencyUnavailable(
            "the decision log is unavailable", log_detail=f"record could not be written: {type(exc).__name__}"
        ) from exc

#: (version, statements) applied in order to reach ``SCHEMA_VERSION``. Types valid in both.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE IF NOT EXISTS decision_records (
                decision_id TEXT PRIMARY KEY,
                tenant TEXT NOT NULL,
                seq BIGINT NOT NULL,
                time_us BIGINT NOT NULL,
                event TEXT NOT NULL,
                request_id TEXT NOT NULL,
                subject_id TEXT,
                conversation_id TEXT,
                tool TEXT,
                decision TEXT,
                error_code TEXT,
                approval_id TEXT,
                idempotency_key_hash TEXT,
                replayed INTEGER NOT NULL,
                doc TEXT NOT NULL,
                hash TEXT NOT NULL,
                UNIQUE (tenant, seq)
            )""",
            """CREATE TABLE IF NOT EXISTS decision_chain_heads (
                tenant TEXT PRIMARY KEY,
                seq BIGINT NOT NULL,
                hash TEXT NOT NULL,
                decision_id TEXT
            )""",
            """CREATE TABLE IF NOT EXISTS decision_checkpoints (
                tenant TEXT PRIMARY KEY,
                seq BIGINT NOT NULL,
                hash TEXT NOT NULL,
                decision_id TEXT NOT NULL,
                purged_before_us BIGINT NOT NULL,
                created_us BIGINT NOT NULL,
                signature TEXT NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS decision_records_tenant_id ON decision_records (tenant, decision_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_tenant_time ON decision_records (tenant, time_us)",
            "CREATE INDEX IF NOT EXISTS decision_records_time ON decision_records (time_us)",
            "CREATE INDEX IF NOT EXISTS decision_records_subject_id ON decision_records (tenant, subject_id, decision_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_subject_time ON decision_records (tenant, subject_id, time_us)",
            "CREATE INDEX IF NOT EXISTS decision_records_conversation ON decision_records"
            " (tenant, subject_id, conversation_id, time_us)",
            "CREATE INDEX IF NOT EXISTS decision_records_tool ON decision_records (tenant, tool, decision_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_decision ON decision_records (tenant, decision, decision_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_event ON decision_records (tenant, event, decision_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_error ON decision_records (tenant, error_code, decision_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_request ON decision_records (request_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_approval ON decision_records (approval_id)",
            "CREATE INDEX IF NOT EXISTS decision_records_key ON decision_records (idempotency_key_hash)",
        ),
    ),
)

_COLUMNS = ", ".join(INDEXED_FIELDS)
_INSERT_RECORD = (
    f"INSERT INTO decision_records ({_COLUMNS}, doc, hash) VALUES ({', '.join('?' * (len(INDEXED_FIELDS) + 2))})"
)
_SELECT_RECORD = "SELECT doc, hash FROM decision_records"
_SELECT_HEAD = "SELECT seq, hash, decision_id FROM decision_chain_heads WHERE tenant = ?"
_UPSERT_CHECKPOINT = (
    "INSERT INTO decision_checkpoints (tenant, seq, hash, decision_id, purged_before_us, created_us, signature)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,"
    " decision_id = excluded.decision_id, purged_before_us = excluded.purged_before_us,"
    " created_us = excluded.created_us, signature = excluded.signature"
)


def _from_epoch_us(value: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=value)


def _record(row: Sequence[Any]) -> AuditRecord:
    return AuditRecord.from_content(parse_content(row[0]), row[1])  # type: ignore[arg-type]


def _content(text: str) -> dict[str, Any] | None:
    try:
        value = parse_content(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class SqlDecisionStore(DecisionStore):
    """``DecisionLog`` and ``DecisionLogReader`` over a DB-API database (see module doc)."""

    #: Appended to the chain head SELECT inside ``_write`` (PostgreSQL: `` FOR UPDATE``).
    _lock_clause = ""
    #: A query whose first column is non-null when the ``decision_schema`` table exists.
    _schema_exists_sql = ""

    def __init__(self) -> None:
        self._schema_ready = False
        self._schema_lock = threading.Lock()

    # -- backend hooks ------------------------------------------------------------------------

    @abstractmethod
    def _write(self) -> AbstractContextManager[Any]:
        """A cursor inside a write transaction, committed on exit (rolled back on error)."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Any]:
        """A cursor for reads."""

    def _sql(self, statement: str) -> str:
        """``statement`` in the backend's placeholder style (statements here use ``?``)."""
        return statement

    def _lock_schema(self, cur: Any) -> None:
        """Serialise migrations between processes (inside the migration transaction)."""

    # -- schema -------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create or migrate the schema once per process; reads only when it is current (so
        a read-only store still serves reads). Raises ``DependencyUnavailable``."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            with self._read() as cur:
                current = self._schema_version(cur)
            if current < SCHEMA_VERSION:
                with self._write() as cur:
                    self._lock_schema(cur)
                    cur.execute("CREATE TABLE IF NOT EXISTS decision_schema (version INTEGER NOT NULL)")
                    current = self._schema_version(cur)
                    for version, statements in MIGRATIONS:
                        if version > current:
                            for statement in statements:
                                cur.execute(statement)
                            cur.execute(self._sql("INSERT INTO decision_schema (version) VALUES (?)"), (version,))
            self._schema_ready = True

    def _schema_version(self, cur: Any) -> int:
        cur.execute(self._schema_exists_sql)
        row = cur.fetchone()
        if not row or row[0] is None:
            return 0
        cur.execute("SELECT MAX(version) FROM decision_schema")
        row = cur.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def probe(self) -> None:
        """Readiness: the schema is current and a query answers."""
        self.ensure_schema()
        with self._read() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()

    # -- writer -------------------------------------------------------------------------------

    def _locked_head(self, cur: Any, tenant: str) -> ChainHead:
        select = self._sql(_SELECT_HEAD + self._lock_clause)
        cur.execute(select, (tenant,))
        row = cur.fetchone()
        if row is None:
            cur.execute(
                self._sql(
                    "INSERT INTO decision_chain_heads (tenant, seq, hash, decision_id) VALUES (?, 0, ?, NULL)"
                    " ON CONFLICT (tenant) DO NOTHING"
                ),
                (tenant, GENESIS_HASH),
            )
            cur.execute(select, (tenant,))
            row = cur.fetchone()
        return ChainHead(tenant, int(row[0]), row[1], row[2])

    def append(self, event: AuditEvent) -> AuditRecord:
        """Append ``event`` after the tenant's chain head, in one transaction holding the
        head's lock. Raises ``DependencyUnavailable`` when the store cannot write."""
        self.ensure_schema()
        members = canonical_members_or_unavailable(event)
        with self._write() as cur:
            return self._append_in(cur, [(event, members)])[0]

    def _append_in(self, cur: Any, events: Sequence[tuple[AuditEvent, dict[str, bytes]]]) -> list[AuditRecord]:
        """Append ``events`` (each with its ``canonical_members``), in order, inside the open
        write transaction of ``cur``; returns their records. Few statements whatever the count
        (one head read and one head update per tenant, one batched insert), as the write lock
        is held meanwhile."""
        heads: dict[str, tuple[int, str]] = {}
        records, rows = [], []
        for event, members in events:
            if event.tenant not in heads:
                head = self._locked_head(cur, event.tenant)
                heads[event.tenant] = (head.seq, head.hash)
            seq, prev_hash = heads[event.tenant]
            record, text = seal(event, seq + 1, prev_hash, members)
            heads[event.tenant] = (record.seq, record.hash)
            records.append(record)
            rows.append((*record.index_columns().values(), text, record.hash))
        cur.executemany(self._sql(_INSERT_RECORD), rows)
        last = {record.tenant: record for record in records}
        cur.executemany(
            self._sql("UPDATE decision_chain_heads SET seq = ?, hash = ?, decision_id = ? WHERE tenant = ?"),
            [(record.seq, record.hash, record.decision_id, tenant) for tenant, record in last.items()],
        )
        return records

    def purge(self, before: dt.datetime, *, checkpoint_secret: bytes, batch_size: int = 5000) -> list[Checkpoint]:
        """Delete each tenant's oldest records while their time is before ``before``, in
        batches of ``batch_size``; each batch deletes a prefix of the chain and upserts the
        signed checkpoint in the same transaction. Returns the last checkpoint per tenant."""
        self.ensure_schema()
        before_us = to_epoch_us(before)
        written: list[Checkpoint] = []
        for tenant in self.tenants():
            checkpoint = None
            while True:
                batch_checkpoint, more = self._purge_batch(tenant, before, before_us, checkpoint_secret, batch_size)
                checkpoint = batch_checkpoint or checkpoint
                if not more:
                    break
            if checkpoint is not None:
                written.append(checkpoint)
        return written

    def _purge_batch(
        self, tenant: str, before: dt.datetime, before_us: int, secret: bytes, batch_size: int
    ) -> tuple[Checkpoint | None, bool]:
        with self._write() as cur:
            self._locked_head(cur, tenant)
            cur.execute(
                self._sql("SELECT seq, time_us, hash, decision_id FROM decision_records WHERE tenant = ? ORDER BY seq LIMIT ?"),
                (tenant, batch_size),
            )
            rows = cur.fetchall()
            old = []
            for row in rows:
                if row[1] >= before_us:
                    break
                old.append(row)
            if not old:
                return None, False
            last_seq, _, last_hash, last_id = old[-1]
            cur.execute(self._sql("DELETE FROM decision_records WHERE tenant = ? AND seq <= ?"), (tenant, last_seq))
            checkpoint = sign_checkpoint(Checkpoint(tenant, int(last_seq), last_hash, last_id, before, utc_now()), secret)
            cur.execute(
                self._sql(_UPSERT_CHECKPOINT),
                (
                    tenant, checkpoint.seq, checkpoint.hash, checkpoint.decision_id,
                    to_epoch_us(checkpoint.purged_before), to_epoch_us(checkpoint.created), checkpoint.signature,
                ),
            )
        return checkpoint, len(old) == len(rows) == batch_size

    # -- reader -------------------------------------------------------------------------------

    def get(self, decision_id: str, *, tenant: str | None = None) -> AuditRecord | None:
        """The record ``decision_id`` (of ``tenant`` when given), or None."""
        self.ensure_schema()
        sql, params = _SELECT_RECORD + " WHERE decision_id = ?", [decision_id]
        if tenant is not None:
            sql += " AND tenant = ?"
            params.append(tenant)
        with self._read() as cur:
            cur.execute(self._sql(sql), params)
            row = cur.fetchone()
        return _record(row) if row else None

    @staticmethod
    def _where(query: DecisionQuery) -> tuple[list[str], list[Any]]:
        clauses, params = [], []
        for column, value in query.equality_filters().items():
            clauses.append(f"{column} = ?")
            params.append(value)
        if query.since is not None:
            clauses.append("time_us >= ?")
            params.append(to_epoch_us(query.since))
        if query.until is not None:
            clauses.append("time_us < ?")
            params.append(to_epoch_us(query.until))
        return clauses, params

    def _select(self, clauses: list[str], params: list[Any], order: str, limit: int) -> list[AuditRecord]:
        sql = _SELECT_RECORD
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += f" ORDER BY decision_id {order} LIMIT ?"
        with self._read() as cur:
            cur.execute(self._sql(sql), [*params, limit])
            rows = cur.fetchall()
        return [_record(row) for row in rows]

    def query(self, query: DecisionQuery, *, limit: int = 100, cursor: str | None = None) -> DecisionPage:
        """Newest first, keyset on ``decision_id``. Raises ``ValueError`` for a limit outside
        1..``MAX_PAGE`` and ``ValidationFailed`` (400) for a bad cursor."""
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be within 1..{MAX_PAGE}")
        self.ensure_schema()
        clauses, params = self._where(query)
        if cursor is not None:
            clauses.append("decision_id < ?")
            params.append(decode_cursor(cursor))
        records = self._select(clauses, params, "DESC", limit + 1)
        if len(records) > limit:
            return DecisionPage(records[:limit], encode_cursor(records[limit - 1].decision_id))
        return DecisionPage(records, None)

    def iter_records(self, query: DecisionQuery, *, batch_size: int = 500) -> Iterator[AuditRecord]:
        """Oldest first; one short read per batch, so memory stays constant."""
        self.ensure_schema()
        clauses, params = self._where(query)
        after: str | None = None
        while True:
            extra = (["decision_id > ?"], [after]) if after is not None else ([], [])
            batch = self._select(clauses + extra[0], params + extra[1], "ASC", batch_size)
            yield from batch
            if len(batch) < batch_size:
                return
            after = batch[-1].decision_id

    def subject_history(
        self,
        tenant: str,
        subject_id: str,
        *,
        conversation_id: str | None = None,
        window_s: int = 86_400,
        max_rows: int = 1000,
    ) -> SubjectHistory:
        """One range scan over the subject's (and conversation's) newest ``max_rows`` records
        in the window; allowed, non-replayed decide records counted per tool."""
        self.ensure_schema()
        since_us = to_epoch_us(utc_now()) - window_s * 1_000_000
        sql = "SELECT tool, event, decision, error_code, replayed FROM decision_records WHERE tenant = ? AND subject_id = ?"
        params: list[Any] = [tenant, subject_id]
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            params.append(conversation_id)
        sql += " AND time_us >= ? ORDER BY time_us DESC LIMIT ?"
        params += [since_us, max_rows]
        with self._read() as cur:
            cur.execute(self._sql(sql), params)
            rows = cur.fetchall()
        tools: dict[str, int] = {}
        for tool, event, decision, error_code, replayed in rows:
            if event == "decide" and decision == "allow" and error_code is None and not replayed and tool:
                tools[tool] = tools.get(tool, 0) + 1
        return SubjectHistory(window_s, conversation_id, sum(tools.values()), dict(sorted(tools.items())), len(rows) >= max_rows)

    def tenants(self) -> list[str]:
        """Tenants with a chain head or a record."""
        self.ensure_schema()
        with self._read() as cur:
            cur.execute(
                "SELECT tenant FROM decision_chain_heads UNION SELECT DISTINCT tenant FROM decision_records ORDER BY 1"
            )
            return [row[0] for row in cur.fetchall()]

    def chain_head(self, tenant: str) -> ChainHead | None:
        """The tenant's chain head, or None."""
        self.ensure_schema()
        with self._read() as cur:
            cur.execute(self._sql(_SELECT_HEAD), (tenant,))
            row = cur.fetchone()
        return ChainHead(tenant, int(row[0]), row[1], row[2]) if row else None

    def checkpoint(self, tenant: str) -> Checkpoint | None:
        """The tenant's purge checkpoint, or None."""
        self.ensure_schema()
        with self._read() as cur:
            cur.execute(
                self._sql(
                    "SELECT seq, hash, decision_id, purged_before_us, created_us, signature"
                    " FROM decision_checkpoints WHERE tenant = ?"
                ),
                (tenant,),
            )
            row = cur.fetchone()
        if row is None:
            return None
        seq, hash_hex, decision_id, before_us, created_us, signature = row
        return Checkpoint(tenant, int(seq), hash_hex, decision_id, _from_epoch_us(before_us), _from_epoch_us(created_us), signature)

    def iter_chain(self, tenant: str, *, batch_size: int = 1000) -> Iterator[ChainEntry]:
        """Rows of ``tenant`` by ``seq``, in batches over the (tenant, seq) index."""
        self.ensure_schema()
        sql = self._sql(
            f"SELECT {_COLUMNS}, doc, hash FROM decision_records WHERE tenant = ? AND seq > ? ORDER BY seq LIMIT ?"
        )
        after = -1
        seq_index = INDEXED_FIELDS.index("seq")
        while True:
            with self._read() as cur:
                cur.execute(sql, (tenant, after, batch_size))
                rows = cur.fetchall()
            for row in rows:
                columns = dict(zip(INDEXED_FIELDS, row[: len(INDEXED_FIELDS)]))
                yield ChainEntry(columns, _content(row[-2]), row[-1])
            if len(rows) < batch_size:
                return
            after = rows[-1][seq_index]
