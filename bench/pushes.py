"""Another tenant's decide latency while one tenant pushes its data: ``python -m bench.pushes``.

Starts the bench gateway (``bench.stack``: Redis and gunicorn on loopback, production settings)
with tenant data pushes on (an overlay directory in the work directory, workers polling the
policy every ``--poll`` seconds, no push rate limit in the way). Tenant ``acme`` (``bench.workloads``'
``allow`` call) sends decide calls one after another from ``--clients`` threads: first for
``--seconds`` seconds alone, then while tenant ``bank-demo``'s operator pushes its data
``--pushes`` times, one every ``--every`` seconds (each push adds a payee, so each one makes
a new policy revision that every worker loads).

Output: one JSON document on stdout, ``{"quiet": {...}, "pushing": {...}, "pushes": {...}}``:
per phase the 200 answers' count, p50, p99 and max in ms and the others by status and error code; for the pushes
their count, statuses and p50 in ms.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

from bench.stack import PROJECT_ROOT, Stack
from bench.workloads import decide_body, mint_token

PUSHER_TENANT = "bank-demo"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(latencies_ms: list[float], failed: list[str]) -> dict[str, Any]:
    failures = dict(collections.Counter(failed))
    if not latencies_ms:
        return {"calls": 0, "failures": failures}
    return {
        "calls": len(latencies_ms), "failures": failures,
        "p50_ms": round(statistics.median(latencies_ms), 1), "p99_ms": round(_percentile(latencies_ms, 0.99), 1),
        "max_ms": round(max(latencies_ms), 1),
    }


def _decide_until(url: str, token: str, stop: threading.Event, out: list[float], failed: list[str]) -> None:
    """Send ``allow`` decide calls one after another until ``stop``; latencies (ms) into ``out``."""
    http = requests.Session()
    http.trust_env = False
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = decide_body("allow")
    while not stop.is_set():
        started = time.perf_counter()
        resp = http.post(f"{url}/v1/decide", data=body, headers=headers, timeout=30)
        elapsed = (time.perf_counter() - started) * 1000
        if resp.status_code == 200:
            out.append(elapsed)
        else:
            failed.append(f"{resp.status_code} {resp.json().get('error', {}).get('code', '-')}")


def _phase(stack: Stack, token: str, clients: int, during: Any) -> dict[str, Any]:
    """Run ``clients`` decide loops while ``during()`` runs; their summary."""
    stop = threading.Event()
    latencies: list[float] = []
    failed: list[str] = []
    threads = [threading.Thread(target=_decide_until, args=(stack.url, token, stop, latencies, failed))
               for _ in range(clients)]
    for thread in threads:
        thread.start()
    try:
        during()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return _summary(latencies, failed)


def _push_loop(stack: Stack, count: int, every_s: float, statuses: list[int], times_ms: list[float]) -> None:
    """``count`` pushes of ``bank-demo``'s data, each with one more payee, one every ``every_s``."""
    document = json.loads((PROJECT_ROOT / "policies" / "tenants" / PUSHER_TENANT / "data.json").read_text())
    token = mint_token(stack.hs256_secret, "operator", tenant=PUSHER_TENANT, sub="bench-operator")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    payees = document["counterparties"]["payees"]
    for i in range(count):
        payees.append(f"DE89370400440532013{i:03d}")
        started = time.perf_counter()
        resp = stack.http.put(f"{stack.url}/v1/policy/tenants/{PUSHER_TENANT}/data", json=document,
                              headers=headers, timeout=60)
        times_ms.append((time.perf_counter() - started) * 1000)
        statuses.append(resp.status_code)
        time.sleep(every_s)


def run(workdir: Path, *, seconds: float, pushes: int, every_s: float, clients: int, poll_s: float,
        workers: int, threads: int) -> dict[str, Any]:
    extra = {
        "TOOLGATE_TENANT_DATA_DIR": str(workdir / "tenant-data"),
        "TOOLGATE_POLICY_POLL_INTERVAL_S": str(poll_s),
        "TOOLGATE_TENANT_DATA_PUSH_RATE": "1000000/1s",
    }
    with Stack(workdir, workers=workers, threads=threads, extra_env=extra) as stack:
        token = mint_token(stack.hs256_secret, "support_agent")
        quiet = _phase(stack, token, clients, lambda: time.sleep(seconds))
        statuses: list[int] = []
        push_ms: list[float] = []
        pushing = _phase(stack, token, clients, lambda: _push_loop(stack, pushes, every_s, statuses, push_ms))
    return {
        "quiet": quiet, "pushing": pushing,
        "pushes": {"count": len(statuses), "statuses": sorted(set(statuses)),
                   "p50_ms": round(statistics.median(push_ms), 1) if push_ms else None},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pushes", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="quiet phase length (default 10)")
    parser.add_argument("--pushes", type=int, default=20, help="pushes of tenant data (default 20)")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between pushes (default 0.5)")
    parser.add_argument("--clients", type=int, default=2, help="threads sending decide calls (default 2)")
    parser.add_argument("--poll", type=float, default=1.0, help="TOOLGATE_POLICY_POLL_INTERVAL_S (default 1)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolgate-pushes-") as tmp:
        result = run(Path(tmp), seconds=args.seconds, pushes=args.pushes, every_s=args.every,
                     clients=args.clients, poll_s=args.poll, workers=args.workers, threads=args.threads)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
