"""The SQL store shared by the SQLite and PostgreSQL dialects: the backend hooks and the schema.

One code path for both databases. A dialect supplies only its connections and transactions
(``_write()``: a transaction holding the database's write lock on SQLite or a plain transaction
on PostgreSQL; ``_read()``: a cursor outside an explicit transaction), its placeholder style
(``_sql``), the row lock clause of the chain head (``FOR UPDATE`` on PostgreSQL; SQLite's
``BEGIN IMMEDIATE`` already serialises writers) and a schema lock. Both translate their library
errors into ``DependencyUnavailable``. ``SqlWriter`` and ``SqlReader`` build on this; a
dialect's store is both.
"""

from __future__ import annotations

import secrets
import threading
from abc import abstractmethod
from contextlib import AbstractContextManager
from typing import Any

from app.audit.schema import LOG_ID_VERSION, MIGRATIONS, SCHEMA_VERSION


class StoreMissing(LookupError):
    """A store opened with ``create=False`` is not a decision log: no such file, or no
    toolgate schema in it (a mistyped ``TOOLGATE_AUDIT_DSN``). The message names the store
    (never a password) and is safe to show."""


class SqlBase:
    """Hooks and schema management of a DB-API database (see the module docstring)."""

    #: Appended to the chain head SELECT inside ``_write`` (PostgreSQL: `` FOR UPDATE``).
    _lock_clause = ""
    #: A query whose first column is non-null when the ``decision_schema`` table exists.
    _schema_exists_sql = ""

    def __init__(self, *, create: bool = True) -> None:
        #: False: never create a decision log; a store without the schema is ``StoreMissing``.
        self._create = create
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._log_id: str | None = None

    def _describe(self) -> str:
        """What this store is, for messages (a path, or a URL without its password)."""
        return "the decision log"

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
        a read-only store still serves reads). Raises ``DependencyUnavailable``, and
        ``StoreMissing`` when the store was opened with ``create=False`` and holds no
        decision log."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            with self._read() as cur:
                current = self._schema_version(cur)
            if current == 0 and not self._create:
                raise StoreMissing(f"{self._describe()} holds no toolgate decision log")
            if current < SCHEMA_VERSION:
                with self._write() as cur:
                    self._lock_schema(cur)
                    cur.execute("CREATE TABLE IF NOT EXISTS decision_schema (version INTEGER NOT NULL)")
                    current = self._schema_version(cur)
                    for version, statements in MIGRATIONS:
                        if version > current:
                            for statement in statements:
                                cur.execute(statement)
                            if version == LOG_ID_VERSION:
                                cur.execute(
                                    self._sql("INSERT INTO decision_log_identity (log_id) VALUES (?)"), (secrets.token_hex(16),)
                                )
                            cur.execute(self._sql("INSERT INTO decision_schema (version) VALUES (?)"), (version,))
            self._schema_ready = True

    def log_id(self) -> str:
        """The random id of this decision log (32 hex digits), made with its schema: what its
        signed checkpoints name. Raises ``DependencyUnavailable``."""
        if self._log_id is None:
            self.ensure_schema()
            with self._read() as cur:
                cur.execute("SELECT log_id FROM decision_log_identity")
                row = cur.fetchone()
            if row is None:
                raise StoreMissing(f"{self._describe()} has no log id (decision_log_identity is empty)")
            self._log_id = str(row[0])
        return self._log_id

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

    def tenants(self) -> list[str]:
        """Tenants with a chain head or a record."""
        self.ensure_schema()
        with self._read() as cur:
            cur.execute(
                "SELECT tenant FROM decision_chain_heads UNION SELECT DISTINCT tenant FROM decision_records ORDER BY 1"
            )
            return [row[0] for row in cur.fetchall()]

    def tool_names(self, name: str, *, tenant: str | None = None) -> list[str]:
        """Record tool names that are ``name`` or ``<namespace>/name`` (a scan of the tool
        column: for the command line, not the decide path)."""
        self.ensure_schema()
        escaped = "".join("!" + c if c in "!%_" else c for c in name)
        sql = "SELECT DISTINCT tool FROM decision_records WHERE (tool = ? OR tool LIKE ? ESCAPE '!')"
        params = [name, "%/" + escaped]
        if tenant is not None:
            sql += " AND tenant = ?"
            params.append(tenant)
        with self._read() as cur:
            cur.execute(self._sql(sql + " ORDER BY 1"), params)
            return [row[0] for row in cur.fetchall()]
