"""The policy-intelligence subcommands of ``toolgate policy`` (registered by
``app.policy.commands``):

    toolgate policy properties FILE [--dir DIR] [--contracts DIR] [--examples N] [--seed N] [--json]
    toolgate policy insights [--since T] [--until T] [--tenant T] [--tool NAME] [--ttl S] [--json]
    toolgate policy suggest [--since T] [--until T] [--tenant T] [--tool NAME] [--dir DIR]
                            [--min-approvals N] [--out DIR] [--json]

``properties`` (``app.policy.properties``): exit 0 when every property holds, 1 when one fails
(a counterexample is printed as a Rego test), is vacuous or cannot be checked, 2 when the file,
the policies or the contracts cannot be read. ``insights`` (``app.policy.insights``) and
``suggest`` (``app.policy.suggest``) read the decision log of ``TOOLGATE_AUDIT_DSN`` (never
creating one): exit 0, 1 when the store is down, 2 for a usage error, a missing decision log or
policies that do not load. ``suggest`` writes its candidates under ``--out`` and applies nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.terminal import json_printable, printable


def _fail(command: str, message: str, code: int) -> int:
    print(f"toolgate policy {command}: {printable(message)}", file=sys.stderr)
    return code


def _properties(args: argparse.Namespace) -> int:
    from app.contracts.contract import ContractLoadError
    from app.contracts.registry import ContractRegistry
    from app.policy.bundle import PolicyLoadError, read_directory
    from app.policy.properties import check_properties, format_results
    from app.policy.property_inputs import PolicyWorld
    from app.policy.property_spec import PropertyFileError, read_property_file
    from app.settings import load_settings

    settings = load_settings()
    try:
        spec = read_property_file(Path(args.file))
        bundle = read_directory(Path(args.dir) if args.dir else settings.policy_dir)
        contracts = ContractRegistry.load(Path(args.contracts) if args.contracts else settings.contracts_dir)
        world = PolicyWorld.read(bundle, contracts.all())
    except (PropertyFileError, PolicyLoadError, ContractLoadError) as exc:
        return _fail("properties", str(exc), 2)
    results = check_properties(spec, bundle, world, examples=args.examples, decision_path=settings.decision_path,
                               seed=args.seed)
    if args.json:
        print(json_printable(json.dumps({"ok": all(r.status == "holds" for r in results),
                                         "properties": [r.as_json() for r in results]}, indent=2)))
    else:
        print(format_results(results))
    return 0 if all(r.status == "holds" for r in results) else 1


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _range(args: argparse.Namespace) -> Any:
    from app.audit.queries import DecisionQuery

    return DecisionQuery(tenant=args.tenant, tool=args.tool, since=args.since, until=args.until)


def _contracts_by_tool(settings: Any) -> dict[str, Any]:
    from app.contracts.registry import ContractRegistry

    return {c.qualified_name: c for c in ContractRegistry.load(settings.contracts_dir).all()}


def _insights(args: argparse.Namespace) -> int:
    from contextlib import closing

    from app.audit.sql_base import StoreMissing
    from app.audit.stores import open_from_settings
    from app.errors import ToolgateError
    from app.policy.insights import escalations, format_insights, insights
    from app.settings import load_settings

    settings = load_settings()
    ttl = args.ttl or settings.approval_default_ttl_s
    fields = {tool: c.meta.counterparty_fields for tool, c in _contracts_by_tool(settings).items()}
    try:
        with closing(open_from_settings(settings, create=False)) as store:
            rows = insights(escalations(store.iter_records(_range(args)), ttl_s=ttl), fields)
    except StoreMissing as exc:
        return _fail("insights", str(exc), 2)
    except ToolgateError as exc:
        return _fail("insights", exc.message, 1)
    if args.json:
        print(json_printable(json.dumps({"ttl_s": ttl, "rules": [r.as_json() for r in rows]}, indent=2)))
    else:
        print(format_insights(rows))
    return 0


def _suggest(args: argparse.Namespace) -> int:
    from contextlib import closing

    from app.audit.sql_base import StoreMissing
    from app.audit.stores import open_from_settings
    from app.errors import ToolgateError
    from app.policy.bundle import PolicyLoadError, read_directory
    from app.policy.insights import escalations
    from app.policy.rollout_commands import policy_in_force
    from app.policy.suggest import format_suggestions, suggest, write_candidates
    from app.settings import load_settings

    settings = load_settings()
    try:
        bundle = read_directory(Path(args.dir)) if args.dir else policy_in_force(settings)
    except PolicyLoadError as exc:
        return _fail("suggest", str(exc), 2)
    try:
        with closing(open_from_settings(settings, create=False)) as store:
            records = list(store.iter_records(_range(args)))
    except StoreMissing as exc:
        return _fail("suggest", str(exc), 2)
    except ToolgateError as exc:
        return _fail("suggest", exc.message, 1)
    found = list(escalations(records, ttl_s=settings.approval_default_ttl_s))
    try:
        report = suggest(records, found, bundle, _contracts_by_tool(settings), min_approvals=args.min_approvals,
                         decision_path=settings.decision_path)
    except PolicyLoadError as exc:
        return _fail("suggest", f"a candidate does not load: {exc}", 2)
    written = write_candidates(report, Path(args.out))
    if args.json:
        print(json_printable(json.dumps({**report.as_json(), "written": [str(p) for p in written]}, indent=2)))
        return 0
    print(format_suggestions(report))
    if written:
        print(f"\ncandidates written to {printable(args.out)}/ ({len(written)} folders); nothing was applied")
    return 0


def add_intel_commands(policy_sub: Any) -> None:
    """Add ``properties``, ``insights`` and ``suggest`` to the ``toolgate policy`` subparsers."""
    from app.policy.rollout_commands import time_argument
    from app.policy.suggest import DEFAULT_MIN_APPROVALS

    props = policy_sub.add_parser(
        "properties", help="check properties of the policies on every input the contracts allow (generated, shrunk)"
    )
    props.add_argument("file", help="the property file (YAML or JSON), e.g. policies/properties.yaml")
    props.add_argument("--dir", help="policy directory (default TOOLGATE_POLICY_DIR)")
    props.add_argument("--contracts", metavar="DIR", help="contracts directory (default TOOLGATE_CONTRACTS_DIR)")
    props.add_argument("--examples", type=_positive, metavar="N", help="generated inputs per property (default: the file's)")
    props.add_argument("--seed", type=int, help="a random seed (default: a derandomized, repeatable run)")
    props.add_argument("--json", action="store_true", help="print one JSON document")
    props.set_defaults(func=_properties)

    for name, helps in (("insights", "approval analytics per rule and tool: escalations, answers, approved values"),
                        ("suggest", "propose tenant-data changes from approvers' answers, measured with policy diff")):
        command = policy_sub.add_parser(name, help=helps)
        command.add_argument("--since", type=time_argument, help="inclusive: YYYY-MM-DD or RFC 3339")
        command.add_argument("--until", type=time_argument, help="exclusive: YYYY-MM-DD or RFC 3339")
        command.add_argument("--tenant")
        command.add_argument("--tool", help="the tool as records name it (namespace/name in a namespace)")
        command.add_argument("--json", action="store_true", help="print one JSON document")
        command.set_defaults(func=_insights if name == "insights" else _suggest)
        if name == "insights":
            command.add_argument("--ttl", type=_positive, metavar="S",
                                 help="seconds after which an unanswered escalation counts as expired "
                                      "(default TOOLGATE_APPROVAL_DEFAULT_TTL_S)")
        else:
            command.add_argument("--dir", help="policy directory (default: the policy in force)")
            command.add_argument("--min-approvals", type=_positive, default=DEFAULT_MIN_APPROVALS, metavar="N",
                                 help=f"approvals (and no denial) a value needs (default {DEFAULT_MIN_APPROVALS})")
            command.add_argument("--out", default="var/suggestions", metavar="DIR",
                                 help="where the candidates are written (default var/suggestions; replaced)")
