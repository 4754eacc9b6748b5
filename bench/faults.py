"""Load and fault runs (issue 6): bounded in time, loopback only, each prints what it checks.

    python -m bench.faults soak          [--duration 600] [--fraction 0.7]
    python -m bench.faults kill-worker   [--duration 30]  [--fraction 0.7]
    python -m bench.faults redis-outage  [--duration 30]  [--fraction 0.7] [--outage 5] [--mode stop|pause]

Each run starts its own stack (``bench.stack``; idempotency lease shortened to
``--lease`` seconds, default 5, so a lost reservation expires within the run), measures the
mix's peak for ``--peak-duration`` seconds (or takes ``--rate``), then drives the mix paced at
``--fraction`` of that peak with a per-second timeline (``bench/lua/mix.lua``) while the fault
happens. Exit status 0 when every check passed, 1 otherwise.

Checks:

- soak: no unexpected responses; p99 of the last tenth of the run within 1.5x (+1 ms) of the
  first tenth (after a tenth of warm-up); worker RSS sampled every ``duration/10`` s grows by at
  most 5 MiB from the second sample to the last.
- kill-worker (SIGKILL one worker at a third of the run): every failure is a connection-level
  failure of a request in flight (a closed socket or a timeout, no 5xx, no wrong decision), at
  most connections + threads of them; the last third has no failure; the master replaced the
  worker; after the lease, no idempotency record is ``processing`` with a live lease; no
  request id is recorded twice in the decision log and ``toolgate audit verify`` passes.
- redis-outage (Redis stopped, or paused with ``--mode pause``, for ``--outage`` s at a third
  of the run): every decide call answers 503 during the outage (whole seconds from its third
  on; the session, ``input.session``, lives in Redis, so read-only calls fail closed too);
  within 10 s of Redis' return a whole second has only 200s for the mutating, approval and
  read-only kinds and no later one has anything else (``RECOVERY_KINDS``);
  the same gateway processes (no restart).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

from bench.report import summarize
from bench.run import Bench
from bench.stack import PROJECT_ROOT, Stack, rss_mib
from bench.workloads import mix_config, unexpected
from bench.wrk import WrkRun, merge_hists, percentile_us, start_wrk, wait_wrk

MUTATING = ("mutating", "approval", "replay")
#: Kinds whose recovery is checked after a Redis outage. A stopped Redis comes back empty, so
#: the first replay call of a completed key claims it afresh and later ones get 409 (in flight):
#: correct behaviour, reported but not counted as a failure.
RECOVERY_KINDS = ("mutating", "approval", "allow", "deny")


@dataclass
class Checks:
    """Named pass/fail results, printed as they are made."""

    results: list[tuple[str, bool, str]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        """Record and print one check."""
        self.results.append((name, ok, detail))
        print(f"[{'PASS' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}", flush=True)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(ok for _, ok, _ in self.results)


def seconds_between(run: WrkRun, start: float, end: float) -> list[int]:
    """The whole timeline seconds of ``run`` inside ``[start, end)`` (``time.monotonic()`` values)."""
    return [s for s in sorted(run.timeline) if start <= s and s + 1 <= end]


def window_counts(run: WrkRun, seconds: Sequence[int], kinds: Sequence[str] | None = None) -> dict[int, int]:
    """Responses by HTTP status over ``seconds`` (optionally only ``kinds``)."""
    out: dict[int, int] = {}
    for second in seconds:
        for (kind, status), n in run.timeline[second]["counts"].items():
            if kinds is None or kind in kinds:
                out[status] = out.get(status, 0) + n
    return out


def window_p99_ms(run: WrkRun, seconds: Sequence[int]) -> float | None:
    """p99 latency in ms over ``seconds`` of the timeline."""
    value = percentile_us(merge_hists(run.timeline[s]["hist"] for s in seconds), 99)
    return None if value is None else value / 1000


class FaultRun:
    """One stack, a paced background load, and the fault of one scenario."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="toolgate-faults-"))
        self.stack = Stack(self.workdir / "stack", workers=args.workers, threads=args.threads,
                           extra_env={"TOOLGATE_IDEMPOTENCY_LEASE_S": str(args.lease)})
        self.bench = Bench(self.stack, self.workdir, connections=args.connections, wrk_threads=1)
        self.checks = Checks()

    def rate(self) -> float:
        """``--rate``, else ``--fraction`` of the mix's peak measured now."""
        if self.args.rate:
            return self.args.rate
        peak = self.bench.mix(self.args.peak_duration).rps
        print(f"mix peak {peak:.0f} req/s; load at {self.args.fraction:.0%}: {peak * self.args.fraction:.0f} req/s")
        return peak * self.args.fraction

    def load(self, rate: float, duration_s: float, during: Callable[[float], None]) -> WrkRun:
        """Run the paced mix for ``duration_s`` while ``during(start_monotonic)`` injects the fault."""
        config = mix_config(self.stack.hs256_secret, self.bench.replay_keys, rate=rate, timeline=True)
        script = self.bench.script("mix", config, "fault-load")
        start = time.monotonic()
        proc = start_wrk(self.stack.url, script, duration_s=duration_s, connections=self.args.connections)
        during(start)
        return wait_wrk(proc, duration_s + 60)

    def run(self, scenario: Callable[[FaultRun], None]) -> int:
        """Start the stack, run ``scenario``, stop; returns the exit status."""
        try:
            self.stack.start()
            self.bench.seed()
            print(f"gateway {self.stack.url} workers {self.stack.worker_pids()} features {self.bench.features}")
            scenario(self)
        finally:
            self.stack.stop()
            if not self.args.keep:
                shutil.rmtree(self.workdir, ignore_errors=True)
        print("all checks passed" if self.checks.ok else "SOME CHECKS FAILED")
        return 0 if self.checks.ok else 1


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


