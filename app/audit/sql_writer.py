"""The decision log's writer over SQL (``DecisionLog``): append records to their tenant chain and
purge old ones behind a signed checkpoint.

Appending locks the tenant's row in ``decision_chain_heads``, so concurrent writers (threads,
gunicorn workers, gateway instances) extend each chain one record at a time.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from app.audit.chain import canonical_members, seal, sign_checkpoint
from app.audit.records import GENESIS_HASH, AuditEvent, AuditRecord, ChainHead, Checkpoint
from app.audit.schema import INSERT_RECORD, SELECT_HEAD, UPSERT_CHECKPOINT
from app.audit.sql_base import SqlBase
from app.errors import DependencyUnavailable
from app.timefmt import epoch_us, utc_now

log = logging.getLogger(__name__)


def canonical_members_or_unavailable(event: AuditEvent) -> dict[str, bytes]:
    """``canonical_members(event)``, before the write lock. A value that cannot be
    canonicalized (a bug: the pipeline stores only canonicalizable input) is logged and
    raised as ``DependencyUnavailable``, so only this call fails."""
    try:
        return canonical_members(event)
    except Exception as exc:
        log.error("decision record could not be canonicalized", exc_info=exc, extra={"event": "audit_append_bug"})
        raise DependencyUnavailable(
            "the decision log is unavailable", log_detail=f"record could not be written: {type(exc).__name__}"
        ) from exc



class SqlWriter(SqlBase):
    """``append`` and ``purge`` (see the module docstring)."""


    def _locked_head(self, cur: Any, tenant: str) -> ChainHead:
        select = self._sql(SELECT_HEAD + self._lock_clause)
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
        cur.executemany(self._sql(INSERT_RECORD), rows)
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
        before_us = epoch_us(before)
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
                self._sql(UPSERT_CHECKPOINT),
                (
                    tenant, checkpoint.seq, checkpoint.hash, checkpoint.decision_id,
                    epoch_us(checkpoint.purged_before), epoch_us(checkpoint.created), checkpoint.signature,
                ),
            )
        return checkpoint, len(old) == len(rows) == batch_size

