"""The decision log's reader over SQL (``DecisionLogReader``): records by id, filtered pages
(keyset pagination on ``decision_id``), exports in batches, and the chain walk of ``verify``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from app.audit.chain import parse_content
from app.audit.queries import MAX_PAGE, DecisionPage, DecisionQuery, decode_cursor, encode_cursor
from app.audit.records import INDEXED_FIELDS, AuditRecord, ChainEntry, ChainHead, Checkpoint
from app.audit.schema import COLUMNS, SELECT_HEAD, SELECT_RECORD
from app.audit.sql_base import SqlBase
from app.timefmt import epoch_us, from_epoch_us


def _record(row: Sequence[Any]) -> AuditRecord:
    return AuditRecord.from_content(parse_content(row[0]), row[1])  # type: ignore[arg-type]


def _content(text: str) -> dict[str, Any] | None:
    try:
        value = parse_content(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None



class SqlReader(SqlBase):
    """The reads (see the module docstring)."""


    def get(self, decision_id: str, *, tenant: str | None = None) -> AuditRecord | None:
        """The record ``decision_id`` (of ``tenant`` when given), or None."""
        self.ensure_schema()
        sql, params = SELECT_RECORD + " WHERE decision_id = ?", [decision_id]
        if tenant is not None:
            sql += " AND tenant = ?"
            params.append(tenant)
        with self._read() as cur:
            cur.execute(self._sql(sql), params)
            row = cur.fetchone()
        return _record(row) if row else None

    @staticmethod
    def _where(query: DecisionQuery) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in query.equality_filters().items():
            clauses.append(f"{column} = ?")
            params.append(value)
        if query.since is not None:
            clauses.append("time_us >= ?")
            params.append(epoch_us(query.since))
        if query.until is not None:
            clauses.append("time_us < ?")
            params.append(epoch_us(query.until))
        return clauses, params

    def _select(self, clauses: list[str], params: list[Any], order: str, limit: int) -> list[AuditRecord]:
        sql = SELECT_RECORD
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

    def chain_head(self, tenant: str) -> ChainHead | None:
        """The tenant's chain head, or None."""
        self.ensure_schema()
        with self._read() as cur:
            cur.execute(self._sql(SELECT_HEAD), (tenant,))
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
        return Checkpoint(tenant, int(seq), hash_hex, decision_id, from_epoch_us(before_us), from_epoch_us(created_us), signature)

    def iter_chain(self, tenant: str, *, batch_size: int = 1000) -> Iterator[ChainEntry]:
        """Rows of ``tenant`` by ``seq``, in batches over the (tenant, seq) index."""
        self.ensure_schema()
        sql = self._sql(
            f"SELECT {COLUMNS}, doc, hash FROM decision_records WHERE tenant = ? AND seq > ? ORDER BY seq LIMIT ?"
        )
        after = -1
        seq_index = INDEXED_FIELDS.index("seq")
        while True:
            with self._read() as cur:
                cur.execute(sql, (tenant, after, batch_size))
                rows = cur.fetchall()
            for row in rows:
                columns = dict(zip(INDEXED_FIELDS, row[: len(INDEXED_FIELDS)], strict=True))
                yield ChainEntry(columns, _content(row[-2]), row[-1])
            if len(rows) < batch_size:
                return
            after = rows[-1][seq_index]

