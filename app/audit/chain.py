"""The per-tenant hash chain: sealing a record, signing purge checkpoints, verifying a chain.

    record n:  content_n = event document + {"seq": n, "prev_hash": hash_(n-1)}
               hash_n    = SHA-256( RFC 8785 canonical JSON of content_n )      (hex)
    hash_0     = GENESIS_HASH, or the signed checkpoint's hash after a purge

``verify_chains`` walks each tenant chain in ``seq`` order and stops at the first broken link:
a content that does not hash to its stored hash, an indexed column that disagrees with the
content, a missing record (seq gap, or the chain head ahead of the last record), a link to the
wrong previous hash (reordered records), or a checkpoint whose signature is wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace

import rfc8785

from app.audit.interfaces import DecisionLogReader
from app.audit.records import GENESIS_HASH, AuditEvent, AuditRecord, ChainEntry, Checkpoint
from app.timefmt import format_us

_MAX_EXACT_INT = 2**53 - 1


def _canonical_number(text: str) -> int | float:
    """An integer-looking number of the canonical text: beyond ±(2^53 - 1) it can only have
    been a double (RFC 8785 writes every number as an IEEE 754 double, §3.2.2.3, and integers
    outside that range are refused on write), so it is read back as one."""
    value = int(text)
    return value if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT else float(text)


def parse_content(text: str) -> object:
    """Parse a stored canonical record text so that canonicalizing it again gives the same
    bytes: ``1e16`` is stored as ``10000000000000000`` and must come back as a float, not an
    integer that RFC 8785 refuses. Raises ``ValueError`` for text that is not JSON."""
    return json.loads(text, parse_int=_canonical_number)


def canonical_members(event: AuditEvent) -> dict[str, bytes]:
    """The RFC 8785 canonical JSON of each member of ``event``'s document, by name: the slow
    part of sealing, done before the store's write lock. Raises ``ValueError`` when a value
    cannot be canonicalized."""
    return {name: rfc8785.dumps(value) for name, value in event.to_doc().items()}


def seal(
    event: AuditEvent, seq: int, prev_hash: str, members: dict[str, bytes] | None = None
) -> tuple[AuditRecord, str]:
    """The record for ``event`` at position ``seq`` after ``prev_hash``, and its canonical
    content text (what the store keeps). ``members``: ``canonical_members(event)`` if already
    computed. Raises ``ValueError`` when the event cannot be canonicalized (RFC 8785).

    The text is RFC 8785 of the content object, assembled from its canonical members: every
    member name is an ASCII field name, for which RFC 8785's UTF-16 code unit order of names
    (§3.2.3) is plain string order.
    """
    body = {**(members or canonical_members(event)), "seq": rfc8785.dumps(seq), "prev_hash": rfc8785.dumps(prev_hash)}
    text = b"{" + b",".join(rfc8785.dumps(name) + b":" + body[name] for name in sorted(body)) + b"}"
    record = AuditRecord(**{**_event_values(event), "seq": seq, "prev_hash": prev_hash, "hash": hashlib.sha256(text).hexdigest()})
    return record, text.decode("utf-8")


def _event_values(event: AuditEvent) -> dict:
    return {name: getattr(event, name) for name in event.__dataclass_fields__}


def content_hash(content: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of a record's content."""
    return hashlib.sha256(rfc8785.dumps(content)).hexdigest()


def _checkpoint_message(cp: Checkpoint) -> bytes:
    return rfc8785.dumps(
        {
            "tenant": cp.tenant,
            "seq": cp.seq,
            "hash": cp.hash,
            "decision_id": cp.decision_id,
            "purged_before": format_us(cp.purged_before),
            "created": format_us(cp.created),
        }
    )


def sign_checkpoint(cp: Checkpoint, secret: bytes) -> Checkpoint:
    """``cp`` with ``signature`` = HMAC-SHA256(secret, canonical fields), hex."""
    return replace(cp, signature=hmac.new(secret, _checkpoint_message(cp), hashlib.sha256).hexdigest())


