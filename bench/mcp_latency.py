"""What ``toolgate mcp`` adds to a tool call: ``python -m bench.mcp_latency [--calls 200]``.

One MCP SDK client calls the test upstream (``tests/mcp/upstream_server.py`` over Streamable
HTTP on loopback) ``--calls`` times, one call at a time, directly and then through a
``toolgate mcp`` in front of the same upstream (a Redis of its own, the embedded engine with the
test policy ``tests/mcp/policies``, a SQLite decision log), on both protocol generations
(``legacy``: the initialize handshake, 2025-11-25; ``2026-07-28``). The calls are the read-only
``read_note`` (allowed; no key) and, through the gateway, ``add_note`` with a password (denied:
it must cause no upstream traffic, checked against the upstream's log). Each series starts after
one listing and one warm-up call.

Output: a Markdown table of the wall time per call (median and p99, ms), as docs/mcp.md shows
it, and a line per mode with the upstream's listings and executions seen during the series.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from bench.loopback import RedisServer, free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
SECRET = "mcp-latency-bench-hs256-secret-of-32-bytes-or-more"
MODES = ("legacy", "2026-07-28")


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def _series(url: str, token: str | None, mode: str, calls: int, name: str, arguments: dict[str, Any]) -> list[float]:
    """Wall ms of ``calls`` calls of ``name`` by one client session (after a listing and a warm-up call)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, mode=mode) as client,
    ):
        await client.list_tools()
        await client.call_tool(name, arguments)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            await client.call_tool(name, arguments)
            times.append((time.perf_counter() - start) * 1000)
        return times


def _counts(log: Path) -> tuple[int, int]:
    """(listings, executions) the upstream logged so far."""
    entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return sum(1 for e in entries if e.get("listed")), sum(1 for e in entries if "tool" in e)


def _start(command: list[str], env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out)
    wait_for_port(port, timeout_s=60)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def _measure(calls: int, workdir: Path, redis_url: str) -> str:
    executions = workdir / "executions.jsonl"
    upstream_port, gateway_port = free_port(), free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    upstream = _start([sys.executable, "-m", "tests.mcp.upstream_server", "--http", str(upstream_port)],
                      {**base, "NOTES_EXECUTION_LOG": str(executions)}, upstream_port, workdir / "upstream.log")
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    settings = {
        "TOOLGATE_ENV": "development", "TOOLGATE_JWT_ALGORITHMS": "HS256", "TOOLGATE_JWT_HS256_SECRET": SECRET,
        "TOOLGATE_POLICY_DIR": str(ROOT / "tests/mcp/policies"), "TOOLGATE_CONTRACTS_DIR": str(ROOT / "tests/mcp/contracts"),
        "TOOLGATE_REDIS_URL": redis_url, "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
        "TOOLGATE_APPROVAL_KEYS": "k-bench:" + "b" * 32, "TOOLGATE_LOG_LEVEL": "WARNING",
        "TOOLGATE_MCP_UPSTREAMS": json.dumps([{"name": "notes", "url": upstream_url}]),
    }
    gateway = _start([sys.executable, "-m", "app.cli", "mcp", "--bind", f"127.0.0.1:{gateway_port}"],
                     {**base, **settings}, gateway_port, workdir / "gateway.log")
    gateway_url = f"http://127.0.0.1:{gateway_port}/mcp"
    values = {k.removeprefix("TOOLGATE_").lower(): v for k, v in settings.items() if k != "TOOLGATE_MCP_UPSTREAMS"}
    token = mint_dev_token(Settings.model_validate(values), sub="bench", tenant="acme", roles=["agent"])
    read = ("read_note", {"name": "welcome"})
    denied = ("add_note", {"name": "creds", "text": "the password is 1234"})
    rows: list[str] = []
    traffic: list[str] = []
    try:
        for mode in MODES:
            series = [
                ("direct, read_note", upstream_url, None, read),
                ("through toolgate, read_note (allow)", gateway_url, token, read),
                ("through toolgate, add_note (deny)", gateway_url, token, denied),
            ]
            for label, url, bearer, (name, arguments) in series:
                before = _counts(executions)
                times = await _series(url, bearer, mode, calls, name, arguments)
                after = _counts(executions)
                rows.append(f"| {mode} | {label} | {statistics.median(times):.2f} | {_percentile(times, 0.99):.2f} |")
                traffic.append(f"{mode}, {label}: upstream listings +{after[0] - before[0]}, executions +{after[1] - before[1]}")
    finally:
        _stop(gateway)
        _stop(upstream)
    table = ["| protocol | client | median ms | p99 ms |", "|---|---|---|---|", *rows]
    return "\n".join([f"{calls} calls per row", "", *table, "", *traffic])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolgate-mcp-latency-") as tmp:
        workdir = Path(tmp)
        redis = RedisServer(workdir).start()
        try:
            print(asyncio.run(_measure(args.calls, workdir, redis.url)))
        finally:
            redis.stop()


if __name__ == "__main__":
    main()
