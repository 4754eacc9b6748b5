"""The per-tenant hash chain: sealing a record, signing purge checkpoints, verifying a chain.

    record n:  content_n = event document + {"seq": n, "prev_hash": hash_(n-1)}
               hash_n    = SHA-256( RFC 8785 canonical JSON of content_n )      (hex)
    hash_0     = GENESIS_HASH, or the signed checkpoint's hash after a purge

``verify_chains`` walks each tenant chain in ``seq`` order and stops at the first broken link:
a content that does not hash to its stored hash, an indexed column that disagrees with the
content, a missing record (seq gap, or the chain head ahead of the last record), a link to the
wrong previous hash (reordered records), or a checkpoint whose signature is wrong. With the
signed checkpoints of ``app.audit.checkpoints`` it also finds what a consistent rewrite of the
database hides (a truncated tail with a rewound head, a deleted tenant, a re-hashed chain) and
names the newest checkpoint the log still matches: since when it cannot be trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, NamedTuple

from app.audit.interfaces import DecisionLogReader
from app.audit.records import GENESIS_HASH, AuditEvent, AuditRecord, ChainEntry, Checkpoint, SignedHead
from app.fingerprint import canonical_json
from app.timefmt import format_us

if TYPE_CHECKING:
    from app.audit.checkpoints import SignedCheckpoints

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


#: The event document's member names, in RFC 8785 order (ASCII names: plain string order),
#: split around where ``seal`` puts ``prev_hash`` and ``seq``.
_NAMES = sorted(f.name for f in fields(AuditEvent))
_BEFORE = tuple(name for name in _NAMES if name < "prev_hash")
_BETWEEN = tuple(name for name in _NAMES if "prev_hash" < name < "seq")
_AFTER = tuple(name for name in _NAMES if name > "seq")


class CanonicalMembers(NamedTuple):
    """The RFC 8785 canonical JSON of an event's document in three objects: the members whose
    names sort before ``prev_hash``, those between ``prev_hash`` and ``seq``, and those after
    ``seq`` (each ``{...}``, never empty: every member is always present)."""

    before: bytes
    between: bytes
    after: bytes


def canonical_members(event: AuditEvent) -> CanonicalMembers:
    """The canonical JSON of ``event``'s document (``AuditEvent.to_doc``), encoded once, in the
    three runs that ``seal`` joins with the chain fields: the slow part of sealing, done
    before the store's write lock. Raises ``ValueError`` when a value cannot be canonicalized."""
    values = event.__dict__
    after = {name: values[name] for name in _AFTER}
    after["time"] = format_us(event.time)
    return CanonicalMembers(
        canonical_json({name: values[name] for name in _BEFORE}),
        canonical_json({name: values[name] for name in _BETWEEN}),
        canonical_json(after),
    )


def seal(
    event: AuditEvent, seq: int, prev_hash: str, members: CanonicalMembers | None = None
) -> tuple[AuditRecord, str]:
    """The record for ``event`` at position ``seq`` after ``prev_hash``, and its canonical
    content text (what the store keeps). ``members``: ``canonical_members(event)`` if already
    computed. Raises ``ValueError`` when the event cannot be canonicalized (RFC 8785).

    The text is RFC 8785 of the content object: the event's canonical members with
    ``prev_hash`` and ``seq`` spliced in at their places in the order of names.
    """
    before, between, after = members or canonical_members(event)
    text = b"".join((
        before[:-1], b',"prev_hash":', canonical_json(prev_hash), b",", between[1:-1], b',"seq":', canonical_json(seq),
        b",", after[1:],
    ))
    return _record(event, seq, prev_hash, hashlib.sha256(text).hexdigest()), text.decode("utf-8")


def _record(event: AuditEvent, seq: int, prev_hash: str, hash_hex: str) -> AuditRecord:
    """``event`` as the record at ``seq``: its values were checked when it was built, so they
    are copied as they are rather than through ``AuditRecord.__init__`` again."""
    record = object.__new__(AuditRecord)
    record.__dict__.update(event.__dict__, seq=seq, prev_hash=prev_hash, hash=hash_hex)
    return record


