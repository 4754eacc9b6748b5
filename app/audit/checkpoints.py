"""Signed checkpoints of the decision log (docs/design.md §11): statements, signed with a key the
database does not hold, that name records of the tenant chains, kept outside the database
(``app.audit.sinks``). ``verify`` checks the chains against them (``app.audit.chain``), which
catches what the hash chain alone cannot: a truncated tail with its head row rewound, a
deleted tenant, a chain re-hashed by someone with write access to the database.

One statement is one line of RFC 8785 JSON::

    {"v": 1, "type": "register" | "checkpoint", "log": <log id of the decision log>,
     "writer": "<host>:<pid>", "signed_at": RFC 3339 UTC (microseconds),
     "heads": [{"tenant", "seq", "hash", "decision_id"}, ...],
     "kid": <checkpoint key id>, "sig": base64url Ed25519 signature}

``sig`` signs the RFC 8785 canonical JSON of every other member. Each head says "record
``seq`` of ``tenant`` had hash ``hash``"; as every hash covers the previous one, it vouches
for the whole chain up to ``seq``.

- ``register`` statements are the signed **tenant registry**: one is written, before the call
  returns, when a chain gets its first record (and by ``toolgate audit checkpoint write`` for
  a chain it finds unregistered). A registered tenant missing from the database was deleted;
  a tenant in the database without any statement was not written by a gateway.
- ``checkpoint`` statements are written by each gateway worker every
  ``TOOLGATE_CHECKPOINT_INTERVAL_S`` (and at exit) with the newest record it appended to each
  chain since its previous one, and on demand by ``toolgate audit checkpoint write`` with
  every chain head. The decide path only notes the record it appended (a dictionary update);
  signing and the ``fsync`` happen on a background thread.

Ed25519 rather than HMAC: whoever checks the log needs only the public key, which cannot sign.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app import metrics
from app.audit.interfaces import DecisionLog, DecisionStore
from app.audit.records import AuditEvent, AuditRecord, ChainHead, Checkpoint, SignedHead
from app.audit.sinks import CheckpointSink, CheckpointSinkError, FileSink, RedisStreamSink, SinkLine, read_file
from app.audit.sql_base import StoreMissing
from app.errors import DependencyUnavailable
from app.fingerprint import canonical_json
from app.receipts.keys import KeyFileError, KeyRing, PublicKeys, b64url, b64url_decode, development_key, key_id
from app.redis_client import RedisConnection
from app.settings import DEV_CHECKPOINT_KEY_LABEL, CheckpointSettings, SettingsError
from app.timefmt import format_us, parse_us, utc_now

log = logging.getLogger(__name__)

StatementType = Literal["register", "checkpoint"]


class _Head(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    tenant: str = Field(min_length=1)
    seq: int = Field(ge=1)
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    decision_id: str | None


class _Statement(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    v: Literal[1]
    type: StatementType
    log: str = Field(min_length=1, max_length=64)
    writer: str = Field(max_length=512)
    signed_at: str
    heads: list[_Head] = Field(min_length=1)
    kid: str = Field(min_length=1, max_length=128)
    sig: str = Field(min_length=1, max_length=128)


def sign_statement(ring: KeyRing, *, kind: StatementType, log_id: str, writer: str, heads: Sequence[ChainHead]) -> str:
    """The signed statement line (RFC 8785 JSON, no newline) naming ``heads`` of the log
    ``log_id``. Raises ``ValueError`` for no heads."""
    if not heads:
        raise ValueError("a checkpoint statement names at least one record")
    body: dict[str, Any] = {
        "v": 1,
        "type": kind,
        "log": log_id,
        "writer": writer,
        "signed_at": format_us(utc_now()),
        "heads": [{"tenant": h.tenant, "seq": h.seq, "hash": h.hash, "decision_id": h.decision_id} for h in heads],
        "kid": ring.kid,
    }
    _, signature = ring.sign(canonical_json(body))
    return canonical_json({**body, "sig": b64url(signature)}).decode("utf-8")


class CheckpointLogInvalid(Exception):
    """A statement of a checkpoint sink cannot be trusted: not a statement, signed by a key
    not in the key set, or its signature does not verify. The message names its source."""


@dataclass
class SignedCheckpoints:
    """What the checkpoint sinks say about one decision log (``log_id``): its signed heads by
    tenant (in the order read), how many statements and when the newest was signed, the
    statements of other logs (log id -> count), and notes (ignored incomplete lines)."""

    log_id: str
    heads: dict[str, list[SignedHead]] = field(default_factory=lambda: defaultdict(list))
    statements: int = 0
    newest: dt.datetime | None = None
    other_logs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    notes: list[str] = field(default_factory=list)

    @property
    def registered(self) -> set[str]:
        """The tenants these statements name: the signed tenant registry of the log."""
        return set(self.heads)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    if len(names) != len(set(names)):
        raise ValueError("duplicate member")
    return dict(pairs)


def read_checkpoints(lines: Iterable[SinkLine], keys: PublicKeys, log_id: str) -> SignedCheckpoints:
    """Check every statement of ``lines`` with ``keys`` and keep the heads of ``log_id``.

    Raises ``CheckpointLogInvalid`` at the first statement that is not valid JSON of the
    statement shape, names a key not in ``keys`` or whose signature does not verify. An
    incomplete last line of a file (a crash during a write) is noted and skipped. A statement
    read twice (from a file and a stream) counts once.
    """
    found = SignedCheckpoints(log_id)
    seen: set[str] = set()
    for line in lines:
        try:
            document = json.loads(line.text, object_pairs_hook=_unique_members)
        except ValueError:
            if not line.complete:
                found.notes.append(f"{line.source}: an incomplete last line (a write cut short) was skipped")
                continue
            raise CheckpointLogInvalid(f"{line.source}: not a JSON statement") from None
        try:
            statement = _Statement.model_validate(document)
            signed_at = parse_us(statement.signed_at)
            signature = b64url_decode(statement.sig)
        except (ValidationError, ValueError):
            raise CheckpointLogInvalid(f"{line.source}: not a checkpoint statement") from None
        key = keys.get(statement.kid)
        if key is None:
            raise CheckpointLogInvalid(f"{line.source}: signed by key {statement.kid}, which is not in the key set")
        unsigned = {name: value for name, value in document.items() if name != "sig"}
        if not key.verifies(signature, canonical_json(unsigned)):
            raise CheckpointLogInvalid(f"{line.source}: the signature is not valid (the statement was changed or forged)")
        if statement.sig in seen:
            continue
        seen.add(statement.sig)
        if statement.log != log_id:
            found.other_logs[statement.log] += 1
            continue
        found.statements += 1
        found.newest = signed_at if found.newest is None else max(found.newest, signed_at)
        for head in statement.heads:
            found.heads[head.tenant].append(
                SignedHead(head.tenant, head.seq, head.hash, head.decision_id, signed_at, statement.type, key.kid, line.source)
            )
    return found


def writer_name() -> str:
    """``<host>:<pid>`` of this process: which worker or command wrote a statement."""
    return f"{socket.gethostname()}:{os.getpid()}"


class CheckpointWriter:
    """Signs statements with ``ring`` and appends them to every sink of ``sinks``."""

    def __init__(self, ring: KeyRing, sinks: Sequence[CheckpointSink]) -> None:
        if not sinks:
            raise ValueError("checkpoints need at least one sink")
        self._ring = ring
        self.sinks = tuple(sinks)

    def write(self, kind: StatementType, log_id: str, heads: Sequence[ChainHead]) -> str:
        """Sign a ``kind`` statement naming ``heads`` and append it to every sink; returns the
        line. Raises ``CheckpointSinkError`` naming the sinks that failed (after trying each:
        a statement that reached some sinks is written again to all of them on retry, which
        verification reads as one)."""
        line = sign_statement(self._ring, kind=kind, log_id=log_id, writer=writer_name(), heads=heads)
        problems = []
        for sink in self.sinks:
            try:
                sink.append(line)
            except CheckpointSinkError as exc:
                problems.append(str(exc))
        metrics.AUDIT_CHECKPOINTS.labels(kind, "error" if problems else "ok").inc()
        if problems:
            raise CheckpointSinkError("; ".join(problems))
        return line


class CheckpointingLog(DecisionLog):
    """The gateway's decision log writer: ``store`` plus signed checkpoints of what it appends.

    ``append`` notes the record it appended (the newest per tenant) and, for the first record
    of a chain, writes its ``register`` statement before returning. The process's checkpoint
    clock (one daemon thread per process, started on first use after a fork) calls ``flush``
    every ``interval_s`` and at exit, which signs one ``checkpoint`` statement with the noted
    records. A statement that cannot be written is logged, counted
    (``toolgate_audit_checkpoints_total{outcome="error"}``) and tried again at the next flush;
    the decide call that appended the record is not failed for it (the record is committed).
    """

    def __init__(self, store: DecisionStore, writer: CheckpointWriter, *, interval_s: float) -> None:
        self.store = store
        self.writer = writer
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._noted: dict[str, ChainHead] = {}
        self._unregistered: dict[str, ChainHead] = {}
        self._last_flush = time.monotonic()
        _CLOCK.watch(self)

    def append(self, event: AuditEvent) -> AuditRecord:
        """``store.append(event)``, then note the record (see the class docstring)."""
        record = self.store.append(event)
        head = ChainHead(record.tenant, record.seq, record.hash, record.decision_id)
        with self._lock:
            _keep_newest(self._noted, head)
        if record.seq == 1:
            self._write("register", [head], self._unregistered)
        return record

    def _write(self, kind: StatementType, heads: list[ChainHead], retry: dict[str, ChainHead]) -> bool:
        """Write one statement; on failure, put ``heads`` in ``retry`` for the next flush."""
        try:
            self.writer.write(kind, self.store.log_id(), heads)
        except (CheckpointSinkError, DependencyUnavailable, StoreMissing) as exc:
            detail = getattr(exc, "log_detail", None) or str(exc)
            log.error("signed checkpoint not written", extra={"event": "audit_checkpoint_failed", "kind": kind, "detail": detail})
            with self._lock:
                for head in heads:
                    _keep_newest(retry, head)
            return False
        return True

    def flush(self) -> None:
        """Write the pending registrations and one checkpoint of the noted records (nothing
        when none is pending). One flush at a time."""
        with self._flushing:
            self._last_flush = time.monotonic()
            with self._lock:
                unregistered, self._unregistered = self._unregistered, {}
                noted, self._noted = self._noted, {}
            if unregistered:
                self._write("register", sorted(unregistered.values(), key=_tenant), self._unregistered)
            if noted:
                self._write("checkpoint", sorted(noted.values(), key=_tenant), self._noted)

    def due(self, now: float) -> bool:
        """True when ``interval_s`` has passed since the last flush."""
        return now - self._last_flush >= self.interval_s

    def purge(self, before: dt.datetime, *, checkpoint_secret: bytes, batch_size: int = 5000) -> list[Checkpoint]:
        return self.store.purge(before, checkpoint_secret=checkpoint_secret, batch_size=batch_size)

    def probe(self) -> None:
        self.store.probe()

    def close(self) -> None:
        """Flush, stop watching, close the store."""
        self.flush()
        _CLOCK.forget(self)
        self.store.close()


def _tenant(head: ChainHead) -> str:
    return head.tenant


def _keep_newest(heads: dict[str, ChainHead], head: ChainHead) -> None:
    known = heads.get(head.tenant)
    if known is None or known.seq < head.seq:
        heads[head.tenant] = head


class _CheckpointClock:
    """One daemon thread per process that flushes every live ``CheckpointingLog`` when it is
    due (checked each second), and all of them at exit. Logs are held weakly: a log that is
    no longer used stops being flushed when it is collected."""

    _TICK_S = 1.0

    def __init__(self) -> None:
        self._logs: weakref.WeakSet[CheckpointingLog] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._pid: int | None = None

    def watch(self, checkpointing: CheckpointingLog) -> None:
        with self._lock:
            self._logs.add(checkpointing)
            if self._pid != os.getpid():  # first use in this process (a fork copies no thread)
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="toolgate-checkpoints", daemon=True).start()
                atexit.register(self.flush_all)

    def forget(self, checkpointing: CheckpointingLog) -> None:
        with self._lock:
            self._logs.discard(checkpointing)

    def _live(self) -> list[CheckpointingLog]:
        with self._lock:
            return list(self._logs)

    def _run(self) -> None:
        while True:
            time.sleep(self._TICK_S)
            now = time.monotonic()
            for checkpointing in self._live():
                if checkpointing.due(now):
                    try:
                        checkpointing.flush()
                    except Exception:  # the clock thread's top level: log it and keep ticking
                        log.exception("checkpoint flush failed", extra={"event": "audit_checkpoint_failed"})

    def flush_all(self) -> None:
        for checkpointing in self._live():
            checkpointing.flush()


_CLOCK = _CheckpointClock()


def checkpoint_ring(settings: CheckpointSettings) -> KeyRing | None:
    """The ring that signs and verifies checkpoints: the configured key files; else, in
    development, the built-in development key; else (production) None: no checkpoints.
    Raises ``SettingsError`` for an unusable key file and for the development key in
    production."""
    if not settings.checkpoint_key_files:
        return KeyRing.from_private_key(development_key(DEV_CHECKPOINT_KEY_LABEL)) if settings.env == "development" else None
    try:
        ring = KeyRing.load(settings.checkpoint_key_files)
    except KeyFileError as exc:
        raise SettingsError(f"TOOLGATE_CHECKPOINT_KEY_FILES: {exc}") from None
    if settings.env == "production" and ring.public.get(development_checkpoint_kid()) is not None:
        raise SettingsError("the development checkpoint key is refused when TOOLGATE_ENV=production")
    return ring


def development_checkpoint_kid() -> str:
    """The key id of the built-in development checkpoint key."""
    return key_id(development_key(DEV_CHECKPOINT_KEY_LABEL).public_key())


def checkpoint_sinks(settings: CheckpointSettings, redis: RedisConnection | None) -> list[CheckpointSink]:
    """The checkpoint file, and the Redis stream when one is configured (and ``redis`` given)."""
    sinks: list[CheckpointSink] = [FileSink(settings.checkpoint_path)]
    if settings.checkpoint_redis_stream and redis is not None:
        sinks.append(RedisStreamSink(redis, settings.checkpoint_redis_stream))
    return sinks


def configured_checkpoints(settings: CheckpointSettings, log_id: str, redis: RedisConnection | None) -> SignedCheckpoints | None:
    """The signed checkpoints of decision log ``log_id`` in the configured sinks (the checkpoint
    file, and the Redis stream when one is set and ``redis`` is given), checked with the
    configured ring; None without a ring (no checkpoints to check against). Raises
    ``CheckpointLogInvalid`` for a statement that does not verify, ``DependencyUnavailable``
    when the stream cannot be read."""
    ring = checkpoint_ring(settings)
    if ring is None:
        return None
    lines: list[SinkLine] = []
    path = settings.checkpoint_path
    if path.is_file():
        lines.extend(read_file(path))
    if settings.checkpoint_redis_stream and redis is not None:
        lines.extend(RedisStreamSink(redis, settings.checkpoint_redis_stream).read())
    return read_checkpoints(lines, ring.public, log_id)
