"""``toolgate proxy config``: print the nginx configuration of the proxy (``app.proxy.config``)
for the current settings; ``scripts/serve.sh`` and the deployment files use it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.proxy.config import ProxyPaths, render
from app.settings import load_settings


def _config(args: argparse.Namespace) -> int:
    state = Path(args.state_dir)
    paths = ProxyPaths(state if state.is_absolute() else state.resolve(), log_to_stderr=args.log_to_stderr)
    sys.stdout.write(render(load_settings(), paths))
    return 0


def add_proxy_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``proxy config`` to the ``toolgate`` subcommands."""
    proxy = sub.add_parser("proxy", help="the nginx proxy in front of gunicorn")
    proxy_sub = proxy.add_subparsers(dest="proxy_command", required=True)
    config = proxy_sub.add_parser("config", help="print the nginx configuration for the current settings")
    config.add_argument("--state-dir", default="var/nginx", help="writable directory for its pid file, log and temporary files")
    config.add_argument("--log-to-stderr", action="store_true", help="the error log to stderr (in a container)")
    config.set_defaults(func=_config)
