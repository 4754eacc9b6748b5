"""The ``toolgate policy`` commands (registered by ``app.cli`` with ``add_policy_commands``).

    toolgate policy test [DIR] [--coverage] [--fail-under PERCENT] [--runner auto|opa|embedded]
    toolgate policy build [DIR] -o FILE [--revision R] [--root PATH]... [--signing-key KEY
                          [--signing-alg ALG] [--signing-key-id ID] [--scope SCOPE]]
    toolgate policy verify BUNDLE --verification-key KEY [--verification-alg ALG]
                          [--verification-key-id ID] [--scope SCOPE]
    toolgate policy push [DIR] [--url URL]
    toolgate policy serve-bundle [DIR] [--bind HOST:PORT] [--name NAME] [--tenant-data DIR] [--signing-key KEY ...]
    toolgate policy check [DIR] [--contracts DIR] [--strict] [--json]
    toolgate policy eval --input FILE|- [--dir DIR | --bundle FILE] [--tenant-data DIR] [--explain [MODE]] [--json]
    toolgate policy diff|explain|archive ...   (app.policy.rollout_commands)
    toolgate policy properties|insights|suggest ...   (app.policy.intel_commands)

Exit codes: 0 success, 1 a check failed (tests, coverage, compile, verification, a refused
push), 2 usage or settings error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from app.policy.evaluate import EXPLAIN_MODES
from app.policy.signing import DEFAULT_KEY_ID, SIGNING_ALGORITHMS


def _policy_dir(args: argparse.Namespace) -> Path:
    from app.settings import load_settings

    return Path(args.dir) if args.dir else load_settings().policy_dir


def _test(args: argparse.Namespace) -> int:
    """Run the Rego tests with ``opa test`` (``--runner opa``, or ``auto`` when an ``opa``
    binary is there) or the embedded runner; with ``--coverage`` (implied by ``--fail-under``)
    print the line coverage and fail under ``--fail-under``."""
    from app.policy.opa_cli import OpaRunError, run_opa_coverage, run_opa_test
    from app.policy.toolchain import opa_binary

    directory = _policy_dir(args)
    opa = opa_binary() if args.runner in ("auto", "opa") else None
    if args.runner == "opa" and opa is None:
        print("toolgate policy test: no opa binary (scripts/install.sh builds .tools/bin/opa)", file=sys.stderr)
        return 2
    coverage = args.coverage or args.fail_under is not None
    if opa is None:
        if coverage:
            print("toolgate policy test: coverage needs the opa binary (scripts/install.sh builds .tools/bin/opa)",
                  file=sys.stderr)
            return 2
        return _test_embedded(directory)
    ok, output = run_opa_test(opa, directory)
    print(output)
    if not ok:
        return 1
    if not coverage:
        return 0
    try:
        report = run_opa_coverage(opa, directory)
    except OpaRunError as exc:
        print(f"toolgate policy test: {exc}", file=sys.stderr)
        return 1
    print(report.format_text())
    if args.fail_under is not None and report.percent < args.fail_under:
        print(f"toolgate policy test: coverage {report.percent:.2f}% is under {args.fail_under:g}%", file=sys.stderr)
        return 1
    return 0


def _test_embedded(directory: Path) -> int:
    from app.policy.bundle import PolicyLoadError
    from app.policy.testing import run_policy_tests

    try:
        report = run_policy_tests(directory)
    except PolicyLoadError as exc:
        print(f"toolgate policy test: {exc}", file=sys.stderr)
        return 1
    print(report.format_text())
    return 0 if report.ok else 1


def _signer(args: argparse.Namespace) -> Any:
    """A function bundle -> ``.signatures.json`` from the ``--signing-*`` options, or None."""
    if not args.signing_key:
        return None
    from app.policy.signing import sign

    return lambda bundle: sign(bundle, args.signing_key, algorithm=args.signing_alg, key_id=args.signing_key_id,
                               scope=args.scope)


def _build(args: argparse.Namespace) -> int:
    """Write the bundle of DIR to ``--output``: ``.manifest`` with the revision (default: the
    content hash) and roots, signed with ``--signing-key``. The bundle must compile."""
    from app.engine.embedded import check_bundle
    from app.policy.bundle import (
        PolicyLoadError,
        build_tarball,
        read_directory,
        with_manifest,
    )
    from app.policy.signing import BundleSignatureError

    try:
        bundle = with_manifest(read_directory(_policy_dir(args)), revision=args.revision,
                               roots=tuple(args.root) if args.root else None)
        check_bundle(bundle, None)
        signer = _signer(args)
        tarball = build_tarball(bundle, signatures=signer(bundle) if signer else None)
    except (PolicyLoadError, BundleSignatureError) as exc:
        print(f"toolgate policy build: {exc}", file=sys.stderr)
        return 1
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    partial.write_bytes(tarball)
    partial.replace(output)  # pollers never see half a bundle
    signed = " signed" if args.signing_key else ""
    print(f"wrote{signed} bundle {output} revision {bundle.revision} roots {list(bundle.roots or ())} "
          f"({len(bundle.modules)} modules, {len(bundle.data_files)} data files)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    """Check a bundle tarball's signature and that it compiles; prints its revision."""
    from app.engine.embedded import check_bundle
    from app.policy.bundle import PolicyLoadError, read_tarball
    from app.policy.signing import BundleSignatureError, BundleVerifier

    verifier = BundleVerifier(args.verification_key, algorithm=args.verification_alg,
                              key_id=args.verification_key_id, scope=args.scope or "")
    try:
        bundle = read_tarball(Path(args.bundle).read_bytes(), source=args.bundle)
        check_bundle(bundle, verifier)
    except OSError as exc:
        print(f"toolgate policy verify: cannot read {args.bundle}: {exc.strerror}", file=sys.stderr)
        return 2
    except (PolicyLoadError, BundleSignatureError) as exc:
        print(f"toolgate policy verify: {exc}", file=sys.stderr)
        return 1
    print(f"bundle {args.bundle} revision {bundle.revision}: signature verified, compiles")
    return 0


