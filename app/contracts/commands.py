"""The ``toolgate contracts`` commands: contract evolution (``app.contracts.compatibility``).

    toolgate contracts diff OLD [NEW] [--json]     OLD, NEW: a lock file, a contract file, a
                                                   folder, or a git revision (REV or REV:PATH);
                                                   NEW defaults to the contracts in force
    toolgate contracts check [--lock FILE]         the contracts in force against the lock
    toolgate contracts lock [--out FILE]           write the lock of the contracts in force

"The contracts in force" are those the gateway loads: the files of ``TOOLGATE_CONTRACTS_DIR``
and the built-in ones. The lock defaults to ``contracts.lock.json`` at the project root.

Exit codes: ``diff`` and ``check`` 0 when no change is breaking, 1 when one is; 2 for a usage
error or a set of contracts that cannot be read. ``check`` also says when the lock is out of
date with compatible changes only (exit 0): run ``lock`` to record them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.contracts.compatibility import Change, compare
from app.contracts.contract import ContractLoadError
from app.contracts.published import ContractSourceError, from_registry, load, write_lock
from app.contracts.registry import ContractRegistry
from app.settings import PROJECT_ROOT, load_settings
from app.terminal import json_printable, printable

DEFAULT_LOCK = PROJECT_ROOT / "contracts.lock.json"


def _in_force() -> dict[tuple[str, str, str], dict[str, Any]]:
    return from_registry(ContractRegistry.load(load_settings().contracts_dir))


def _format(changes: list[Change]) -> str:
    lines = []
    for change in changes:
        where = change.where + (f" {change.path}" if change.path else "")
        label = "BREAKING  " if change.breaking else "compatible"
        lines.append(f"{label}  {printable(change.tool)} v{printable(change.version)}  {where}: {printable(change.what)}")
    breaking = sum(change.breaking for change in changes)
    lines.append(f"{len(changes)} changes, {breaking} breaking")
    return "\n".join(lines)


def _print(changes: list[Change], as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        document = {**extra, "changes": [c.as_json() for c in changes], "breaking": sum(c.breaking for c in changes)}
        print(json_printable(json.dumps(document, indent=2)))
    else:
        print(_format(changes))


def _diff(args: argparse.Namespace) -> int:
    try:
        old = load(args.old, repo=PROJECT_ROOT)
        new = load(args.new, repo=PROJECT_ROOT) if args.new else _in_force()
    except (ContractSourceError, ContractLoadError) as exc:
        print(f"toolgate contracts diff: {printable(str(exc))}", file=sys.stderr)
        return 2
    changes = compare(old, new)
    _print(changes, args.json, {"old": args.old, "new": args.new or "the contracts in force"})
    return 1 if any(c.breaking for c in changes) else 0


def _check(args: argparse.Namespace) -> int:
    lock = Path(args.lock)
    if not lock.is_file():
        print(f"toolgate contracts check: no lock at {lock}: toolgate contracts lock writes it", file=sys.stderr)
        return 2
    try:
        changes = compare(load(str(lock), repo=PROJECT_ROOT), _in_force())
    except (ContractSourceError, ContractLoadError) as exc:
        print(f"toolgate contracts check: {printable(str(exc))}", file=sys.stderr)
        return 2
    breaking = [c for c in changes if c.breaking]
    if changes:
        print(_format(changes))
    if breaking:
        print(
            "toolgate contracts check: contracts changed incompatibly without a new version: publish the change as a"
            " new version (a new contract file with the next version) or, when breaking callers is intended, record it"
            " with toolgate contracts lock",
            file=sys.stderr,
        )
        return 1
    if changes:
        print(f"the lock {lock.name} is out of date (compatible changes only): toolgate contracts lock records them")
    else:
        print(f"contracts match {lock.name}")
    return 0


def _lock(args: argparse.Namespace) -> int:
    try:
        contracts = _in_force()
    except ContractLoadError as exc:
        print(f"toolgate contracts lock: {printable(str(exc))}", file=sys.stderr)
        return 2
    write_lock(Path(args.out), contracts)
    print(f"wrote {args.out} ({len(contracts)} contracts)")
    return 0


def add_contracts_commands(sub: Any) -> None:
    """Add ``contracts diff|check|lock`` to the ``toolgate`` subparsers ``sub``."""
    contracts = sub.add_parser("contracts", help="tool contract evolution: diff, check against the lock, lock")
    contracts_sub = contracts.add_subparsers(dest="contracts_command", required=True)
    diff = contracts_sub.add_parser("diff", help="classify every change between two sets of contracts")
    diff.add_argument("old", help="lock file, contract file, folder, or git revision (REV or REV:PATH)")
    diff.add_argument("new", nargs="?", help="the same kinds (default: the contracts in force)")
    diff.add_argument("--json", action="store_true", help="print one JSON document")
    diff.set_defaults(func=_diff)
    check = contracts_sub.add_parser("check", help="fail when a contract in force changed incompatibly from the lock")
    check.add_argument("--lock", default=str(DEFAULT_LOCK), help="the lock file (default: contracts.lock.json)")
    check.set_defaults(func=_check)
    lock = contracts_sub.add_parser("lock", help="write the lock of the contracts in force")
    lock.add_argument("--out", default=str(DEFAULT_LOCK), help="where (default: contracts.lock.json)")
    lock.set_defaults(func=_lock)
