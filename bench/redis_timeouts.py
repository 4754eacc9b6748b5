"""The gateway's Redis round trips under the mix at saturation: ``python -m bench.redis_timeouts``.

Starts the bench gateway (``bench.stack``: Redis and gunicorn on loopback, production settings)
with ``TOOLGATE_REDIS_SOCKET_TIMEOUT_MS=--timeout-ms``, seeds the replay keys, warms up with the
mix for ``--warmup`` seconds, then runs the mix (``bench.workloads``) at full speed from one
wrk process (``--connections``) for ``--seconds`` seconds, and reads the gateway's
``toolgate_redis_command_seconds`` histogram before and after that run.

Output: one JSON document on stdout: ``{"timeout_ms", "mix": {"requests", "rps", "p50_ms",
"p99_ms", "503"}, "redis": {"round_trips", "over_ms": {"<ms>": n}, "per_million_over_ms":
{"<ms>": n}}}``: the round trips of the measured run, how many took longer than each bucket
bound (5 ms to 1 s), and that count per million round trips. A round trip over the timeout
is a ``503`` of the call that made it, so ``over_ms`` at a candidate timeout is what that
timeout would have turned into ``503``s on this machine under this load.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.stack import Stack
from bench.workloads import mix_config, seed_replays
from bench.wrk import WrkRun, build_script, ensure_wrk, run_wrk

METRIC = "toolgate_redis_command_seconds"
#: The bucket bounds reported, in ms (a subset of the histogram's).
BOUNDS_MS = (5, 10, 25, 50, 100, 150, 250, 500, 1000)


def round_trip_buckets(metrics_text: str) -> dict[float, float]:
    """``{upper bound in s: cumulative count}`` of ``toolgate_redis_command_seconds``, summed
    over the workers (``+Inf`` is ``float("inf")``)."""
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == METRIC + "_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return buckets


def over_bounds(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """The round trips between two scrapes: their count and how many exceeded each bound."""
    total = after.get(float("inf"), 0.0) - before.get(float("inf"), 0.0)
    over = {}
    for bound_ms in BOUNDS_MS:
        bound = bound_ms / 1000
        within = after.get(bound, 0.0) - before.get(bound, 0.0)
        over[str(bound_ms)] = int(total - within)
    return {
        "round_trips": int(total),
        "over_ms": over,
        "per_million_over_ms": {k: round(v * 1e6 / total, 1) if total else None for k, v in over.items()},
    }


def _mix(stack: Stack, workdir: Path, replay_keys: list[str], seconds: float, connections: int) -> WrkRun:
    script = build_script("mix", mix_config(stack.hs256_secret, replay_keys), workdir)
    return run_wrk(stack.url, script, duration_s=seconds, connections=connections)


def run(workdir: Path, *, timeout_ms: int, seconds: float, warmup_s: float, connections: int,
        workers: int, threads: int) -> dict[str, Any]:
    ensure_wrk()
    extra = {"TOOLGATE_REDIS_SOCKET_TIMEOUT_MS": str(timeout_ms)}
    with Stack(workdir, workers=workers, threads=threads, extra_env=extra) as stack:
        replay_keys, _ = seed_replays(stack.http, stack.url, stack.hs256_secret)
        _mix(stack, workdir, replay_keys, warmup_s, connections)
        before = round_trip_buckets(stack.metrics_text())
        mix = _mix(stack, workdir, replay_keys, seconds, connections)
        after = round_trip_buckets(stack.metrics_text())
    return {
        "timeout_ms": timeout_ms,
        "mix": {
            "requests": mix.requests, "rps": round(mix.rps, 1),
            "p50_ms": round(mix.latency_ms(50) or 0, 1), "p99_ms": round(mix.latency_ms(99) or 0, 1),
            "503": mix.count(status=503),
        },
        "redis": over_bounds(before, after),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_timeouts", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-ms", type=int, default=2000,
                        help="TOOLGATE_REDIS_SOCKET_TIMEOUT_MS of the gateway (default 2000: long enough to see the tail)")
    parser.add_argument("--seconds", type=float, default=30.0, help="the measured run (default 30)")
    parser.add_argument("--warmup", type=float, default=5.0, help="the mix before it, not counted (default 5)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (default 16, as python -m bench)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolgate-redis-timeouts-") as tmp:
        result = run(Path(tmp), timeout_ms=args.timeout_ms, seconds=args.seconds, warmup_s=args.warmup,
                     connections=args.connections, workers=args.workers, threads=args.threads)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