def soak(fr: FaultRun) -> None:
    """The mix at ``--fraction`` of peak for ``--duration`` s: errors, latency drift, memory."""
    duration = fr.args.duration
    samples: list[tuple[float, dict[int, float]]] = []

    def sample_memory(start: float) -> None:
        for i in range(1, 11):
            _sleep_until(start + duration * i / 10 - 0.5)
            samples.append((time.monotonic() - start, {p: rss_mib(p) for p in fr.stack.worker_pids()}))

    run = fr.load(fr.rate(), duration, sample_memory)
    mix = summarize(run, check_kinds=True)
    fr.checks.check("no errors", mix["errors"] == 0, f"{mix['requests']} requests, unexpected {mix['unexpected']}")
    seconds = sorted(run.timeline)
    tenth = max(1, len(seconds) // 10)
    first, last = window_p99_ms(run, seconds[tenth:2 * tenth]), window_p99_ms(run, seconds[-tenth:])
    fr.checks.check("no latency drift", first is not None and last is not None and last <= 1.5 * first + 1.0,
                    f"p99 {first} ms early vs {last} ms late")
    if len(samples) >= 2:
        early, late = samples[1][1], samples[-1][1]
        growth = max((late[p] - early[p] for p in set(early) & set(late)), default=0.0)
        fr.checks.check("memory flat", growth <= 5.0, f"RSS {early} -> {late} MiB (growth {growth:.1f} MiB)")


def _reservations(stack: Stack) -> tuple[int, int]:
    """(records in state processing with a live lease, records in processing without one)."""
    client = redis.Redis.from_url(stack.redis_url, socket_timeout=5)
    live = expired = 0
    for key in client.scan_iter(match="toolgate:idem:*:record", count=1000):
        if cast(bytes | None, client.hget(key, "state")) == b"processing":  # sync client: bytes
            lease = key[: -len(b"record")] + b"lease"
            if client.exists(lease):
                live += 1
            else:
                expired += 1
    client.close()
    return live, expired


def _audit_checks(fr: FaultRun) -> None:
    db = sqlite3.connect(fr.stack.audit_path)
    twice = db.execute(
        "SELECT COUNT(*) FROM (SELECT request_id FROM decision_records WHERE event = 'decide' "
        "GROUP BY request_id HAVING COUNT(*) > 1)"
    ).fetchone()[0]
    db.close()
    fr.checks.check("no decision recorded twice", twice == 0, f"{twice} request ids with more than one decide record")
    verify = subprocess.run([sys.executable, "-m", "app.cli", "audit", "verify"], cwd=PROJECT_ROOT,
                            env=fr.stack.env(), capture_output=True, text=True, timeout=300)
    fr.checks.check("decision log chain verifies", verify.returncode == 0, (verify.stdout or verify.stderr).strip()[-200:])


def kill_worker(fr: FaultRun) -> None:
    """SIGKILL one worker at a third of the run; see the module docstring for the checks."""
    duration = fr.args.duration
    victim: dict[str, Any] = {}

    def kill(start: float) -> None:
        _sleep_until(start + duration / 3)
        victim["pid"] = fr.stack.worker_pids()[0]
        victim["at"] = time.monotonic()
        fr.stack.kill_worker(victim["pid"])
        print(f"killed worker {victim['pid']} at {victim['at'] - start:.1f} s")

    run = fr.load(fr.rate(), duration, kill)
    bad = unexpected(run.responses)
    sockets = sum(v for k, v in run.socket_errors.items() if k != "status")
    statuses = {k: v for k, v in bad.items() if not k.split(":")[1].startswith("2")}
    wrong = {k: v for k, v in bad.items() if k not in statuses}
    limit = fr.args.connections + fr.args.threads
    fr.checks.check("failures are in-flight connection failures only",
                    not statuses and not wrong and sockets <= limit,
                    f"socket errors {run.socket_errors}, unexpected responses {bad}, limit {limit}")
    tail = seconds_between(run, victim["at"] + duration / 3, victim["at"] + duration)
    tail_bad = {s: n for s, n in window_counts(run, tail).items() if s not in (200, 422)}
    fr.checks.check("the last third has no failure", not tail_bad, f"non-2xx/422 in the last third: {tail_bad}")
    workers = fr.stack.worker_pids()
    fr.checks.check("the master replaced the worker", victim["pid"] not in workers and len(workers) == fr.args.workers,
                    f"workers now {workers}")
    time.sleep(fr.args.lease + 1)
    live, expired = _reservations(fr.stack)
    fr.checks.check("no reservation stuck beyond its lease", live == 0,
                    f"{live} processing with a live lease; {expired} lost in flight, now outcome unknown")
    _audit_checks(fr)


def redis_outage(fr: FaultRun) -> None:
    """Stop (or pause) Redis for ``--outage`` s at a third of the run; see the module docstring."""
    duration, outage = fr.args.duration, fr.args.outage
    window: dict[str, float] = {}
    pids_before = fr.stack.worker_pids()

    def outage_now(start: float) -> None:
        _sleep_until(start + duration / 3)
        window["down"] = time.monotonic()
        fr.stack.pause_redis() if fr.args.mode == "pause" else fr.stack.stop_redis()
        time.sleep(outage)
        fr.stack.resume_redis() if fr.args.mode == "pause" else fr.stack.start_redis()
        window["up"] = time.monotonic()
        print(f"Redis {fr.args.mode} from {window['down'] - start:.1f} s to {window['up'] - start:.1f} s")

    run = fr.load(fr.rate(), duration, outage_now)
    # Skip the first 2 s of the outage: calls that passed Redis before it went away may still be
    # answered then (the tail latency of the SQLite decision log at FULL durability is ~1 s).
    during = window_counts(run, seconds_between(run, window["down"] + 2, window["up"]), MUTATING)
    fr.checks.check("mutating calls get 503 while Redis is down", during.get(503, 0) > 0 and during.get(200, 0) == 0,
                    f"mutating responses during the outage: {during}")
    recovered = next((s for s in seconds_between(run, window["up"], window["up"] + duration)
                      if set(window_counts(run, [s], RECOVERY_KINDS)) == {200}), None)
    after = window_counts(run, seconds_between(run, recovered, window["up"] + duration), RECOVERY_KINDS) if recovered else {}
    fr.checks.check("mutating calls recover within 10 s, without errors after",
                    recovered is not None and recovered - window["up"] <= 10 and set(after) == {200},
                    f"first all-200 second {None if recovered is None else round(recovered - window['up'], 1)} s "
                    f"after Redis returned; mutating responses from then on: {after}; after the return, by kind: "
                    f"{ {k: window_counts(run, seconds_between(run, window['up'], window['up'] + duration), (k,)) for k in MUTATING} }")
    # Read-only calls fail closed too: without Redis there is no input.session, so no decision.
    reads = window_counts(run, seconds_between(run, window["down"] + 2, window["up"]), ("allow", "deny"))
    fr.checks.check("read-only calls get 503 while Redis is down", set(reads) <= {503},
                    f"read-only responses during: {reads}")
    fr.checks.check("no restart", fr.stack.worker_pids() == pids_before, f"workers {pids_before} -> {fr.stack.worker_pids()}")


SCENARIOS = {"soak": (soak, 600.0), "kill-worker": (kill_worker, 30.0), "redis-outage": (redis_outage, 30.0)}


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m bench.faults``."""
    p = argparse.ArgumentParser(prog="python -m bench.faults", description="Load and fault runs on loopback.")
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--duration", type=float, help="seconds of load (soak 600, others 30)")
    p.add_argument("--fraction", type=float, default=0.7, help="fraction of the measured peak (default 0.7)")
    p.add_argument("--rate", type=float, help="requests/s instead of measuring the peak")
    p.add_argument("--peak-duration", type=float, default=10.0, help="seconds to measure the peak (default 10)")
    p.add_argument("--outage", type=float, default=5.0, help="redis-outage: seconds without Redis (default 5)")
    p.add_argument("--mode", choices=("stop", "pause"), default="stop", help="redis-outage: stop or SIGSTOP Redis")
    p.add_argument("--lease", type=int, default=5, help="idempotency lease in seconds (default 5)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one scenario; exit 0 when every check passed, 1 when one failed, 2 on setup errors."""
    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop Redis, gunicorn and wrk.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scenario, default_duration = SCENARIOS[args.scenario]
    args.duration = args.duration or default_duration
    try:
        return FaultRun(args).run(scenario)
    except (RuntimeError, OSError) as exc:
        print(f"bench.faults: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
