"""``toolgate mcp``: the MCP gateway (docs/mcp.md).

    toolgate mcp [--transport http|stdio] [--bind HOST:PORT] [--upstream NAME[:PREFIX]=COMMAND|URL ...]

Upstreams come from ``TOOLGATE_MCP_UPSTREAMS`` plus every ``--upstream``: ``NAME=URL`` for a
Streamable HTTP server (``http://`` or ``https://``), ``NAME=COMMAND ARGS...`` for a command
run over stdio (split like a shell would); ``NAME:PREFIX=...`` lists its tools under
``PREFIX`` + the upstream's name. Exit codes: 0 stopped, 2 usage or settings error, or two
upstreams that offer a tool of the same name at start.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from pydantic import ValidationError

from app.settings import McpUpstream, load_settings


def parse_upstream(text: str) -> McpUpstream:
    """``NAME[:PREFIX]=URL`` or ``NAME[:PREFIX]=COMMAND ARGS...`` -> ``McpUpstream``. Raises
    ``argparse.ArgumentTypeError``."""
    label, sep, target = text.partition("=")
    if not sep or not target.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=URL or NAME=COMMAND")
    name, _, prefix = label.partition(":")
    try:
        if target.startswith(("http://", "https://")):
            return McpUpstream(name=name, url=target, tool_prefix=prefix)
        return McpUpstream(name=name, command=shlex.split(target), tool_prefix=prefix)
    except (ValidationError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"upstream {name!r}: {exc}") from None


def _run(args: argparse.Namespace) -> int:
    import anyio

    from app import build_deps
    from app.logs import configure_logging
    from app.mcp.serving import serve_http, serve_stdio, split_bind
    from app.mcp.upstreams import AmbiguousTools

    settings = load_settings()
    configure_logging(settings.log_level)
    upstreams = [*settings.mcp_upstreams, *(args.upstream or [])]
    if len({u.name for u in upstreams}) != len(upstreams):
        print("toolgate mcp: two upstreams have the same name", file=sys.stderr)
        return 2
    if not upstreams:
        print("toolgate mcp: no upstream (set TOOLGATE_MCP_UPSTREAMS or pass --upstream)", file=sys.stderr)
        return 2
    bind = args.bind or settings.mcp_bind
    if args.transport == "stdio" and settings.mcp_stdio_token is None:
        print("toolgate mcp: --transport stdio needs TOOLGATE_MCP_STDIO_TOKEN (the client's JWT)", file=sys.stderr)
        return 2
    try:
        split_bind(bind)
    except ValueError as exc:
        print(f"toolgate mcp: {exc}", file=sys.stderr)
        return 2
    deps = build_deps(settings)
    try:
        if args.transport == "stdio":
            anyio.run(serve_stdio, deps, upstreams)
        else:
            anyio.run(serve_http, deps, upstreams, bind)
    except KeyboardInterrupt:
        pass
    except AmbiguousTools as exc:
        print(f"toolgate mcp: {exc}", file=sys.stderr)
        return 2
    finally:
        deps.decision_log.close()
        deps.redis.close()
    return 0


def add_mcp_command(sub: Any) -> None:
    """Register ``toolgate mcp`` on the CLI's subparsers."""
    mcp = sub.add_parser("mcp", help="run the MCP gateway in front of upstream MCP servers")
    mcp.add_argument("--transport", choices=["http", "stdio"], default="http",
                     help="serve Streamable HTTP (default) or one client over stdin/stdout")
    mcp.add_argument("--bind", help="HOST:PORT for http (default TOOLGATE_MCP_BIND or 127.0.0.1:8090)")
    mcp.add_argument("--upstream", action="append", type=parse_upstream, metavar="NAME[:PREFIX]=COMMAND|URL",
                     help="an upstream MCP server (its tools listed under PREFIX + their name); repeat for several")
    mcp.set_defaults(func=_run)
