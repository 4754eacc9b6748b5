"""The ``toolgate audit`` commands (DESIGN §6, §9): operator access to the decision log.

    toolgate audit query  [FILTERS] [--limit N] [--cursor C] [--format table|jsonl|csv]
    toolgate audit export --since T --until T [FILTERS] [--format jsonl|csv] [--out FILE]
    toolgate audit verify [--tenant T ...] [--keys FILE|URL] [--checkpoints FILE ...]
                          [--checkpoint-stream] [--chain-only]
    toolgate audit purge  --before DATE
    toolgate audit checkpoint write

FILTERS: ``--tenant --subject --tool --decision --event --error-code --request-id
--approval-id --idempotency-key --shadow agrees|disagrees|error (--shadow-disagrees) --since
--until``. Times are RFC 3339 with an offset, or a date
(``2025-01-31`` = midnight UTC). ``query`` lists newest first and prints the cursor of the next
page on stderr; ``export`` streams oldest first in constant memory. ``purge`` verifies every
chain first and refuses to purge a broken one.

``verify`` checks the hash chains against the signed checkpoints (``app.audit.checkpoints``)
of the checkpoint file (``TOOLGATE_CHECKPOINT_FILE``, or ``--checkpoints``) and, with
``--checkpoint-stream``, of the Redis stream; it verifies them with the public keys of
``--keys`` (a key document: its ``checkpoint_keys``; e.g. the gateway's
``/.well-known/toolgate-keys``) or of ``TOOLGATE_CHECKPOINT_KEY_FILES``. ``--chain-only``
checks the hash chains alone, which cannot see a truncated tail with its head rewound, a
deleted tenant or a re-hashed chain. ``checkpoint write`` verifies, then signs every chain
head now (and registers chains not yet registered).

These commands never create a decision log: a store path or database without one is an
error, as is a ``--tenant`` the log does not know. Text from the records is escaped before it
is printed (``app.terminal``).

Exit codes: 0 success; 1 a chain is broken, purge or checkpoint refused, or the store is
unavailable; 2 usage or settings error (no decision log there, unknown tenant, no key).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

from app.audit.chain import BrokenLink, VerifyReport, verify_chains
from app.audit.checkpoints import (
    CheckpointLogInvalid,
    CheckpointWriter,
    SignedCheckpoints,
    checkpoint_ring,
    checkpoint_sinks,
    read_checkpoints,
)
from app.audit.export import write_records
from app.audit.interfaces import DecisionStore
from app.audit.queries import DecisionQuery
from app.audit.records import ChainHead, hash_idempotency_key
from app.audit.sinks import CheckpointSinkError, FileSink, RedisStreamSink, SinkLine, read_file
from app.audit.sql_base import StoreMissing
from app.audit.stores import checkpoint_key, open_from_settings
from app.errors import ToolgateError, ValidationFailed
from app.receipts.keys import KeySetError, PublicKeys, read_key_document
from app.settings import Settings, load_settings
from app.terminal import printable
from app.timefmt import format_us, parse_date_or_rfc3339
from app.vocabulary import DECISIONS, EVENT_TYPES, SHADOW_OUTCOMES


class _UsageError(Exception):
    """A command cannot run as asked (exit 2); the message is escaped when it is printed."""


def _shown(path: Path) -> Path:
    """``path`` as the operator reads it best: relative to the current folder when inside it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def parse_when(text: str) -> dt.datetime:
    """``2025-01-31`` (midnight UTC) or an RFC 3339 date-time with an offset -> aware datetime.
    Raises ``argparse.ArgumentTypeError``."""
    try:
        return parse_date_or_rfc3339(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD) or an RFC 3339 time with an offset") from None


def _query(args: argparse.Namespace, secret: str) -> DecisionQuery:
    return DecisionQuery(
        tenant=args.tenant,
        subject_id=args.subject,
        tool=args.tool,
        decision=args.decision,
        event=args.event,
        error_code=args.error_code,
        request_id=args.request_id,
        approval_id=args.approval_id,
        idempotency_key_hash=hash_idempotency_key(secret, args.idempotency_key) if args.idempotency_key else None,
        shadow_outcome=args.shadow,
        since=args.since,
        until=args.until,
    )


