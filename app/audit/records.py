"""Decision records (DESIGN §6): what is appended (``AuditEvent``) and what is stored and read
back (``AuditRecord``: the event plus the chain fields ``seq`` (1, 2, ... per tenant),
``prev_hash`` (the previous record's ``hash``, or ``GENESIS_HASH``) and ``hash`` = SHA-256 (hex)
of the RFC 8785 canonical JSON of the record without ``hash``, see ``app.audit.chain``); and the
rows that keep each tenant chain whole (``ChainHead``, ``Checkpoint``, ``ChainEntry``), and a
record as a signed checkpoint names it (``SignedHead``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass, field, fields
from typing import Any

import rfc8785
from ulid import ULID

from app.fingerprint import canonical_json
from app.timefmt import epoch_us, format_us, parse_us, utc_now
from app.vocabulary import DECISIONS, EVENT_TYPES, EventType, ShadowOutcomeWord

#: ``prev_hash`` of the first record of every tenant chain.
GENESIS_HASH = "0" * 64


def new_decision_id() -> str:
    """A fresh ULID (26 characters, Crockford base32, sorts by creation time)."""
    return str(ULID())


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
        canonical_json(value)
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
    ``durations_ms`` (phase -> ms), ``for_decision_id`` (the decide call an execution report
    reports on: the decision id of the reservation, which its receipt names).

    What a decide call's policy saw and said, so that the call can be evaluated again
    (``policy diff``, ``policy explain``; DESIGN §6): ``policy_input`` (the policy input
    document without ``call.input``, which is ``input``; None when the policy was not asked; the
    writer stores None with no ``policy_input_redacted`` when it has no RFC 8785 form),
    ``policy_input_redacted`` (JSON Pointers into the policy input whose values were replaced:
    the contract's sensitive paths under ``/call/input``, the context members not kept under
    ``/context``), ``policy_decision`` (the policy's own decision, before the approval step
    could turn it into a deny) and ``shadow`` (``{source, revision, decision, reasons,
    matched_rules, error, agrees}`` of a shadow policy, or None).
    Raises ``ValueError`` for an unknown event or decision.
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
    #: ``[{id, effect, message}]``: the rules that matched (empty when the policy named none).
    matched_rules: tuple[dict[str, str], ...] = ()
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
    for_decision_id: str | None = None
    policy_input: dict[str, Any] | None = None
    policy_input_redacted: tuple[str, ...] = ()
    policy_decision: str | None = None
    shadow: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.event not in EVENT_TYPES:
            raise ValueError(f"unknown event type {self.event!r}")
        for decision in (self.decision, self.policy_decision):
            if decision is not None and decision not in DECISIONS:
                raise ValueError(f"unknown decision {decision!r}")
        if not self.tenant:
            raise ValueError("tenant is required")
        if self.time.tzinfo is None:
            raise ValueError("time must be timezone-aware")
        object.__setattr__(self, "roles", tuple(self.roles))
        object.__setattr__(self, "reasons", tuple(self.reasons))
        object.__setattr__(self, "matched_rules", tuple(dict(rule) for rule in self.matched_rules))
        object.__setattr__(self, "redacted_paths", tuple(self.redacted_paths))
        object.__setattr__(self, "policy_input_redacted", tuple(self.policy_input_redacted))

    def to_doc(self) -> dict[str, Any]:
        """The JSON document of the event (``time`` as RFC 3339 with microseconds)."""
        doc = {f.name: getattr(self, f.name) for f in fields(AuditEvent)}
        doc["time"] = format_us(self.time)
        doc["roles"] = list(self.roles)
        doc["reasons"] = list(self.reasons)
        doc["matched_rules"] = [dict(rule) for rule in self.matched_rules]
        doc["redacted_paths"] = list(self.redacted_paths)
        doc["durations_ms"] = dict(self.durations_ms)
        doc["policy_input_redacted"] = list(self.policy_input_redacted)
        return doc

    def evaluated_input(self) -> dict[str, Any] | None:
        """The policy input this decide call was evaluated on, as recorded (``policy_input``
        with ``call.input`` put back from ``input``), or None when the record keeps none."""
        if self.policy_input is None or self.input is None:
            return None
        call = {**(self.policy_input.get("call") or {}), "input": self.input}
        return {**self.policy_input, "call": call}

    @property
    def shadow_outcome(self) -> ShadowOutcomeWord | None:
        """The indexed summary of ``shadow``: ``agrees``, ``disagrees``, ``error`` or None."""
        if self.shadow is None:
            return None
        if self.shadow.get("error") is not None:
            return "error"
        return "agrees" if self.shadow.get("agrees") else "disagrees"


#: The record fields that are also stored as indexed columns (for queries), in column order.
INDEXED_FIELDS: tuple[str, ...] = (
    "decision_id", "tenant", "seq", "time_us", "event", "request_id", "subject_id",
    "conversation_id", "tool", "decision", "error_code", "approval_id", "idempotency_key_hash",
    "replayed", "shadow_outcome",
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
        values["time_us"] = epoch_us(self.time)
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
        values["time"] = parse_us(content["time"])
        return cls(**values, hash=hash_hex)


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


@dataclass(frozen=True)
class SignedHead:
    """A record of a tenant chain as a signed checkpoint names it (``app.audit.checkpoints``):
    "record ``seq`` of ``tenant`` had hash ``hash``", signed at ``signed_at`` by the key
    ``kid``. ``kind`` is ``register`` (written with the first record of a chain) or
    ``checkpoint``; ``source`` says where it was read (file and line, or stream entry id)."""

    tenant: str
    seq: int
    hash: str
    decision_id: str | None
    signed_at: dt.datetime
    kind: str
    kid: str
    source: str
