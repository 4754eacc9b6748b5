"""PostgreSQL backend of the decision log: psycopg 3 with a connection pool (psycopg_pool).

Each connection runs with ``statement_timeout`` and ``lock_timeout`` of ``timeout_ms``; a
connection is checked when taken from the pool, and reconnect attempts give up after
``2 x timeout_ms`` (at least 2 s) so the next request starts afresh: a restarted server is in
use again within seconds.
Writers lock the tenant's chain head row (``SELECT ... FOR UPDATE``); migrations hold a
transaction-level advisory lock so that several instances starting at once migrate once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from app.audit.sql_base import StoreMissing
from app.audit.sql_store import SqlDecisionStore
from app.errors import DependencyUnavailable

log = logging.getLogger(__name__)

#: Key of the advisory lock held while migrating (any constant unique to this schema).
_MIGRATION_LOCK_KEY = 7_341_905_126


def _unavailable(exc: BaseException) -> DependencyUnavailable:
    return DependencyUnavailable("the decision log is unavailable", log_detail=f"postgresql: {exc}")


class PostgresDecisionStore(SqlDecisionStore):
    """The decision log in the PostgreSQL database at ``dsn`` (a ``postgresql://`` URL).

    Thread-safe; build it after fork (the pool runs threads). ``timeout_ms`` bounds waiting
    for a pooled connection, connecting (whole seconds, at least 2), statements and locks.
    """

    _lock_clause = " FOR UPDATE"
    _schema_exists_sql = "SELECT to_regclass('decision_schema')::text"

    def __init__(self, dsn: str, *, timeout_ms: int = 5000, pool_max_size: int = 8, create: bool = True) -> None:
        super().__init__(create=create)
        try:
            conninfo = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ValueError("the audit dsn is not a valid PostgreSQL URL") from exc
        own_options = conninfo.get("options", "")
        self._location = f"PostgreSQL database {conninfo.get('dbname', '?')} on {conninfo.get('host', 'localhost')}"
        timeouts = f"-c statement_timeout={int(timeout_ms)} -c lock_timeout={int(timeout_ms)}"
        self._pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max(1, pool_max_size),
            open=False,
            timeout=timeout_ms / 1000,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(2, math.ceil(timeout_ms / 1000)),
                "options": f"{own_options} {timeouts}".strip(),  # keeps the dsn's own options
            },
            check=ConnectionPool.check_connection,
            # Give up a reconnect series soon, so that a restarted server is found again within
            # seconds (the next request starts a new series) rather than after a long backoff.
            reconnect_timeout=max(2.0, 2 * timeout_ms / 1000),
            name="toolgate-decision-log",
        )
        self._pool.open(wait=False)
        try:
            self.ensure_schema()
        except DependencyUnavailable as exc:
            log.warning("decision log not ready at start", extra={"event": "decision_log_unready", "detail": exc.log_detail})
        except StoreMissing:
            self._pool.close()
            raise

    def _describe(self) -> str:
        return self._location

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def _lock_schema(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))

    @contextmanager
    def _write(self) -> Iterator[psycopg.Cursor]:
        try:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                yield cur
        except psycopg.Error as exc:
            raise _unavailable(exc) from exc

    @contextmanager
    def _read(self) -> Iterator[psycopg.Cursor]:
        try:
            with self._pool.connection() as conn, conn.cursor() as cur:
                yield cur
        except psycopg.Error as exc:
            raise _unavailable(exc) from exc

    def close(self) -> None:
        """Close the pool and its connections."""
        self._pool.close()
