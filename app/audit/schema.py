"""The decision log's SQL schema, valid in SQLite and PostgreSQL alike: the migrations that
reach ``SCHEMA_VERSION`` and the statements the writer and the reader share. Statements use
``?`` placeholders (a dialect rewrites them).

Tables: ``decision_records`` (one row per record: the indexed columns of ``INDEXED_FIELDS``,
the canonical content ``doc`` and its ``hash``), ``decision_chain_heads`` (the last record of
each tenant chain, locked by writers), ``decision_checkpoints`` (what ``purge`` removed, signed),
``decision_schema`` (applied versions), ``decision_log_identity`` (since version 2: the log's
random id, ``log_id``, which its signed checkpoints name; written once by the migration).
Version 3 adds the ``shadow_outcome`` column (agrees, disagrees, error, or NULL: no shadow)
with its index, and ``policy_revisions``: the revision archive, one row per policy revision a
gateway activated (the bundle tarball, base64), outside the hash chains (``app.audit.revisions``).
Version 4 keeps the indexes the readers use (``tests/unit/test_audit_indexes.py`` checks every
query's plan): the two over (subject, conversation, time) of the policy history the session
replaced are dropped, and the indexes of columns that most records leave NULL (error code,
approval id, idempotency key, shadow outcome) hold only the records that have a value, so a
commit writes fewer index pages (an equality filter on such a column implies it is not NULL,
which lets SQLite and PostgreSQL use the partial index); the lookups by request id, approval
id and key also order a tenant's matches.
"""

from __future__ import annotations

from app.audit.records import INDEXED_FIELDS

SCHEMA_VERSION = 4

#: (name, columns, the column most records leave NULL, or None) of the indexes version 4 builds
#: again: those of a column most records leave NULL hold only the records with a value there;
#: those of the lookups by request, approval and key also serve a tenant's page of them in
#: order (before, SQLite walked the tenant's whole index for one request id).
_REBUILT_INDEXES = (
    ("decision_records_error", "tenant, error_code, decision_id", "error_code"),
    ("decision_records_approval", "approval_id, tenant, decision_id", "approval_id"),
    ("decision_records_key", "idempotency_key_hash, tenant, decision_id", "idempotency_key_hash"),
    ("decision_records_shadow", "tenant, shadow_outcome, decision_id", "shadow_outcome"),
    ("decision_records_request", "request_id, tenant, decision_id", None),
)

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
    (2, ("CREATE TABLE IF NOT EXISTS decision_log_identity (log_id TEXT NOT NULL)",)),
    (
        3,
        (
            "ALTER TABLE decision_records ADD COLUMN shadow_outcome TEXT",
            "CREATE INDEX IF NOT EXISTS decision_records_shadow ON decision_records (tenant, shadow_outcome, decision_id)",
            """CREATE TABLE IF NOT EXISTS policy_revisions (
                revision TEXT PRIMARY KEY,
                archived_us BIGINT NOT NULL,
                source TEXT NOT NULL,
                bundle TEXT NOT NULL
            )""",
        ),
    ),
    (
        4,
        (
            "DROP INDEX IF EXISTS decision_records_subject_time",
            "DROP INDEX IF EXISTS decision_records_conversation",
            *(
                statement
                for name, columns, column in _REBUILT_INDEXES
                for statement in (
                    f"DROP INDEX IF EXISTS {name}",
                    f"CREATE INDEX IF NOT EXISTS {name} ON decision_records ({columns})"
                    + (f" WHERE {column} IS NOT NULL" if column else ""),
                )
            ),
        ),
    ),
)

#: The schema version whose migration gives the log its id (``SqlBase.ensure_schema``).
LOG_ID_VERSION = 2

COLUMNS = ", ".join(INDEXED_FIELDS)
#: Most rows one ``insert_records`` statement carries (SQLite allows 32,766 parameters).
INSERT_MAX_ROWS = 500


def insert_records(count: int) -> str:
    """One ``INSERT`` of ``count`` (1..``INSERT_MAX_ROWS``) records: a single statement, as
    ``executemany`` costs a round trip (and on PostgreSQL a pipeline) per row."""
    row = f"({', '.join('?' * (len(INDEXED_FIELDS) + 2))})"
    return f"INSERT INTO decision_records ({COLUMNS}, doc, hash) VALUES {', '.join([row] * count)}"
SELECT_RECORD = "SELECT doc, hash FROM decision_records"
SELECT_HEAD = "SELECT seq, hash, decision_id FROM decision_chain_heads WHERE tenant = ?"
UPSERT_CHECKPOINT = (
    "INSERT INTO decision_checkpoints (tenant, seq, hash, decision_id, purged_before_us, created_us, signature)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,"
    " decision_id = excluded.decision_id, purged_before_us = excluded.purged_before_us,"
    " created_us = excluded.created_us, signature = excluded.signature"
)

