"""The rollout subcommands of ``toolgate policy`` (registered by ``app.policy.commands``):

    toolgate policy diff --candidate DIR|BUNDLE|URL [--tenant-data DIR] [--since T] [--until T]
                         [--tenant T] [--tool NAME] [--json]
    toolgate policy explain DECISION_ID [--trace fails|notes|full|off] [--json]
    toolgate policy archive [DIR|BUNDLE|URL]

``diff`` (``app.policy.diff``): exit 0 when no recorded call would flip from deny or
user-approval to allow, 1 when some would (a person must look), 2 for a usage error, a
candidate that does not load or a decision log that is not there. ``explain``
(``app.policy.explain``): exit 0 when the record was evaluated again, 1 when it cannot be (it
keeps no policy input, its archived bundle is damaged, the store is down), 2 for an unknown
decision id. ``archive`` adds a bundle to the revision archive (``app.policy.archive``; for
bundles an OPA sidecar loads, which the gateway never sees): exit 0, 1 when the store is down.
All read the decision log of ``TOOLGATE_AUDIT_DSN`` and never create one.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from app.audit.queries import DecisionQuery
from app.audit.sql_base import StoreMissing
from app.audit.stores import open_from_settings
from app.errors import ToolgateError
from app.policy.bundle import PolicyBundle, PolicyLoadError, read_directory
from app.settings import Settings, load_settings
from app.terminal import json_printable, printable
from app.timefmt import parse_date_or_rfc3339
from app.vocabulary import DECISION_ID_PATTERN


def time_argument(text: str) -> Any:
    """``YYYY-MM-DD`` (midnight UTC) or RFC 3339 with an offset, as ``toolgate audit`` reads them."""
    try:
        return parse_date_or_rfc3339(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD) or an RFC 3339 time with an offset") from None


def _fail(command: str, message: str, code: int) -> int:
    print(f"toolgate policy {command}: {printable(message)}", file=sys.stderr)
    return code


def _store_error(command: str, exc: ToolgateError) -> int:
    detail = f" ({exc.log_detail})" if exc.log_detail else ""
    return _fail(command, exc.message + detail, 1)


def _diff(args: argparse.Namespace) -> int:
    from app.policy.diff import diff_records, format_report
    from app.policy.reevaluate import BundleEvaluator, read_policy

    settings = load_settings()
    try:
        tenant_data = Path(args.tenant_data) if args.tenant_data else None
        evaluator = BundleEvaluator(read_policy(args.candidate, tenant_data_dir=tenant_data), settings.decision_path)
    except PolicyLoadError as exc:
        return _fail("diff", f"the candidate does not load: {exc}", 2)
    query = DecisionQuery(tenant=args.tenant, tool=args.tool, since=args.since, until=args.until)
    try:
        with closing(open_from_settings(settings, create=False)) as store:
            report = diff_records(store.iter_records(query), evaluator)
    except StoreMissing as exc:
        return _fail("diff", str(exc), 2)
    except ToolgateError as exc:
        return _store_error("diff", exc)
    finally:
        evaluator.close()
    print(json_printable(json.dumps(report.as_json(), indent=2)) if args.json else format_report(report))
    return 1 if report.loosening else 0


def policy_in_force(settings: Settings) -> PolicyBundle:
    """Today's policy: ``TOOLGATE_POLICY_BUNDLE`` when set, else ``TOOLGATE_POLICY_DIR`` with the
    pushed tenant data of ``TOOLGATE_TENANT_DATA_DIR`` over it (as the engines read it).
    Raises ``PolicyLoadError``."""
    from app.policy.reevaluate import read_policy

    if settings.policy_bundle is not None:
        return read_policy(settings.policy_bundle, timeout_s=settings.policy_bundle_timeout_ms / 1000)
    return read_directory(settings.policy_dir, tenant_data_dir=settings.tenant_data_dir)


def _explain(args: argparse.Namespace) -> int:
    import re

    from app.policy.archive import ArchivedBundleInvalid, PolicyArchive
    from app.policy.explain import Explanation, format_explanation, opa_trace, verdict
    from app.policy.reevaluate import recorded_call
    from app.policy.toolchain import opa_binary

    if not re.match(DECISION_ID_PATTERN, args.decision_id):
        return _fail("explain", f"{args.decision_id!r} is not a decision id", 2)
    settings = load_settings()
    try:
        with closing(open_from_settings(settings, create=False)) as store:
            record = store.get(args.decision_id)
            if record is None:
                return _fail("explain", f"no decision {args.decision_id} in the decision log", 2)
            call = recorded_call(record)
            if call is None or call.policy_input is None:
                what = "keeps no policy input" if call is not None else "is not a decided decide call"
                return _fail("explain", f"decision {args.decision_id} {what}: it cannot be evaluated again", 1)
            revision = record.policy_revision
            archived = PolicyArchive(store).get(revision) if revision else None
    except StoreMissing as exc:
        return _fail("explain", str(exc), 2)
    except ArchivedBundleInvalid as exc:
        return _fail("explain", str(exc), 1)
    except ToolgateError as exc:
        return _store_error("explain", exc)
    try:
        today_bundle = policy_in_force(settings)
        at_revision = verdict(archived, call.policy_input, settings.decision_path) if archived else None
        today = verdict(today_bundle, call.policy_input, settings.decision_path)
    except PolicyLoadError as exc:
        return _fail("explain", f"a policy does not load: {exc}", 1)
    trace = None
    opa = opa_binary()
    if args.trace != "off" and opa is not None:
        trace = opa_trace(opa, archived or today_bundle, call.policy_input, settings.decision_path, args.trace)
    found = Explanation(call, revision, at_revision, today, trace)
    print(json_printable(json.dumps(found.as_json(), indent=2)) if args.json else format_explanation(found))
    return 0


def _archive(args: argparse.Namespace) -> int:
    from app.policy.archive import PolicyArchive
    from app.policy.reevaluate import read_policy

    settings = load_settings()
    try:
        bundle = read_policy(args.where) if args.where else policy_in_force(settings)
    except PolicyLoadError as exc:
        return _fail("archive", str(exc), 2)
    try:
        with closing(open_from_settings(settings, create=False)) as store:
            new = PolicyArchive(store).keep(bundle)
    except StoreMissing as exc:
        return _fail("archive", str(exc), 2)
    except ToolgateError as exc:
        return _store_error("archive", exc)
    state = "archived" if new else "already archived"
    print(f"{state}: revision {printable(bundle.revision)} ({printable(bundle.source)})")
    return 0


def add_rollout_commands(policy_sub: Any) -> None:
    """Add ``diff``, ``explain`` and ``archive`` to the ``toolgate policy`` subparsers."""
    diff = policy_sub.add_parser(
        "diff", help="re-evaluate the recorded decide calls under a candidate policy and report what would flip"
    )
    diff.add_argument("--candidate", required=True, help="candidate policy directory, bundle tarball or bundle URL")
    diff.add_argument("--tenant-data", metavar="DIR",
                      help="tenant data laid over a candidate directory (as TOOLGATE_TENANT_DATA_DIR is)")
    diff.add_argument("--since", type=time_argument, help="inclusive: YYYY-MM-DD or RFC 3339")
    diff.add_argument("--until", type=time_argument, help="exclusive: YYYY-MM-DD or RFC 3339")
    diff.add_argument("--tenant")
    diff.add_argument("--tool", help="the tool as records name it (namespace/name in a namespace)")
    diff.add_argument("--json", action="store_true", help="print one JSON document")
    diff.set_defaults(func=_diff)

    explain = policy_sub.add_parser(
        "explain", help="re-evaluate one recorded decision under the revision that made it and under today's"
    )
    explain.add_argument("decision_id", help="the decision id (X-Decision-Id, decision_id of the response)")
    explain.add_argument("--trace", choices=("fails", "notes", "full", "off"), default="fails",
                         help="opa eval --explain mode when the opa binary is there (default fails)")
    explain.add_argument("--json", action="store_true", help="print one JSON document")
    explain.set_defaults(func=_explain)

    archive = policy_sub.add_parser("archive", help="add a policy revision to the revision archive (for sidecar bundles)")
    archive.add_argument("where", nargs="?", help="policy directory, bundle tarball or URL (default: the policy in force)")
    archive.set_defaults(func=_archive)
