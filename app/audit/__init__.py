"""The decision log (DESIGN §6): one append-only, hash-chained record for every decide call,
approval answer, execution report and idempotency resolution.

Two interfaces, as in Cerbos' audit log: ``DecisionLog`` writes (``append``, and ``purge``
behind a signed checkpoint); ``DecisionLogReader`` reads (``get``, ``query``,
``iter_records``, ``subject_history`` and the chain walk used by ``verify``).
``open_decision_log(dsn)`` returns one store implementing both: SQLite for a file path,
PostgreSQL for a ``postgresql://`` URL (same SQL, same tests).

Records
-------
``AuditEvent`` is what a caller appends; ``AuditRecord`` is what is stored and read back: the
event plus the chain fields ``seq`` (1, 2, ... per tenant), ``prev_hash`` (the previous record's
``hash``, or ``GENESIS_HASH``) and ``hash`` = SHA-256 (hex) of the RFC 8785 canonical JSON of
the record without ``hash`` (see ``app.audit.chain``).

Errors
------
Every store method raises ``app.errors.DependencyUnavailable`` (503, retryable) when the store
cannot be reached, is read-only, locked past its timeout or fails; the sqlite3 and psycopg
exception types never escape the adapters. ``decode_cursor`` raises ``ValidationFailed`` (400).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterator, Literal

import rfc8785
from ulid import ULID

from app.errors import ValidationFailed
from app.settings import Settings

# "decide_dry_run": a decide call with ``dry_run: true`` (evaluated, nothing reserved or created).
EventType = Literal[
    "decide", "decide_dry_run", "approval_answer", "execution_complete", "execution_fail", "idempotency_resolve"
]
EVENT_TYPES: tuple[str, ...] = (
    "decide", "decide_dry_run", "approval_answer", "execution_complete", "execution_fail", "idempotency_resolve"
)
DECISIONS: tuple[str, ...] = ("allow", "deny", "user-approval")
#: ``prev_hash`` of the first record of every tenant chain.
GENESIS_HASH = "0" * 64
#: Largest page of ``DecisionLogReader.query``.
MAX_PAGE = 1000

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def new_decision_id() -> str:
    """A fresh ULID (26 characters, Crockford base32, sorts by creation time)."""
    return str(ULID())


def utc_now() -> dt.datetime:
    """The current time, UTC, microsecond resolution."""
    return dt.datetime.now(dt.timezone.utc)


def format_time(value: dt.datetime) -> str:
    """RFC 3339 UTC with microseconds: ``2025-01-31T12:00:00.123456Z``."""
    return value.astimezone(dt.timezone.utc).strftime(_TIME_FORMAT)


def parse_time(text: str) -> dt.datetime:
    """Inverse of ``format_time``. Raises ``ValueError`` for any other form."""
    return dt.datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=dt.timezone.utc)


def to_epoch_us(value: dt.datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime."""
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def hash_idempotency_key(secret: str | bytes, key: str) -> str:
    """The stored form of an idempotency key: HMAC-SHA256(secret, key), lower-case hex.

    The raw key is never stored; an auditor who knows a key can search for its hash.
    """
    secret_bytes = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(secret_bytes, key.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def is_storable(value: Any) -> bool:
    """True when ``value`` can go into a record: RFC 8785 canonical JSON accepts it (integers
    within +-(2**53 - 1), strings without lone surrogates)."""
    try:
        rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeError):
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class AuditEvent:
    """One event to append. Only ``event``, ``tenant`` and ``request_id`` are required.

    Fields: ``decision_id`` (ULID, default new), ``time`` (aware datetime, default now),
    ``trace_id`` (W3C trace id), ``subject_id``, ``roles``, ``conversation_id``
    (``context.conversation_id`` when a short string), ``tool``, ``version``, ``decision``
    (allow|deny|user-approval or None), ``ai_sdk_status``, ``reasons``, ``policy_revision``,
    ``engine`` (embedded|opa), ``engine_decision_id`` (OPA's decision_id), ``input_fingerprint``
    (``app.fingerprint``), ``input`` (sensitive paths already redacted), ``redacted_paths``
    (JSON Pointers), ``idempotency_key_hash`` (``hash_idempotency_key``), ``replayed``,
    ``approval_id``, ``approver_id``, ``error_code`` (DESIGN §7 code or None),
    ``durations_ms`` (phase -> ms). Raises ``ValueError`` for an unknown event or decision.
    """

    decision_id: str = field(default_factory=new_decision_id)
    event: EventType
    time: dt.datetime = field(default_factory=utc_now)
    request_id: str
    trace_id: str | None = None
    tenant: str
    subject_id: str | None = None
    roles: tuple[str, ...] = ()
    conversation_id: str | None = None
    tool: str | None = None
    version: str | None = None
    decision: str | None = None
    ai_sdk_status: str | None = None
    reasons: tuple[str, ...] = ()
    policy_revision: str | None = None
    engine: str | None = None
    engine_decision_id: str | None = None
    input_fingerprint: str | None = None
    input: dict[str, Any] | None = None
    redacted_paths: tuple[str, ...] = ()
    idempotency_key_hash: str | None = None
    replayed: bool = False
    approval_id: str | None = None
    approver_id: str | None = None
    error_code: str | None = None
    durations_ms: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.event not in EVENT_TYPES:
            raise ValueError(f"unknown event type {self.event!r}")
        if self.decision is not None and self.decision not in DECISIONS:
            raise ValueError(f"unknown decision {self.decision!r}")
        if not self.tenant:
            raise ValueError("tenant is required")
        if self.time.tzinfo is None:
            raise ValueError("time must be timezone-aware")
        object.__setattr__(self, "roles", tuple(self.roles))
        object.__setattr__(self, "reasons", tuple(self.reasons))
        object.__setattr__(self, "redacted_paths", tuple(self.redacted_paths))

    def to_doc(self) -> dict[str, Any]:
        """The JSON document of the event (``time`` as RFC 3339 with microseconds)."""
        doc = {f.name: getattr(self, f.name) for f in fields(AuditEvent)}
        doc["time"] = format_time(self.time)
        doc["roles"] = list(self.roles)
        doc["reasons"] = list(self.reasons)
        doc["redacted_paths"] = list(self.redacted_paths)
        doc["durations_ms"] = dict(self.durations_ms)
        return doc


