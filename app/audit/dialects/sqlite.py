"""SQLite backend of the decision log (the default): one file, WAL journal, a connection per
thread for reads and one for the process's writer, a busy timeout, writers serialised by
``BEGIN IMMEDIATE``.

Before ``BEGIN IMMEDIATE`` a writer takes its turn: a lock of this process, then ``flock`` on
``<path>.lock`` between processes (gunicorn workers). Waiters sleep in the kernel and wake as
soon as the writer commits; without this, concurrent writers met SQLite's busy handler, which
sleeps up to 100 ms between retries (the benchmark's decide p99 was 0.8 s at 250 req/s).

Appends are group-committed (``app.audit.sql_writer``): the records that threads of one process
append while another batch is being written go into one transaction, so one fsync with
``synchronous=FULL`` (which would otherwise bound a process to one record per fsync).

The file and its folder are created on first start (``create=False``, for the commands that
only read or check a log: never; a missing file is ``StoreMissing``). ``synchronous=FULL`` (the default) makes
each committed record survive a power loss; ``NORMAL`` survives a process crash only.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.audit.sql_base import StoreMissing
from app.audit.sql_store import SqlDecisionStore
from app.errors import DependencyUnavailable

log = logging.getLogger(__name__)

_SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")


def _unavailable(exc: BaseException) -> DependencyUnavailable:
    return DependencyUnavailable("the decision log is unavailable", log_detail=f"sqlite: {exc}")


class SqliteDecisionStore(SqlDecisionStore):
    """The decision log in the SQLite file ``path``. Thread-safe (a connection per thread, and
    the writer's);
    build it after fork. Raises ``ValueError`` for an unknown ``synchronous`` level."""

    _schema_exists_sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'decision_schema'"

    def __init__(self, path: str | Path, *, timeout_ms: int = 5000, synchronous: str = "FULL", create: bool = True) -> None:
        super().__init__(create=create)
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"sqlite synchronous must be one of {_SYNCHRONOUS}")
        self.path = Path(path)
        self._timeout_ms = int(timeout_ms)
        self._synchronous = synchronous.upper()
        self._local = threading.local()
        self._connections: set[sqlite3.Connection] = set()
        self._lock = threading.Lock()
        self._writer_turn = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._lock_pid: int | None = None
        if not create and not self.path.is_file():
            raise StoreMissing(f"no decision log at {self.path} (check TOOLGATE_AUDIT_DSN)")
        try:
            self.ensure_schema()
        except DependencyUnavailable as exc:
            log.warning("decision log not ready at start", extra={"event": "decision_log_unready", "detail": exc.log_detail})
        except StoreMissing:
            self.close()
            raise

    def _describe(self) -> str:
        return str(self.path)

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection for reads."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
        return conn

    def _open(self) -> sqlite3.Connection:
        if self._create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            target: str | Path = self.path
        else:  # never create the file, even if it vanished since the check at start
            target = f"{self.path.absolute().as_uri()}?mode=rw"
        conn = sqlite3.connect(
            target, timeout=self._timeout_ms / 1000, isolation_level=None, check_same_thread=False, uri=not self._create
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._timeout_ms}")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
        with self._lock:
            self._connections.add(conn)
        return conn

    def _discard(self, conn: sqlite3.Connection) -> None:
        """Drop a connection after a failure so that the next call opens a fresh one."""
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        if self._writer is conn:
            self._writer = None
        with self._lock:
            self._connections.discard(conn)
        try:
            conn.close()
        except sqlite3.Error:
            log.debug("closing a failed sqlite connection failed", exc_info=True)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        with self._writer_turn:
            lock_fd = self._lock_file()
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                with self._transaction() as cur:
                    yield cur
            finally:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)

    def _lock_file(self) -> int:
        """This process's descriptor of ``<path>.lock`` (reopened after fork: a ``flock`` is
        shared by the descriptors a fork copies). Raises ``DependencyUnavailable``."""
        if self._lock_fd is None or self._lock_pid != os.getpid():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._lock_fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise _unavailable(exc) from exc
            self._lock_pid = os.getpid()
        return self._lock_fd

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """A write transaction on the writer's connection (under ``_writer_turn``): one
        connection writes every batch of this process, so its page cache stays warm from one
        batch to the next (SQLite drops a connection's cache whenever another one wrote)."""
        try:
            if self._writer is None:
                self._writer = self._open()
        except (sqlite3.Error, OSError) as exc:
            raise _unavailable(exc) from exc
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._discard(conn)  # e.g. opened read-only while the file was: never keep that one
            raise _unavailable(exc) from exc
        try:
            yield conn.cursor()
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            self._discard(conn)
            raise _unavailable(exc) from exc
        except BaseException:
            self._rollback(conn)
            raise

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.debug("sqlite rollback failed", exc_info=True)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Cursor]:
        conn = None
        try:
            conn = self._connection()
            yield conn.cursor()
        except (sqlite3.Error, OSError) as exc:
            if conn is not None:
                self._discard(conn)
            raise _unavailable(exc) from exc

    def close(self) -> None:
        """Close every connection this store opened (any thread)."""
        with self._lock:
            connections, self._connections = self._connections, set()
        for conn in connections:
            conn.close()
        self._local = threading.local()
        with self._writer_turn:
            self._writer = None
            if self._lock_fd is not None and self._lock_pid == os.getpid():
                os.close(self._lock_fd)
            self._lock_fd = None
