"""The two interfaces of the decision log, as in Cerbos' audit log: ``DecisionLog`` writes
(``append``, and ``purge`` behind a signed checkpoint); ``DecisionLogReader`` reads (``get``,
``query``, ``iter_records``, the chain walk used by ``verify`` and the
log's id that signed checkpoints name).

Every method raises ``app.errors.DependencyUnavailable`` (503, retryable) when the store cannot
be reached, is read-only, locked past its timeout or fails; the sqlite3 and psycopg exception
types never escape the dialects.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Iterator

from app.audit.queries import DecisionPage, DecisionQuery
from app.audit.records import AuditEvent, AuditRecord, ChainEntry, ChainHead, Checkpoint
from app.audit.revisions import RevisionArchive


class DecisionLog(ABC):
    """The writer: append records and retire old ones. Thread-safe; one per worker."""

    @abstractmethod
    def append(self, event: AuditEvent) -> AuditRecord:
        """Append ``event`` to its tenant chain and return the stored record.

        Durable when it returns (committed). Raises ``DependencyUnavailable`` when the record
        cannot be written; the caller must then fail its request (nothing without a record).
        """

    @abstractmethod
    def purge(self, before: dt.datetime, *, checkpoint_secret: bytes, batch_size: int = 5000) -> list[Checkpoint]:
        """Delete every record older than ``before`` (a prefix of each tenant chain) and write a
        signed ``Checkpoint`` per tenant naming the last deleted record, in the same
        transaction as each deleting batch. Returns the checkpoints written (empty when
        nothing was old enough)."""

    @abstractmethod
    def probe(self) -> None:
        """Readiness: raise ``DependencyUnavailable`` unless the store answers."""

    @abstractmethod
    def close(self) -> None:
        """Release connections (idempotent)."""


class DecisionLogReader(ABC):
    """The reader: queries for auditors, exports, history for policies, the chain walk."""

    @abstractmethod
    def get(self, decision_id: str, *, tenant: str | None = None) -> AuditRecord | None:
        """The record ``decision_id``, or None; with ``tenant``, None for another tenant's."""

    @abstractmethod
    def query(self, query: DecisionQuery, *, limit: int = 100, cursor: str | None = None) -> DecisionPage:
        """A page of matching records, newest first (by ``decision_id``), at most ``limit``
        (1..``MAX_PAGE``). Keyset pagination: records appended while paging never cause a
        duplicate or a gap among those that existed at the first page."""

    @abstractmethod
    def iter_records(self, query: DecisionQuery, *, batch_size: int = 500) -> Iterator[AuditRecord]:
        """Every matching record, oldest first, read in batches (constant memory)."""

    @abstractmethod
    def tenants(self) -> list[str]:
        """Every tenant with a chain head or a record, sorted."""

    @abstractmethod
    def tool_names(self, name: str, *, tenant: str | None = None) -> list[str]:
        """The tool names of records (of ``tenant`` when given) that are ``name`` itself or
        ``name`` in a namespace (``<namespace>/name``), sorted."""

    @abstractmethod
    def chain_head(self, tenant: str) -> ChainHead | None:
        """The tenant's chain head row, or None."""

    @abstractmethod
    def checkpoint(self, tenant: str) -> Checkpoint | None:
        """The tenant's latest purge checkpoint, or None."""

    @abstractmethod
    def iter_chain(self, tenant: str, *, batch_size: int = 1000) -> Iterator[ChainEntry]:
        """Every stored row of ``tenant`` in ``seq`` order, as found (for ``verify``)."""

    @abstractmethod
    def log_id(self) -> str:
        """The random id this decision log was given when its schema was made (32 hex
        digits): its signed checkpoints name it, so that they are never taken for another
        log's."""


class DecisionStore(DecisionLog, DecisionLogReader, RevisionArchive, ABC):
    """A backend implementing both interfaces and the revision archive beside them (what
    ``open_decision_log`` returns)."""
