"""The decision log's writer over SQL (``DecisionLog``): append records to their tenant chain and
purge old ones behind a signed checkpoint.

Appends are group-committed (``app.audit.batches``): one writer per process at a time, and the
records that arrive while it writes go into its next transaction together (one ``fsync`` for
all of them on SQLite with ``synchronous=FULL``, one commit on PostgreSQL). Each caller returns
only once its own record is committed; a batch that fails fails every call in it (each caller
gets ``DependencyUnavailable`` and gives back what its call took). A record's document is
encoded once, before the write lock (``app.audit.chain.canonical_members``).

Appending locks the tenant's row in ``decision_chain_heads``, so writers of several processes
(gunicorn workers, gateway instances) still extend each chain one transaction at a time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from app.audit.batches import Batches
from app.audit.chain import CanonicalMembers, canonical_members, seal, sign_checkpoint
from app.audit.records import GENESIS_HASH, AuditEvent, AuditRecord, ChainHead, Checkpoint, is_storable
from app.audit.schema import INSERT_MAX_ROWS, SELECT_HEAD, UPSERT_CHECKPOINT, insert_records
from app.audit.sql_base import SqlBase
from app.errors import DependencyUnavailable
from app.timefmt import epoch_us, utc_now

log = logging.getLogger(__name__)

#: An event to append, with its canonical members.
_Encoded = tuple[AuditEvent, CanonicalMembers]


def _bug(exc: BaseException, what: str) -> DependencyUnavailable:
    """A failure that is not the store's (a bug): logged with its traceback, answered as 503."""
    log.error("decision record could not be %s", what, exc_info=exc, extra={"event": "audit_append_bug"})
    return DependencyUnavailable("the decision log is unavailable", log_detail=f"record could not be {what}: {type(exc).__name__}")


def encoded(event: AuditEvent) -> _Encoded:
    """``event`` and its ``canonical_members``, before the write lock. A policy input without
    an RFC 8785 form is not kept (the event is recorded with ``policy_input`` None); any other
    value that cannot be canonicalized (a bug: the pipeline stores only canonicalizable input)
    is logged and raised as ``DependencyUnavailable``, so only this call fails."""
    try:
        return event, canonical_members(event)
    except Exception as exc:
        if event.policy_input is None or is_storable(event.policy_input):
            raise _bug(exc, "canonicalized") from exc
    return encoded(dataclasses.replace(event, policy_input=None, policy_input_redacted=()))


class SqlWriter(SqlBase):
    """``append`` and ``purge`` (see the module docstring)."""

    def __init__(self, *, create: bool = True) -> None:
        super().__init__(create=create)
        self._batches: Batches[_Encoded, AuditRecord] = Batches(self._commit)

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
        """Append ``event`` after the tenant's chain head, with the batch it joins (see the
        module docstring); returns its record once committed. Raises
        ``DependencyUnavailable`` when the store cannot write it."""
        self.ensure_schema()
        return self._batches.submit(encoded(event))

    def _commit(self, batch: Sequence[_Encoded]) -> list[AuditRecord]:
        """One transaction for ``batch``. Raises ``DependencyUnavailable`` (any other failure
        is logged as a bug and raised as one)."""
        try:
            with self._write() as cur:
                return self._append_in(cur, batch)
        except DependencyUnavailable:
            raise
        except Exception as exc:
            raise _bug(exc, "written") from exc

    def _append_in(self, cur: Any, events: Sequence[_Encoded]) -> list[AuditRecord]:
        """Append ``events`` (each with its ``canonical_members``), in order, inside the open
        write transaction of ``cur``; returns their records. Few statements whatever the count
        (one head read and one head update per tenant, one insert of every row), as the write
        lock is held meanwhile."""
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
        for start in range(0, len(rows), INSERT_MAX_ROWS):
            chunk = rows[start:start + INSERT_MAX_ROWS]
            cur.execute(self._sql(insert_records(len(chunk))), [value for row in chunk for value in row])
        last = {record.tenant: record for record in records}
        for tenant, record in last.items():
            cur.execute(
                self._sql("UPDATE decision_chain_heads SET seq = ?, hash = ?, decision_id = ? WHERE tenant = ?"),
                (record.seq, record.hash, record.decision_id, tenant),
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