def _run(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        with closing(open_from_settings(settings, create=False)) as store:
            return args.action(args, settings, store)
    except (StoreMissing, _UsageError) as exc:
        print(f"toolgate audit: {printable(str(exc))}", file=sys.stderr)
        return 2
    except ValidationFailed as exc:
        print(f"toolgate audit: {exc.message}", file=sys.stderr)
        return 2
    except ToolgateError as exc:
        detail = f" ({exc.log_detail})" if exc.log_detail else ""
        print(f"toolgate audit: {exc.message}{printable(detail)}", file=sys.stderr)
        return 1


def _known_tenants(store: DecisionStore, tenants: list[str], *, registered: Iterable[str] = ()) -> None:
    """Raise ``_UsageError`` for a tenant neither the log nor the signed registry knows."""
    known = set(store.tenants()) | set(registered)
    unknown = [tenant for tenant in tenants if tenant not in known]
    if unknown:
        names = ", ".join(f"'{tenant}'" for tenant in unknown)  # escaped where it is printed
        raise _UsageError(f"unknown tenant {names}: the decision log has no chain for it")


def _logged_tool(store: DecisionStore, name: str | None, tenant: str | None) -> str | None:
    """``--tool`` as the log stores it: a bare name the log holds only in one namespace
    (``create_calendar_event`` for ``travel/create_calendar_event``) is that namespaced name
    (said on stderr); a bare name held in several namespaces is a ``_UsageError`` naming them."""
    if name is None or "/" in name:
        return name
    found = store.tool_names(name, tenant=tenant)
    if not found or name in found:
        return name
    if len(found) > 1:
        raise _UsageError(f"--tool {name!r} is in several namespaces ({', '.join(found)}): pass one of them")
    print(f"--tool {printable(name)}: the log names it {printable(found[0])}", file=sys.stderr)
    return found[0]


def _do_query(args, settings, store) -> int:
    if args.tenant is not None:
        _known_tenants(store, [args.tenant])
    args.tool = _logged_tool(store, args.tool, args.tenant)
    secret = settings.audit_key_hash_secret.get_secret_value()
    page = store.query(_query(args, secret), limit=args.limit, cursor=args.cursor)
    write_records(page.records, sys.stdout, args.format)
    if page.next_cursor:
        print(f"more: --cursor {page.next_cursor}", file=sys.stderr)
    return 0


def _do_export(args, settings, store) -> int:
    if args.tenant is not None:
        _known_tenants(store, [args.tenant])
    args.tool = _logged_tool(store, args.tool, args.tenant)
    secret = settings.audit_key_hash_secret.get_secret_value()
    records = store.iter_records(_query(args, secret))
    if args.out:
        with open(args.out, "w", encoding="utf-8", newline="") as out:
            count = write_records(records, out, args.format)
    else:
        count = write_records(records, sys.stdout, args.format)
    print(f"exported {count} records", file=sys.stderr)
    return 0


def _broken_text(b: BrokenLink, signed: bool) -> list[str]:
    lines = [
        f"broken link: tenant {printable(b.tenant)}, seq {b.seq}, decision_id {printable(str(b.decision_id))}: {printable(b.reason)}"
    ]
    if not signed:
        return lines
    if b.last_good is None:
        lines.append("since: no signed checkpoint of this tenant matches the log: none of its records can be trusted")
    else:
        g = b.last_good
        lines.append(
            f"since: records after seq {g.seq} cannot be trusted; the newest signed checkpoint the log still matches"
            f" names seq {g.seq} (decision_id {printable(str(g.decision_id))}, signed {format_us(g.signed_at)})"
        )
    return lines


def _print_report(report: VerifyReport, signed: SignedCheckpoints | None = None) -> None:
    if report.broken is not None:
        print("\n".join(_broken_text(report.broken, report.signed)))
        return
    if signed is None:
        print(
            f"ok: {report.tenants} chains, {report.records} records intact (hash chains only: a truncated tail,"
            " a deleted tenant or a re-hashed chain is not detected)"
        )
        return
    newest = f" (newest {format_us(signed.newest)})" if signed.newest else ""
    print(
        f"ok: {report.tenants} chains, {report.records} records intact, {report.covered} under a signed checkpoint;"
        f" {len(signed.registered)} tenants registered, {signed.statements} signed statements{newest}"
    )


def _verify_keys(source: str | None, settings: Settings) -> tuple[PublicKeys, str]:
    """The public keys that verify checkpoints (the key document at ``source``, else the
    configured ring), and where they came from."""
    if source:
        try:
            document = read_key_document(source)
            return PublicKeys.from_jwks(document.get("checkpoint_keys"), what="checkpoint_keys"), source
        except KeySetError as exc:
            raise _UsageError(str(exc)) from None
    ring = checkpoint_ring(settings)
    if ring is None:
        raise _UsageError(
            "no checkpoint verification key: pass --keys FILE|URL (e.g. the gateway's /.well-known/toolgate-keys)"
            " or set TOOLGATE_CHECKPOINT_KEY_FILES; --chain-only checks the hash chains alone"
        )
    origin = "the built-in development checkpoint key" if settings.uses_dev_checkpoint_key else "TOOLGATE_CHECKPOINT_KEY_FILES"
    return ring.public, origin


def _checkpoint_lines(files: list[str] | None, stream: bool, settings: Settings, notes: list[str]) -> list[SinkLine]:
    """The statement lines of ``files`` (default: the configured checkpoint file, which may not
    exist yet) and, with ``stream``, of the configured Redis stream."""
    lines: list[SinkLine] = []
    for path in [Path(p) for p in files] if files else [_shown(settings.checkpoint_path)]:
        if not path.is_file():
            if files:
                raise _UsageError(f"no checkpoint file at {path}")
            notes.append(f"no checkpoint file at {path} yet")
            continue
        try:
            lines.extend(read_file(path))
        except (OSError, ValueError) as exc:
            raise _UsageError(f"{path}: cannot be read ({type(exc).__name__})") from None
    if stream:
        if not settings.checkpoint_redis_stream:
            raise _UsageError("--checkpoint-stream needs TOOLGATE_CHECKPOINT_REDIS_STREAM")
        from app.redis_client import build_redis

        redis = build_redis(settings)
        try:
            lines.extend(RedisStreamSink(redis, settings.checkpoint_redis_stream).read())
        finally:
            redis.close()
    return lines


class _ChecksRefused(Exception):
    """The checkpoint sinks cannot be trusted (exit 1); the message says why."""


def _signed_checkpoints(
    settings: Settings, store: DecisionStore, *, keys_source: str | None = None, files: list[str] | None = None,
    stream: bool = False,
) -> SignedCheckpoints:
    """Read and check the statements of every source (see ``_checkpoint_lines``) with the keys
    of ``keys_source`` (see ``_verify_keys``). Raises ``_ChecksRefused`` for a statement that
    does not verify and for statements of another decision log."""
    keys, origin = _verify_keys(keys_source, settings)
    print(f"note: checkpoint keys: {printable(origin)}", file=sys.stderr)
    notes: list[str] = []
    lines = _checkpoint_lines(files, stream, settings, notes)
    try:
        signed = read_checkpoints(lines, keys, store.log_id())
    except CheckpointLogInvalid as exc:
        raise _ChecksRefused(f"checkpoint log not trusted: {printable(str(exc))}") from None
    for note in [*notes, *signed.notes]:
        print(f"note: {printable(note)}", file=sys.stderr)
    if signed.other_logs:
        others = ", ".join(f"{log} ({count} statements)" for log, count in sorted(signed.other_logs.items()))
        raise _ChecksRefused(
            f"the checkpoints hold statements of another decision log ({printable(others)}); this log is"
            f" {store.log_id()}: the log was replaced, or another log shares the checkpoint file"
            " (give each decision log its own TOOLGATE_CHECKPOINT_FILE)"
        )
    return signed


def _do_verify(args, settings, store) -> int:
    signed = None
    if not args.chain_only:
        try:
            signed = _signed_checkpoints(
                settings, store, keys_source=args.keys, files=args.checkpoints, stream=args.checkpoint_stream
            )
        except _ChecksRefused as exc:
            print(f"broken: {exc}")
            return 1
    if args.tenant:
        _known_tenants(store, args.tenant, registered=signed.registered if signed else set())
    report = verify_chains(store, checkpoint_key(settings), tenants=args.tenant, signed=signed)
    _print_report(report, signed)
    return 0 if report.ok else 1


def _do_purge(args, settings, store) -> int:
    key = checkpoint_key(settings)
    report = verify_chains(store, key)
    if not report.ok:
        _print_report(report)
        print("toolgate audit purge: refused, a chain is broken (purging would hide it)", file=sys.stderr)
        return 1
    checkpoints = store.purge(args.before, checkpoint_secret=key)
    for cp in checkpoints:
        print(f"tenant {printable(cp.tenant)}: purged through seq {cp.seq} (decision_id {cp.decision_id}); checkpoint signed")
    if not checkpoints:
        print(f"nothing older than {args.before.isoformat()}")
    return 0


def _do_checkpoint_write(args, settings, store) -> int:
    """Verify every chain against the signed checkpoints (a chain no statement names yet is
    checked as a hash chain, and registered), then sign every chain head."""
    ring = checkpoint_ring(settings)
    if ring is None:
        raise _UsageError("no checkpoint signing key: set TOOLGATE_CHECKPOINT_KEY_FILES")
    try:
        signed = _signed_checkpoints(settings, store, stream=bool(settings.checkpoint_redis_stream))
    except _ChecksRefused as exc:
        print(f"broken: {exc}")
        print("toolgate audit checkpoint write: refused (signing now would vouch for it)", file=sys.stderr)
        return 1
    key = checkpoint_key(settings)
    heads: list[ChainHead] = []
    unregistered: list[ChainHead] = []
    for tenant in sorted(set(store.tenants()) | signed.registered):
        known = tenant in signed.registered
        report = verify_chains(store, key, [tenant], signed=signed if known else None)
        if not report.ok:
            print("\n".join(_broken_text(report.broken, report.signed)))  # type: ignore[arg-type]
            print("toolgate audit checkpoint write: refused, a chain is broken (signing now would vouch for it)", file=sys.stderr)
            return 1
        head = store.chain_head(tenant)
        if head is not None and head.seq > 0:
            heads.append(head)
            if not known:
                unregistered.append(head)
    writer = CheckpointWriter(ring, checkpoint_sinks(settings, _redis_for(settings)))
    try:
        if unregistered:
            writer.write("register", store.log_id(), unregistered)
        if heads:
            writer.write("checkpoint", store.log_id(), heads)
    except CheckpointSinkError as exc:
        print(f"toolgate audit checkpoint write: {printable(str(exc))}", file=sys.stderr)
        return 1
    where = ", ".join(str(_shown(sink.path)) if isinstance(sink, FileSink) else sink.name for sink in writer.sinks)
    registered = f"; registered {len(unregistered)}: {', '.join(printable(h.tenant) for h in unregistered)}" if unregistered else ""
    print(f"signed a checkpoint of {len(heads)} chains to {where}{registered}")
    return 0


def _redis_for(settings: Settings) -> Any:
    if not settings.checkpoint_redis_stream:
        return None
    from app.redis_client import build_redis

    return build_redis(settings)


def _limit(text: str) -> int:
    value = int(text) if text.isdigit() else 0
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError("limit must be 1..1000")
    return value


def _add_filters(parser: argparse.ArgumentParser, *, time_required: bool = False) -> None:
    parser.add_argument("--tenant")
    parser.add_argument("--subject", help="subject id")
    parser.add_argument("--tool")
    parser.add_argument("--decision", choices=DECISIONS)
    parser.add_argument("--event", choices=EVENT_TYPES)
    parser.add_argument("--error-code")
    parser.add_argument("--request-id")
    parser.add_argument("--approval-id")
    parser.add_argument("--idempotency-key", help="the raw key; matched by its keyed hash")
    shadow = parser.add_mutually_exclusive_group()
    shadow.add_argument("--shadow", choices=SHADOW_OUTCOMES,
                        help="decide records whose shadow policy agreed, disagreed, or gave no decision")
    shadow.add_argument("--shadow-disagrees", dest="shadow", action="store_const", const="disagrees",
                        help="the same as --shadow disagrees")
    parser.add_argument("--since", type=parse_when, required=time_required, help="inclusive: YYYY-MM-DD or RFC 3339")
    parser.add_argument("--until", type=parse_when, required=time_required, help="exclusive: YYYY-MM-DD or RFC 3339")


def add_audit_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``audit query|export|verify|purge|checkpoint`` to the ``toolgate`` subcommands."""
    audit = sub.add_parser("audit", help="the decision log: query, export, verify, purge, checkpoint")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)

    query = audit_sub.add_parser("query", help="list records, newest first")
    _add_filters(query)
    query.add_argument("--limit", type=_limit, default=50, help="1..1000 (default 50)")
    query.add_argument("--cursor", help="the cursor printed by the previous page")
    query.add_argument("--format", choices=("table", "jsonl", "csv"), default="table")
    query.set_defaults(func=_run, action=_do_query)

    export = audit_sub.add_parser("export", help="stream records oldest first (constant memory)")
    _add_filters(export, time_required=True)
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument("--out", help="file to write (default stdout)")
    export.set_defaults(func=_run, action=_do_export)

    verify = audit_sub.add_parser(
        "verify", help="check the hash chains against the signed checkpoints; exit 1 at the first broken link"
    )
    verify.add_argument("--tenant", action="append", help="repeat for several; default every tenant")
    verify.add_argument("--keys", help="key document (file or http(s) URL) whose checkpoint_keys verify the checkpoints")
    verify.add_argument("--checkpoints", action="append", help="checkpoint file to read (repeat; default TOOLGATE_CHECKPOINT_FILE)")
    verify.add_argument(
        "--checkpoint-stream", action="store_true", help="also read the Redis stream TOOLGATE_CHECKPOINT_REDIS_STREAM"
    )
    verify.add_argument(
        "--chain-only", action="store_true", help="check the hash chains alone (blind to truncation, deleted tenants, re-hashing)"
    )
    verify.set_defaults(func=_run, action=_do_verify)

    purge = audit_sub.add_parser("purge", help="delete records older than a date, leaving a signed checkpoint")
    purge.add_argument("--before", type=parse_when, required=True, help="YYYY-MM-DD or RFC 3339")
    purge.set_defaults(func=_run, action=_do_purge)

    checkpoint = audit_sub.add_parser("checkpoint", help="signed checkpoints of the chains")
    checkpoint_sub = checkpoint.add_subparsers(dest="checkpoint_command", required=True)
    write = checkpoint_sub.add_parser("write", help="verify, then sign every chain head now (registers unregistered chains)")
    write.set_defaults(func=_run, action=_do_checkpoint_write)
