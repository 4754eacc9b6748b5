"""``toolgate tenant-data check``: every tenant's data of a policy directory, against the schema
and the custom members' shapes that directory's policy declares (``app.policy.tenant_data``).

    toolgate tenant-data check [DIR] [--tenant-data DIR]

DIR (default ``TOOLGATE_POLICY_DIR``, else ``policies``) is compiled with the embedded engine,
with the pushed tenant data of ``--tenant-data`` (default ``TOOLGATE_TENANT_DATA_DIR``) laid
over it as the gateway does; each ``tenants/<tenant>/data.json`` is then validated as a push
would be. Prints one line per problem (``<file>: <JSON Pointer>: <message>``, never a value),
then a summary. Exit codes: 0 every tenant's data is valid; 1 a problem; 2 the policy cannot be
loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path, PurePosixPath

from app.policy.bundle import PolicyBundle, PolicyLoadError, read_directory
from app.policy.tenant_data import CUSTOM_SHAPES_DOCUMENT, TenantDataInvalid, custom_shapes, validate
from app.settings import PROJECT_ROOT


def declared_shapes(bundle: PolicyBundle) -> dict[str, object]:
    """``{name: JSON Schema}`` of the custom members ``bundle``'s policy declares. Raises
    ``PolicyLoadError`` when the bundle does not compile or the catalog cannot be evaluated."""
    from app.engine.embedded import check_bundle

    return custom_shapes(check_bundle(bundle, None, document=CUSTOM_SHAPES_DOCUMENT))


def tenant_data_problems(bundle: PolicyBundle) -> tuple[int, list[str]]:
    """(tenants checked, one line per problem) for the tenant data files of ``bundle``."""
    shapes = declared_shapes(bundle)
    files = [p for p in bundle.data_files if len(PurePosixPath(p).parts) == 3 and p.startswith("tenants/")]
    lines: list[str] = []
    for rel in files:
        try:
            validate(json.loads(bundle.files[rel]), shapes)
        except ValueError as exc:  # TenantDataInvalid, or JSON that does not parse
            problems = exc.problems if isinstance(exc, TenantDataInvalid) else [{"path": "/", "message": "not JSON"}]
            lines.extend(f"{rel}: {p['path']}: {p['message']}" for p in problems)
    return len(files), lines


def _check(args: argparse.Namespace) -> int:
    policy_dir = Path(args.dir or os.environ.get("TOOLGATE_POLICY_DIR") or PROJECT_ROOT / "policies")
    try:
        bundle = read_directory(policy_dir, tenant_data_dir=Path(args.tenant_data) if args.tenant_data else None)
        tenants, lines = tenant_data_problems(bundle)
    except (PolicyLoadError, OSError) as exc:
        print(f"toolgate: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    print(f"tenant-data check: {tenants} tenants, {len(lines)} problems")
    return 1 if lines else 0


def add_tenant_data_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``toolgate tenant-data check``."""
    group = sub.add_parser("tenant-data", help="tenants' data (policies/tenants, pushed data)")
    commands = group.add_subparsers(dest="tenant_data_command", required=True)
    check = commands.add_parser("check", help="validate every tenant's data against the schema and the declared custom shapes")
    check.add_argument("dir", nargs="?", help="the policy directory (default TOOLGATE_POLICY_DIR, else policies)")
    check.add_argument("--tenant-data", metavar="DIR", default=os.environ.get("TOOLGATE_TENANT_DATA_DIR"),
                       help="pushed tenant data laid over DIR (default TOOLGATE_TENANT_DATA_DIR)")
    check.set_defaults(func=_check)
