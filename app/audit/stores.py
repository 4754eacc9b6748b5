"""Opening the decision log: ``open_decision_log(dsn)`` returns one store implementing both
interfaces, SQLite for a file path, PostgreSQL for a ``postgresql://`` URL (same SQL, same
tests)."""

from __future__ import annotations

import hashlib
import hmac

from app.audit.interfaces import DecisionStore
from app.settings import AuditSettings


def open_decision_log(
    dsn: str,
    *,
    timeout_ms: int = 5000,
    pool_max_size: int = 8,
    sqlite_synchronous: str = "FULL",
    create: bool = True,
) -> DecisionStore:
    """Open the store named by ``dsn``: a ``postgresql://`` (or ``postgres://``) URL, else a
    SQLite file path (created on first use, WAL mode). ``timeout_ms`` bounds lock waits,
    connects and statements. The schema is created or migrated now when the store answers,
    else on first use. ``create=False`` (commands that read or check an existing log) never
    creates one: a missing SQLite file, or a store without the schema, raises ``StoreMissing``
    (at once when the store answers, else on first use). Raises ``ValueError`` for an empty
    dsn."""
    if not dsn:
        raise ValueError("audit dsn is empty")
    if dsn.startswith(("postgresql://", "postgres://")):
        from app.audit.dialects.postgres import PostgresDecisionStore

        return PostgresDecisionStore(dsn, timeout_ms=timeout_ms, pool_max_size=pool_max_size, create=create)
    from app.audit.dialects.sqlite import SqliteDecisionStore

    return SqliteDecisionStore(dsn, timeout_ms=timeout_ms, synchronous=sqlite_synchronous, create=create)


def checkpoint_key(settings: AuditSettings) -> bytes:
    """The key that signs purge checkpoints: ``audit_checkpoint_secret`` when set, else
    HMAC-SHA256(audit_key_hash_secret, "toolgate audit checkpoint") (a separate derived key)."""
    if settings.audit_checkpoint_secret is not None:
        return settings.audit_checkpoint_secret.get_secret_value().encode()
    base = settings.audit_key_hash_secret.get_secret_value().encode()
    return hmac.new(base, b"toolgate audit checkpoint", hashlib.sha256).digest()


def open_from_settings(settings: AuditSettings, *, create: bool = True) -> DecisionStore:
    """``open_decision_log`` with the ``audit_*`` settings (the gateway and the CLI use this)."""
    return open_decision_log(
        settings.audit_dsn,
        timeout_ms=settings.audit_timeout_ms,
        pool_max_size=settings.audit_pool_max_size,
        sqlite_synchronous=settings.audit_sqlite_synchronous,
        create=create,
    )