def content_hash(content: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of a record's content."""
    return hashlib.sha256(canonical_json(content)).hexdigest()


def _checkpoint_message(cp: Checkpoint) -> bytes:
    return canonical_json(
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
    """The first broken link found: where (tenant, seq, decision_id) and why. ``last_good``:
    when signed checkpoints were checked, the newest one of this tenant the log still matches
    (every record up to its ``seq`` is as it was signed; the break is after it), None when no
    checkpoint of this tenant matches."""

    tenant: str
    seq: int | None
    decision_id: str | None
    reason: str
    last_good: SignedHead | None = None


@dataclass(frozen=True)
class VerifyReport:
    """Result of ``verify_chains``: ``broken`` is None when every chain checked is intact.
    ``signed``: signed checkpoints were checked; ``covered``: records at or before the newest
    matching checkpoint of their tenant (the others are vouched for by the chain alone)."""

    tenants: int
    records: int
    broken: BrokenLink | None
    signed: bool = False
    covered: int = 0

    @property
    def ok(self) -> bool:
        return self.broken is None


def verify_chains(
    reader: DecisionLogReader,
    checkpoint_secret: bytes,
    tenants: Iterable[str] | None = None,
    *,
    signed: SignedCheckpoints | None = None,
) -> VerifyReport:
    """Walk the chains of ``tenants`` (default: every tenant) and report the first broken link.

    With ``signed`` (the checkpoints of this log, ``app.audit.checkpoints.read_checkpoints``)
    the chains are also checked against them, and by default the tenants are those of the
    database and of the signed registry together:

    - a registered tenant without a chain in the database was deleted;
    - a tenant of the database that no statement names is not in the registry;
    - each signed head (record ``seq`` had hash ``h``) must be in the chain with that hash:
      another hash means the chain was re-hashed or the record replaced; a ``seq`` beyond the
      chain's end means records were truncated (also when the head row was rewound to match);
      heads of purged records are checked against the purge checkpoint.

    Reads in batches (constant memory). Raises ``DependencyUnavailable`` when the store fails.
    """
    known = reader.tenants()
    if tenants is not None:
        chosen = sorted(set(tenants))
    else:
        chosen = sorted(set(known) | (signed.registered if signed is not None else set()))
    count_tenants = count_records = covered = 0
    for tenant in chosen:
        count_tenants += 1
        if signed is None:
            checked, tenant_covered, broken = _verify_tenant(reader, tenant, checkpoint_secret, None)
        else:
            checked, tenant_covered, broken = _verify_signed_tenant(reader, tenant, checkpoint_secret, signed, known)
        count_records += checked
        covered += tenant_covered
        if broken is not None:
            return VerifyReport(count_tenants, count_records, broken, signed is not None, covered)
    return VerifyReport(count_tenants, count_records, None, signed is not None, covered)


def _verify_signed_tenant(
    reader: DecisionLogReader, tenant: str, secret: bytes, signed: SignedCheckpoints, known: list[str]
) -> tuple[int, int, BrokenLink | None]:
    heads = sorted(signed.heads.get(tenant, ()), key=lambda h: (h.seq, h.signed_at))
    # A tenant whose chain began after the tenant list was read is in the database after all.
    in_database = tenant in known or reader.chain_head(tenant) is not None
    if heads and not in_database:
        newest = heads[-1]
        return 0, 0, BrokenLink(
            tenant, newest.seq, newest.decision_id,
            f"the tenant is in the signed registry (since {format_us(heads[0].signed_at)}) but has no chain in the"
            f" decision log: deleted; its newest checkpoint names seq {newest.seq} (signed {format_us(newest.signed_at)})",
        )
    if not heads:
        head = reader.chain_head(tenant)
        return 0, 0, BrokenLink(
            tenant, head.seq if head else None, head.decision_id if head else None,
            "the tenant is not in the signed tenant registry: its records were not written by a gateway that signs"
            " checkpoints (inserted into the database, or written before checkpoints were on:"
            " `toolgate audit checkpoint write` registers existing chains)",
        )
    return _verify_tenant(reader, tenant, secret, heads)


def _signed_text(head: SignedHead) -> str:
    return f"the checkpoint signed {format_us(head.signed_at)} ({head.source})"


def _verify_tenant(
    reader: DecisionLogReader, tenant: str, secret: bytes, heads: list[SignedHead] | None
) -> tuple[int, int, BrokenLink | None]:
    """``(records checked, records covered by a matching signed head, broken link or None)``."""
    pending = deque(heads or ())
    last_good: SignedHead | None = None
    seq, prev = 0, GENESIS_HASH
    cp = reader.checkpoint(tenant)
    if cp is not None:
        if not checkpoint_is_valid(cp, secret):
            return 0, 0, BrokenLink(tenant, cp.seq, cp.decision_id, "purge checkpoint signature is not valid")
        seq, prev = cp.seq, cp.hash
        while pending and pending[0].seq <= cp.seq:
            head = pending.popleft()
            if head.seq == cp.seq and head.hash != cp.hash:
                return 0, 0, BrokenLink(
                    tenant, cp.seq, cp.decision_id, f"the purge checkpoint differs from {_signed_text(head)}", last_good
                )
            last_good = head if head.seq == cp.seq else last_good
    start = seq
    checked = 0
    last_id: str | None = cp.decision_id if cp else None

    def covered() -> int:
        return max(0, last_good.seq - start) if last_good is not None else 0

    for entry in reader.iter_chain(tenant):
        checked += 1
        problem = _entry_problem(entry, tenant, seq + 1, prev)
        if problem is not None:
            return checked, covered(), BrokenLink(
                tenant, entry.columns.get("seq"), entry.columns.get("decision_id"), problem, last_good
            )
        seq, prev, last_id = seq + 1, entry.hash, entry.columns["decision_id"]
        while pending and pending[0].seq == seq:
            head = pending.popleft()
            if head.hash != entry.hash:
                return checked, covered(), BrokenLink(
                    tenant, seq, last_id,
                    f"the record differs from {_signed_text(head)}: the chain was re-hashed or the record replaced",
                    last_good,
                )
            last_good = head
    if pending:
        head = pending[0]
        return checked, covered(), BrokenLink(
            tenant, head.seq, head.decision_id,
            f"records missing at the end of the chain: {_signed_text(head)} names seq {head.seq}, the chain ends at"
            f" seq {seq} (truncated)",
            last_good,
        )
    head_row = reader.chain_head(tenant)
    if head_row is None:
        if checked or cp is not None:
            return checked, covered(), BrokenLink(tenant, seq, last_id, "chain head is missing", last_good)
    elif (head_row.seq, head_row.hash) != (seq, prev):
        if head_row.seq > seq:
            return checked, covered(), BrokenLink(
                tenant, head_row.seq, head_row.decision_id, "records missing at the end of the chain", last_good
            )
        return checked, covered(), BrokenLink(tenant, seq, last_id, "chain head does not match the last record", last_good)
    return checked, covered(), None


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