def _push(args: argparse.Namespace) -> int:
    """Push DIR's data and modules to a running OPA (``app.policy.push``)."""
    from app.engine.opa_http import build_opa_client
    from app.policy.bundle import PolicyLoadError
    from app.policy.push import PushError, push_directory
    from app.settings import load_settings

    url = args.url or load_settings().opa_url
    try:
        client = build_opa_client(url, timeout_s=args.timeout)
        pushed = push_directory(client, _policy_dir(args))
    except ValueError as exc:
        print(f"toolgate policy push: {exc}", file=sys.stderr)
        return 2
    except (PolicyLoadError, PushError) as exc:
        print(f"toolgate policy push: {exc}", file=sys.stderr)
        return 1
    for rel in pushed:
        print(f"pushed {rel}")
    print(f"{len(pushed)} files pushed to {url}")
    return 0


def _serve_bundle(args: argparse.Namespace) -> int:
    """Serve DIR's bundle until interrupted (``app.policy.bundle_server``)."""
    from app.policy.bundle_server import BundleCache, make_server

    host, _, port = args.bind.rpartition(":")
    if not host or not port.isdigit():
        print("toolgate policy serve-bundle: --bind must be HOST:PORT", file=sys.stderr)
        return 2
    directory = _policy_dir(args)
    try:
        cache = BundleCache(directory, sign=_signer(args), tenant_data_dir=Path(args.tenant_data) if args.tenant_data else None)
        server = make_server(cache, args.name, host, int(port))
    except OSError as exc:
        print(f"toolgate policy serve-bundle: cannot listen on {args.bind}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"serving {directory} as http://{args.bind}/bundles/{args.name}.tar.gz", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _check(args: argparse.Namespace) -> int:
    """The families against the contracts (``app.policy.check``): exit 1 on an error (or, with
    ``--strict``, a warning), 2 without the opa binary."""
    from app.contracts.contract import ContractLoadError
    from app.policy.bundle import PolicyLoadError
    from app.policy.check import check_policies
    from app.policy.rego_ast import RegoParseError
    from app.policy.toolchain import opa_binary
    from app.settings import load_settings

    opa = opa_binary()
    if opa is None:
        print("toolgate policy check: the field checks parse Rego with the opa binary, and there is none "
              "(scripts/install.sh builds .tools/bin/opa)", file=sys.stderr)
        return 2
    contracts = Path(args.contracts) if args.contracts else load_settings().contracts_dir
    try:
        report = check_policies(_policy_dir(args), contracts, opa=opa)
    except (PolicyLoadError, ContractLoadError, RegoParseError) as exc:
        print(f"toolgate policy check: {exc}", file=sys.stderr)
        return 1
    print(report.to_json(strict=args.strict) if args.json else report.format_text())
    return 0 if report.ok(strict=args.strict) else 1


def _eval(args: argparse.Namespace) -> int:
    """Evaluate one policy input offline (``app.policy.evaluate``): exit 0 with the decision
    printed, 1 when the policies do not load or raise, 2 for an unusable input."""
    from app.policy.bundle import PolicyLoadError
    from app.policy.evaluate import EvaluationError, PolicyInputError, evaluate, parse_input, read_policies
    from app.policy.toolchain import opa_binary
    from app.settings import load_settings

    try:
        text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text(encoding="utf-8")
        policy_input, notes = parse_input(text)
    except OSError as exc:
        print(f"toolgate policy eval: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 2
    except (PolicyInputError, UnicodeDecodeError) as exc:
        print(f"toolgate policy eval: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"toolgate policy eval: note: {note}", file=sys.stderr)
    settings = load_settings()
    try:
        tenant_data = Path(args.tenant_data) if args.tenant_data else settings.tenant_data_dir
        bundle = read_policies(Path(args.dir) if args.dir else settings.policy_dir,
                               Path(args.bundle) if args.bundle else None, tenant_data_dir=tenant_data)
        result = evaluate(bundle, policy_input, decision_path=settings.decision_path, explain=args.explain,
                          opa=opa_binary() if args.explain else None)
    except (PolicyLoadError, EvaluationError, RuntimeError) as exc:
        print(f"toolgate policy eval: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.format_text())
    return 0


def _signing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--signing-key", help="sign with this private key (PEM text or file; HS256: the secret)")
    parser.add_argument("--signing-alg", choices=SIGNING_ALGORITHMS,
                        help="default: the key's own (RSA RS256, EC ES256/384/512 by curve, Ed25519 EdDSA); HS256 for a secret")
    parser.add_argument("--signing-key-id", default=DEFAULT_KEY_ID, help=f"key id (default {DEFAULT_KEY_ID})")
    parser.add_argument("--scope", help="signature scope")


def add_policy_commands(sub: Any) -> None:
    """Add ``policy`` and its subcommands to the ``toolgate`` subparsers ``sub``."""
    policy = sub.add_parser("policy", help="policy tools: tests, bundles, signatures, push")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)

    ptest = policy_sub.add_parser("test", help="run the Rego tests (opa test when the binary is there)")
    ptest.add_argument("dir", nargs="?", help="policy directory (default TOOLGATE_POLICY_DIR)")
    ptest.add_argument("--coverage", action="store_true", help="print line coverage and uncovered lines (opa)")
    ptest.add_argument("--fail-under", type=float, metavar="PERCENT", help="exit 1 below this line coverage")
    ptest.add_argument("--runner", choices=["auto", "opa", "embedded"], default="auto",
                       help="auto: opa when there, else the embedded runner")
    ptest.set_defaults(func=_test)

    build = policy_sub.add_parser("build", help="write an OPA bundle (tar.gz with .manifest, optionally signed)")
    build.add_argument("dir", nargs="?", help="policy directory (default TOOLGATE_POLICY_DIR)")
    build.add_argument("-o", "--output", required=True, help="bundle file to write (e.g. var/bundles/toolgate.tar.gz)")
    build.add_argument("--revision", help="manifest revision (default: the content hash)")
    build.add_argument("--root", action="append", help="manifest root (repeat; default: the directory's, else \"\")")
    _signing_options(build)
    build.set_defaults(func=_build)

    verify = policy_sub.add_parser("verify", help="verify a bundle's signature and that it compiles")
    verify.add_argument("bundle", help="bundle tarball")
    verify.add_argument("--verification-key", required=True, help="public key (PEM text or file; HS256: the secret)")
    verify.add_argument("--verification-alg", default="RS256", choices=SIGNING_ALGORITHMS)
    verify.add_argument("--verification-key-id", default=DEFAULT_KEY_ID)
    verify.add_argument("--scope", help="required signature scope")
    verify.set_defaults(func=_verify)

    push = policy_sub.add_parser("push", help="load DIR into a running OPA without bundles (development)")
    push.add_argument("dir", nargs="?", help="policy directory (default TOOLGATE_POLICY_DIR)")
    push.add_argument("--url", help="OPA base URL (default TOOLGATE_OPA_URL)")
    push.add_argument("--timeout", type=float, default=5.0, help="per-request timeout in seconds")
    push.set_defaults(func=_push)

    serve = policy_sub.add_parser("serve-bundle", help="serve DIR as an OPA bundle over HTTP with ETags (development)")
    serve.add_argument("dir", nargs="?", help="policy directory (default TOOLGATE_POLICY_DIR)")
    serve.add_argument("--bind", default="127.0.0.1:8282", help="HOST:PORT (default 127.0.0.1:8282)")
    serve.add_argument("--name", default="toolgate", help="bundle name in the URL (default toolgate)")
    serve.add_argument(
        "--tenant-data", metavar="DIR", default=os.environ.get("TOOLGATE_TENANT_DATA_DIR"),
        help="pushed tenant data laid over DIR (default TOOLGATE_TENANT_DATA_DIR)",
    )
    _signing_options(serve)
    serve.set_defaults(func=_serve_bundle)

    check = policy_sub.add_parser("check", help="check the families against the tool contracts")
    check.add_argument("dir", nargs="?", help="policy directory (default TOOLGATE_POLICY_DIR)")
    check.add_argument("--contracts", metavar="DIR", help="contracts directory (default TOOLGATE_CONTRACTS_DIR)")
    check.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    check.add_argument("--json", action="store_true", help="print the findings as JSON")
    check.set_defaults(func=_check)

    peval = policy_sub.add_parser("eval", help="evaluate one policy input offline: decision, reasons, matched rules")
    peval.add_argument("--input", required=True, metavar="FILE", help="the policy input document (DESIGN §3); - for stdin")
    where = peval.add_mutually_exclusive_group()
    where.add_argument("--dir", help="policy directory (default TOOLGATE_POLICY_DIR)")
    where.add_argument("--bundle", metavar="FILE", help="a bundle tarball instead of a directory")
    peval.add_argument("--explain", nargs="?", const="fails", choices=EXPLAIN_MODES, metavar="MODE",
                       help="also print a trace: notes, fails (the default), full or debug (opa eval --explain when "
                            "the opa binary is there, else the embedded engine's trace)")
    peval.add_argument("--tenant-data", metavar="DIR",
                       help="pushed tenant data laid over the directory (default TOOLGATE_TENANT_DATA_DIR)")
    peval.add_argument("--json", action="store_true", help="print the evaluation as JSON")
    peval.set_defaults(func=_eval)

    from app.policy.intel_commands import add_intel_commands
    from app.policy.rollout_commands import add_rollout_commands

    add_rollout_commands(policy_sub)
    add_intel_commands(policy_sub)