def checkpoint_is_valid(cp: Checkpoint, secret: bytes) -> bool:
    """True when ``cp.signature`` is the HMAC of its fields under ``secret`` (constant time)."""
    expected = hmac.new(secret, _checkpoint_message(cp), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, cp.signature)


@dataclass(frozen=True)
class BrokenLink:
    """The first broken link found: where (tenant, seq, decision_id) and why."""

    tenant: str
    seq: int | None
    decision_id: str | None
    reason: str


@dataclass(frozen=True)
class VerifyReport:
    """Result of ``verify_chains``: ``broken`` is None when every chain checked is intact."""

    tenants: int
    records: int
    broken: BrokenLink | None

    @property
    def ok(self) -> bool:
        return self.broken is None


def verify_chains(reader: DecisionLogReader, checkpoint_secret: bytes, tenants: Iterable[str] | None = None) -> VerifyReport:
    """Walk the chains of ``tenants`` (default: every tenant) and report the first broken link.

    Reads in batches (constant memory). Raises ``DependencyUnavailable`` when the store fails.
    """
    count_tenants = count_records = 0
    for tenant in sorted(tenants) if tenants is not None else reader.tenants():
        count_tenants += 1
        checked, broken = _verify_tenant(reader, tenant, checkpoint_secret)
        count_records += checked
        if broken is not None:
            return VerifyReport(count_tenants, count_records, broken)
    return VerifyReport(count_tenants, count_records, None)


def _verify_tenant(reader: DecisionLogReader, tenant: str, secret: bytes) -> tuple[int, BrokenLink | None]:
    seq, prev = 0, GENESIS_HASH
    cp = reader.checkpoint(tenant)
    if cp is not None:
        if not checkpoint_is_valid(cp, secret):
            return 0, BrokenLink(tenant, cp.seq, cp.decision_id, "purge checkpoint signature is not valid")
        seq, prev = cp.seq, cp.hash
    checked = 0
    last_id: str | None = cp.decision_id if cp else None
    for entry in reader.iter_chain(tenant):
        checked += 1
        problem = _entry_problem(entry, tenant, seq + 1, prev)
        if problem is not None:
            return checked, BrokenLink(tenant, entry.columns.get("seq"), entry.columns.get("decision_id"), problem)
        seq, prev, last_id = seq + 1, entry.hash, entry.columns["decision_id"]
    head = reader.chain_head(tenant)
    if head is None:
        if checked or cp is not None:
            return checked, BrokenLink(tenant, seq, last_id, "chain head is missing")
    elif (head.seq, head.hash) != (seq, prev):
        if head.seq > seq:
            return checked, BrokenLink(tenant, head.seq, head.decision_id, "records missing at the end of the chain")
        return checked, BrokenLink(tenant, seq, last_id, "chain head does not match the last record")
    return checked, None


def _entry_problem(entry: ChainEntry, tenant: str, expected_seq: int, prev: str) -> str | None:
    """Why ``entry`` breaks the chain at ``expected_seq`` after ``prev``, or None."""
    if entry.content is None:
        return "record content is not readable"
    try:
        record = AuditRecord.from_content(entry.content, entry.hash)
        actual_hash = content_hash(entry.content)
    except (ValueError, TypeError, KeyError):
        return "record content is not readable"
    if actual_hash != entry.hash:
        return "record content does not match its hash (changed)"
    if record.seq != entry.columns.get("seq"):
        return "record is stored out of its place in the chain (reordered)"
    if record.index_columns() != entry.columns or record.tenant != tenant:
        return "indexed columns do not match the record content (changed)"
    if record.seq > expected_seq:
        return f"records missing before this one (expected seq {expected_seq})"
    if record.seq != expected_seq or record.prev_hash != prev:
        return "record does not link to the previous record (reordered or inserted)"
    return None
