"""The ``toolgate audit`` commands (DESIGN §6, §9): operator access to the decision log.

    toolgate audit query  [FILTERS] [--limit N] [--cursor C] [--format table|jsonl|csv]
    toolgate audit export --since T --until T [FILTERS] [--format jsonl|csv] [--out FILE]
    toolgate audit verify [--tenant T ...]
    toolgate audit purge  --before DATE

FILTERS: ``--tenant --subject --tool --decision --event --error-code --request-id
--approval-id --idempotency-key --since --until``. Times are RFC 3339 with an offset, or a date
(``2025-01-31`` = midnight UTC). ``query`` lists newest first and prints the cursor of the next
page on stderr; ``export`` streams oldest first in constant memory. ``purge`` verifies every
chain first and refuses to purge a broken one.

Exit codes: 0 success; 1 a chain is broken, purge refused, or the store is unavailable;
2 usage or settings error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from contextlib import closing

from app.audit.chain import VerifyReport, verify_chains
from app.audit.export import write_records
from app.audit.queries import DecisionQuery
from app.audit.records import hash_idempotency_key
from app.audit.stores import checkpoint_key, open_from_settings
from app.errors import ToolgateError, ValidationFailed
from app.settings import load_settings
from app.timefmt import parse_date_or_rfc3339
from app.vocabulary import DECISIONS, EVENT_TYPES


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
        since=args.since,
        until=args.until,
    )


def _run(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        with closing(open_from_settings(settings)) as store:
            return args.action(args, settings, store)
    except ValidationFailed as exc:
        print(f"toolgate audit: {exc.message}", file=sys.stderr)
        return 2
    except ToolgateError as exc:
        detail = f" ({exc.log_detail})" if exc.log_detail else ""
        print(f"toolgate audit: {exc.message}{detail}", file=sys.stderr)
        return 1


def _do_query(args, settings, store) -> int:
    secret = settings.audit_key_hash_secret.get_secret_value()
    page = store.query(_query(args, secret), limit=args.limit, cursor=args.cursor)
    write_records(page.records, sys.stdout, args.format)
    if page.next_cursor:
        print(f"more: --cursor {page.next_cursor}", file=sys.stderr)
    return 0


def _do_export(args, settings, store) -> int:
    secret = settings.audit_key_hash_secret.get_secret_value()
    records = store.iter_records(_query(args, secret))
    if args.out:
        with open(args.out, "w", encoding="utf-8", newline="") as out:
            count = write_records(records, out, args.format)
    else:
        count = write_records(records, sys.stdout, args.format)
    print(f"exported {count} records", file=sys.stderr)
    return 0


def _print_report(report: VerifyReport) -> None:
    if report.broken is None:
        print(f"ok: {report.tenants} chains, {report.records} records intact")
        return
    b = report.broken
    print(f"broken link: tenant {b.tenant}, seq {b.seq}, decision_id {b.decision_id}: {b.reason}")


def _do_verify(args, settings, store) -> int:
    report = verify_chains(store, checkpoint_key(settings), tenants=args.tenant)
    _print_report(report)
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
        print(f"tenant {cp.tenant}: purged through seq {cp.seq} (decision_id {cp.decision_id}); checkpoint signed")
    if not checkpoints:
        print(f"nothing older than {args.before.isoformat()}")
    return 0


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
    parser.add_argument("--since", type=parse_when, required=time_required, help="inclusive: YYYY-MM-DD or RFC 3339")
    parser.add_argument("--until", type=parse_when, required=time_required, help="exclusive: YYYY-MM-DD or RFC 3339")


def add_audit_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``audit query|export|verify|purge`` to the ``toolgate`` subcommands."""
    audit = sub.add_parser("audit", help="the decision log: query, export, verify, purge")
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

    verify = audit_sub.add_parser("verify", help="check the hash chains; exit 1 at the first broken link")
    verify.add_argument("--tenant", action="append", help="repeat for several; default every tenant")
    verify.set_defaults(func=_run, action=_do_verify)

    purge = audit_sub.add_parser("purge", help="delete records older than a date, leaving a signed checkpoint")
    purge.add_argument("--before", type=parse_when, required=True, help="YYYY-MM-DD or RFC 3339")
    purge.set_defaults(func=_run, action=_do_purge)