#: The record fields that are also stored as indexed columns (for queries), in column order.
INDEXED_FIELDS: tuple[str, ...] = (
    "decision_id", "tenant", "seq", "time_us", "event", "request_id", "subject_id",
    "conversation_id", "tool", "decision", "error_code", "approval_id", "idempotency_key_hash",
    "replayed",
)


@dataclass(frozen=True, kw_only=True)
class AuditRecord(AuditEvent):
    """A stored event with its chain fields ``seq``, ``prev_hash`` and ``hash`` (hex)."""

    seq: int
    prev_hash: str
    hash: str

    def content(self) -> dict[str, Any]:
        """What ``hash`` covers: the event document plus ``seq`` and ``prev_hash``."""
        return {**self.to_doc(), "seq": self.seq, "prev_hash": self.prev_hash}

    def to_dict(self) -> dict[str, Any]:
        """The record as served by the API and exports: ``content()`` plus ``hash``."""
        return {**self.content(), "hash": self.hash}

    def index_columns(self) -> dict[str, Any]:
        """The indexed column values derived from this record (``INDEXED_FIELDS``)."""
        values = {name: getattr(self, name) for name in INDEXED_FIELDS if name not in ("time_us", "replayed")}
        values["time_us"] = to_epoch_us(self.time)
        values["replayed"] = int(self.replayed)
        return {name: values[name] for name in INDEXED_FIELDS}

    @classmethod
    def from_content(cls, content: dict[str, Any], hash_hex: str) -> AuditRecord:
        """Rebuild a record from its stored content. Raises ``ValueError``/``TypeError``/
        ``KeyError`` when the content is not a record document."""
        names = {f.name for f in fields(cls)} - {"hash"}
        unknown = set(content) - names
        if unknown:
            raise ValueError(f"unknown record fields {sorted(unknown)}")
        values = dict(content)
        values["time"] = parse_time(content["time"])
        return cls(**values, hash=hash_hex)


@dataclass(frozen=True, kw_only=True)
class DecisionQuery:
    """Filters of ``DecisionLogReader.query``/``iter_records``; None means "any".

    ``tenant`` None means every tenant (platform auditors only). ``since`` is inclusive and
    ``until`` exclusive, on the record time. All other filters are exact matches.
    """

    tenant: str | None = None
    subject_id: str | None = None
    tool: str | None = None
    decision: str | None = None
    event: str | None = None
    error_code: str | None = None
    request_id: str | None = None
    approval_id: str | None = None
    idempotency_key_hash: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def equality_filters(self) -> dict[str, str]:
        """The exact-match filters that are set, keyed by column name."""
        values = asdict(self)
        return {k: v for k, v in values.items() if k not in ("since", "until") and v is not None}


@dataclass(frozen=True)
class DecisionPage:
    """One page of a query: ``records`` newest first; ``next_cursor`` None on the last page."""

    records: list[AuditRecord]
    next_cursor: str | None


@dataclass(frozen=True)
class SubjectHistory:
    """Trusted history of one subject for the policy's ``input.history`` (DESIGN §3).

    ``allowed_calls``: allowed, non-replayed decide records in the window (at most
    ``max_rows`` are looked at; ``truncated`` is True when the bound was hit); ``tools``:
    the same counted per tool name.
    """

    window_s: int
    conversation_id: str | None
    allowed_calls: int
    tools: dict[str, int]
    truncated: bool

    def as_input(self) -> dict[str, Any]:
        """The JSON form handed to the policy."""
        return asdict(self)


