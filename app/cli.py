"""The ``toolgate`` command line (DESIGN §9).

    toolgate serve [--bind HOST:PORT]
    toolgate token --sub S --tenant T --role R [--role R2] [--ttl SECONDS]
    toolgate replay FILE.jsonl --url URL [--sub S --tenant T --role R | --token-file FILE | --token T]
                   [--prompt-field FIELD] [--conversation-field FIELD] [--json]
    toolgate replay --trajectory FILE.jsonl --url URL [identity options as above] [--json]
    toolgate policy test|build|verify|push|serve-bundle ...   (app.policy.commands)
    toolgate idempotency resolve --tenant T --subject S --key K --as completed|released
    toolgate idempotency show --tenant T --subject S --key K
    toolgate --version
    toolgate audit query|export|verify|purge|checkpoint ...   (app.audit.commands)
    toolgate receipt verify [FILE] --keys FILE|URL           (app.receipts.commands)
    toolgate mcp [--transport http|stdio] [--bind HOST:PORT] [--upstream NAME=COMMAND|NAME=URL]   (app.mcp.commands)
    toolgate contracts diff|check|lock ...                   (app.contracts.commands)
    toolgate tenant-data check [DIR] [--tenant-data DIR]     (app.policy.tenant_data_commands)

Exit codes: 0 success, 1 a check failed (policy tests, replay errors), 2 usage or settings error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from app.about import version
from app.settings import PROJECT_ROOT, SettingsError, load_settings


def _serve(args: argparse.Namespace) -> int:
    """Replace this process with gunicorn running ``app.wsgi:app`` under gunicorn.conf.py."""
    load_settings()  # report invalid settings before gunicorn starts
    if args.bind:
        os.environ["TOOLGATE_BIND"] = args.bind
    argv = [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_ROOT / "gunicorn.conf.py")]
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover


def _token(args: argparse.Namespace) -> int:
    from app.auth.dev_tokens import mint_dev_token

    settings = load_settings()
    try:
        token = mint_dev_token(settings, sub=args.sub, tenant=args.tenant, roles=args.role or [], ttl_s=args.ttl)
    except (RuntimeError, ValueError) as exc:
        print(f"toolgate token: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


def _replay_token(args: argparse.Namespace) -> str | None:
    """The token of ``--token`` or the first line of ``--token-file`` (None: mint development
    tokens). Raises ``ValueError`` for an empty or unreadable file."""
    if args.token is not None:
        return str(args.token).strip()
    if args.token_file is None:
        return None
    try:
        lines = Path(args.token_file).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read the token file {args.token_file}: {exc.strerror}") from None
    token = lines[0].strip() if lines else ""
    if not token:
        raise ValueError(f"the token file {args.token_file} holds no token")
    return token


def _replay(args: argparse.Namespace) -> int:
    from app.replay import ReplayIdentity, ReplayOptions, ReplayRefused, format_report, replay_file
    from app.replay.trajectories import format_trajectory_report, replay_trajectories

    if (args.file is None) == (args.trajectory is None):
        print("toolgate replay: give either FILE (single calls) or --trajectory FILE (conversations)", file=sys.stderr)
        return 2
    if args.subject_per_conversation and args.trajectory is None:
        print("toolgate replay: --subject-per-conversation is for --trajectory", file=sys.stderr)
        return 2
    if args.trajectory is not None and (args.prompt_field or args.conversation_field):
        print("toolgate replay: --trajectory takes the prompt and the conversation from each line;"
              " --prompt-field and --conversation-field are for single calls", file=sys.stderr)
        return 2
    identity = ReplayIdentity(sub=args.sub, tenant=args.tenant, roles=tuple(args.role or ()))
    options = ReplayOptions(prompt_field=args.prompt_field, conversation_field=args.conversation_field)
    try:
        token = _replay_token(args)
        if args.trajectory is not None:
            conversations = replay_trajectories(Path(args.trajectory), args.url, identity, settings=load_settings(),
                                                timeout_s=args.timeout, token=token,
                                                subject_per_conversation=args.subject_per_conversation)
            print(format_trajectory_report(conversations, as_json=args.json))
            return 0 if conversations.errors == 0 else 1
        report = replay_file(
            Path(args.file), args.url, identity, settings=load_settings(), timeout_s=args.timeout,
            token=token, options=options,
        )
    except (OSError, ValueError, RuntimeError, ReplayRefused) as exc:
        print(f"toolgate replay: {exc}", file=sys.stderr)
        return 2
    print(format_report(report, as_json=args.json))
    return 0 if report.errors == 0 else 1


def _idempotency_show(args: argparse.Namespace) -> int:
    """Print what an operator may see of one idempotency record as JSON. Exit 1 when there is
    none or Redis is unavailable, 2 for a malformed key."""
    import json

    from app.errors import ToolgateError, ValidationFailed
    from app.idempotency.keys import Scope, validate_key
    from app.idempotency.store import IdempotencyStore
    from app.redis_client import build_redis

    settings = load_settings()
    try:
        scope = Scope(args.tenant, args.subject, validate_key(args.key))
    except ValidationFailed as exc:
        print(f"toolgate idempotency show: {exc.message}", file=sys.stderr)
        return 2
    redis = build_redis(settings)
    try:
        found = IdempotencyStore.from_settings(redis, settings).describe(scope)
    except ToolgateError as exc:
        print(f"toolgate idempotency show: {exc.message} ({exc.log_detail})", file=sys.stderr)
        return 1
    finally:
        redis.close()
    if found is None:
        print("toolgate idempotency show: no idempotency record for this tenant, subject and key", file=sys.stderr)
        return 1
    print(json.dumps({"tenant": args.tenant, "subject": args.subject, "key": args.key, **found}))
    return 0


def _idempotency_resolve(args: argparse.Namespace) -> int:
    """Settle a blocked idempotency record; prints ``{"tenant", "key", "state"}`` as JSON.
    Exit 1 when there is no record, its lease is still running, Redis or the decision log is
    unavailable; 2 for a malformed key."""
    import json

    from app.audit.stores import open_from_settings
    from app.decide.resolutions import resolve
    from app.errors import ToolgateError, ValidationFailed
    from app.idempotency.keys import Scope, validate_key
    from app.idempotency.store import IdempotencyStore
    from app.redis_client import build_redis

    settings = load_settings()
    try:
        scope = Scope(args.tenant, args.subject, validate_key(args.key))
    except ValidationFailed as exc:
        print(f"toolgate idempotency resolve: {exc.message}", file=sys.stderr)
        return 2
    redis = build_redis(settings)
    log = open_from_settings(settings)
    try:
        state = resolve(
            IdempotencyStore.from_settings(redis, settings), log,
            key_hash_secret=settings.audit_key_hash_secret.get_secret_value(), scope=scope, resolution=args.outcome,
        )
    except ToolgateError as exc:
        detail = f" ({exc.log_detail})" if exc.log_detail else ""
        print(f"toolgate idempotency resolve: {exc.message}{detail}", file=sys.stderr)
        return 1
    finally:
        redis.close()
        log.close()
    print(json.dumps({"tenant": args.tenant, "subject": args.subject, "key": args.key, "state": state}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="toolgate", description="Policy decision point for AI tool calls.")
    parser.add_argument("--version", action="version", version=f"toolgate {version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway under gunicorn")
    serve.add_argument("--bind", help="HOST:PORT (default TOOLGATE_BIND or 127.0.0.1:8081, behind the proxy)")
    serve.set_defaults(func=_serve)

    token = sub.add_parser("token", help="print a development token (refused in production)")
    token.add_argument("--sub", required=True)
    token.add_argument("--tenant", required=True)
    token.add_argument("--role", action="append", help="repeat for several roles")
    token.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (default 3600)")
    token.set_defaults(func=_token)

    replay = sub.add_parser(
        "replay", help="dry-run recorded tool calls, or replay recorded conversations, against a running gateway",
        description="Send each line of FILE to the gateway as a dry-run decide call; or, with --trajectory, each"
        " conversation's calls as real calls, reporting each allowed call's recorded output. Without --token or"
        " --token-file, each identity gets a development token, and only a development gateway is accepted.",
    )
    replay.add_argument("file", nargs="?",
                        help="JSONL file of single calls: {tool, version?, input, context?} or AgentDojo {function, args, task_text}")
    replay.add_argument("--trajectory", metavar="FILE",
                        help="JSONL file of conversations {conversation, user_prompt, calls: [{function, args, output,"
                        " injected}]}: real calls, each allowed one reported complete with its output")
    replay.add_argument("--url", required=True, help="gateway base URL, e.g. http://127.0.0.1:8080")
    replay.add_argument("--sub", default="replay-user",
                        help="subject of the development tokens, unless a line names one (default: %(default)s)")
    replay.add_argument("--tenant", default="replay",
                        help="tenant of the development tokens, unless a line names one (default: %(default)s)")
    replay.add_argument("--role", action="append",
                        help="role of the development tokens, repeat for several, unless a line names them"
                        " (default: no role)")
    identity = replay.add_mutually_exclusive_group()
    identity.add_argument("--token-file", help="a file whose first line is a token of the gateway's identity provider,"
                       " sent with every call (no development tokens)")
    identity.add_argument("--token", help="the same token on the command line (other users may see it: prefer --token-file)")
    replay.add_argument("--subject-per-conversation", action="store_true",
                        help="with --trajectory and development tokens: each conversation its own subject (SUB-LINE), so"
                        " that per-subject rate limits count one conversation, not the whole file")
    replay.add_argument("--prompt-field", metavar="FIELD",
                        help="a line member sent as context.user_prompt (AgentDojo: task_text, refused on injection"
                        " lines; default: none)")
    replay.add_argument("--conversation-field", metavar="FIELD",
                        help="a line member sent as context.conversation_id (AgentDojo: task_id; default: none)")
    replay.add_argument("--json", action="store_true", help="print one JSON document")
    replay.add_argument("--timeout", type=float, default=10.0, help="per-request timeout in seconds (default: %(default)s)")
    replay.set_defaults(func=_replay)

    idem = sub.add_parser("idempotency", help="idempotency records in Redis")
    idem_sub = idem.add_subparsers(dest="idempotency_command", required=True)
    resolve = idem_sub.add_parser(
        "resolve", help="settle a key whose outcome is unknown: completed (it ran) or released (it may run again)"
    )
    resolve.add_argument("--tenant", required=True)
    resolve.add_argument("--subject", required=True, help="the subject (token sub) that used the key")
    resolve.add_argument("--key", required=True, help="the idempotency key as the caller sent it")
    resolve.add_argument("--as", dest="outcome", required=True, choices=["completed", "released"])
    resolve.set_defaults(func=_idempotency_resolve)
    show = idem_sub.add_parser("show", help="show the state of one key (never its stored result)")
    show.add_argument("--tenant", required=True)
    show.add_argument("--subject", required=True, help="the subject (token sub) that used the key")
    show.add_argument("--key", required=True, help="the idempotency key as the caller sent it")
    show.set_defaults(func=_idempotency_show)

    from app.audit.commands import add_audit_commands
    from app.contracts.commands import add_contracts_commands
    from app.mcp.commands import add_mcp_command
    from app.policy.commands import add_policy_commands
    from app.policy.tenant_data_commands import add_tenant_data_commands
    from app.proxy.commands import add_proxy_commands
    from app.receipts.commands import add_receipt_commands

    add_audit_commands(sub)
    add_receipt_commands(sub)
    add_policy_commands(sub)
    add_tenant_data_commands(sub)
    add_proxy_commands(sub)
    add_mcp_command(sub)
    add_contracts_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolgate`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SettingsError as exc:
        print(f"toolgate: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as Unix filters do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