@dataclass(frozen=True)
class ChainHead:
    """The last record of a tenant chain, kept in its own row (locked by writers)."""

    tenant: str
    seq: int
    hash: str
    decision_id: str | None


@dataclass(frozen=True)
class Checkpoint:
    """Written by ``purge``: the last purged record of a tenant chain, HMAC-signed.

    ``signature`` = HMAC-SHA256(audit_checkpoint_secret, canonical JSON of the other fields).
    """

    tenant: str
    seq: int
    hash: str
    decision_id: str
    purged_before: dt.datetime
    created: dt.datetime
    signature: str = ""


@dataclass(frozen=True)
class ChainEntry:
    """One stored row as found, for verification: its indexed columns (``INDEXED_FIELDS``),
    its content document (None when the stored text is not a JSON object) and its hash."""

    columns: dict[str, Any]
    content: dict[str, Any] | None
    hash: str


#: Every valid cursor matches this (published in the OpenAPI document).
CURSOR_PATTERN = r"^d1-[0-9A-HJKMNP-TV-Z]{26}$"
_CURSOR = re.compile(CURSOR_PATTERN)


def encode_cursor(decision_id: str) -> str:
    """The pagination cursor after ``decision_id`` (opaque to callers: ``d1-`` + the id)."""
    return f"d1-{decision_id}"


def decode_cursor(cursor: str) -> str:
    """The decision id inside a cursor. Raises ``ValidationFailed`` (400) for a bad cursor."""
    if not _CURSOR.match(cursor):
        raise ValidationFailed("cursor is not valid", http_status=400)
    return cursor[3:]


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
    def subject_history(
        self,
        tenant: str,
        subject_id: str,
        *,
        conversation_id: str | None = None,
        window_s: int = 86_400,
        max_rows: int = 1000,
    ) -> SubjectHistory:
        """Allowed, non-replayed decide calls of ``subject_id`` in the last ``window_s``
        seconds (only in ``conversation_id`` when given), counted per tool. Looks at no
        more than ``max_rows`` newest records (one indexed range scan)."""

    @abstractmethod
    def tenants(self) -> list[str]:
        """Every tenant with a chain head or a record, sorted."""

    @abstractmethod
    def chain_head(self, tenant: str) -> ChainHead | None:
        """The tenant's chain head row, or None."""

    @abstractmethod
    def checkpoint(self, tenant: str) -> Checkpoint | None:
        """The tenant's latest purge checkpoint, or None."""

    @abstractmethod
    def iter_chain(self, tenant: str, *, batch_size: int = 1000) -> Iterator[ChainEntry]:
        """Every stored row of ``tenant`` in ``seq`` order, as found (for ``verify``)."""


class DecisionStore(DecisionLog, DecisionLogReader, ABC):
    """A backend implementing both interfaces (what ``open_decision_log`` returns)."""


def open_decision_log(
    dsn: str,
    *,
    timeout_ms: int = 5000,
    pool_max_size: int = 8,
    sqlite_synchronous: str = "FULL",
) -> DecisionStore:
    """Open the store named by ``dsn``: a ``postgresql://`` (or ``postgres://``) URL, else a
    SQLite file path (created on first use, WAL mode). ``timeout_ms`` bounds lock waits,
    connects and statements. The schema is created or migrated now when the store answers,
    else on first use. Raises ``ValueError`` for an empty dsn."""
    if not dsn:
        raise ValueError("audit dsn is empty")
    if dsn.startswith(("postgresql://", "postgres://")):
        from app.audit.postgres import PostgresDecisionStore

        return PostgresDecisionStore(dsn, timeout_ms=timeout_ms, pool_max_size=pool_max_size)
    from app.audit.sqlite import SqliteDecisionStore

    return SqliteDecisionStore(dsn, timeout_ms=timeout_ms, synchronous=sqlite_synchronous)


def checkpoint_key(settings: Settings) -> bytes:
    """The key that signs purge checkpoints: ``audit_checkpoint_secret`` when set, else
    HMAC-SHA256(audit_key_hash_secret, "toolgate audit checkpoint") (a separate derived key)."""
    if settings.audit_checkpoint_secret is not None:
        return settings.audit_checkpoint_secret.get_secret_value().encode()
    base = settings.audit_key_hash_secret.get_secret_value().encode()
    return hmac.new(base, b"toolgate audit checkpoint", hashlib.sha256).digest()


def open_from_settings(settings: Settings) -> DecisionStore:
    """``open_decision_log`` with the ``audit_*`` settings (the gateway and the CLI use this)."""
    return open_decision_log(
        settings.audit_dsn,
        timeout_ms=settings.audit_timeout_ms,
        pool_max_size=settings.audit_pool_max_size,
        sqlite_synchronous=settings.audit_sqlite_synchronous,
    )
