"""The benchmark run: ``python -m bench [--duration SECONDS] [--out FILE.json]``.

Order of work (each workload lasts ``--duration`` seconds, default 30):

1. (d) the engine alone, in-process, before any server runs (no CPU contention);
2. start Redis and the gateway (``bench.stack``: gunicorn gthread, production settings),
   seed the replay keys, warm up with the mix;
3. the CPU per phase of one decide call of each kind (``bench.phases``, in its own process
   against the same Redis, while the gateway idles);
4. (a) ``GET /healthz``, (b) the read-only allow decision, (c) the mix at full speed, then the
   mix paced at half of (c)'s rate for ``p99_ms_half_load``; for each, the workers' CPU per
   request (``utime + stime`` of every worker from /proc, over the workload);
5. memory: more of the mix until the gateway's ``toolgate_decisions_total`` reaches 50k, sample
   each worker's RSS, again until 100k, sample again; stop the gateway;
6. ``--variant``s: the mix against a gateway with the run's settings (``baseline``), then one
   per variant;
7. the anchors (unless ``--no-anchors``): a bare ``opa run --server`` asked the mix's policy
   queries, then the mix through a gateway with ``TOOLGATE_ENGINE=opa`` using it as sidecar;
8. write the JSON (``--out``) and print the table.

Load comes from one wrk process on loopback (``--wrk-threads``, ``--connections``). wrk and the
gateway share the machine's cores, as they would in any single-host measurement; the ratios
compare workloads measured the same way in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.anchors import OpaServer, bare_opa_config, sidecar_env
from bench.engine import run_engine_bench
from bench.phases import run_in_subprocess as run_phases
from bench.report import build_results, format_table, summarize
from bench.stack import Stack, cpu_seconds, metric_sum, rss_mib
from bench.workloads import ceiling_config, decide_config, mix_config, seed_replays
from bench.wrk import WrkRun, build_script, ensure_wrk, run_wrk


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def decisions_so_far(stack: Stack) -> int:
    """The gateway's own count of decisions (sum of ``toolgate_decisions_total``)."""
    return int(metric_sum(stack.metrics_text(), "toolgate_decisions_total"))


def worker_rss(stack: Stack) -> dict[int, float]:
    """RSS in MiB of every live worker, by pid."""
    return {pid: rss_mib(pid) for pid in stack.worker_pids()}


class Bench:
    """One benchmark run against a started ``Stack``; each method is one workload."""

    def __init__(self, stack: Stack, workdir: Path, *, connections: int, wrk_threads: int) -> None:
        self.stack = stack
        self.workdir = workdir
        self.connections = connections
        self.wrk_threads = wrk_threads
        self.replay_keys: list[str] = []
        self.features: dict[str, bool] = {}
        #: Worker CPU seconds (all workers, ``utime + stime``) of each workload run, by name.
        self.worker_cpu_s: dict[str, float] = {}

    def script(self, script: str, config: dict[str, Any], name: str) -> Path:
        """Write the wrk script ``name`` (``bench/lua/<script>.lua`` with ``config``)."""
        directory = self.workdir / name
        directory.mkdir(exist_ok=True)
        return build_script(script, config, directory)

    def _wrk(self, script: str, config: dict[str, Any], name: str, duration_s: float) -> WrkRun:
        path = self.script(script, config, name)
        before = cpu_seconds(self.stack.worker_pids())
        run = run_wrk(self.stack.url, path, duration_s=duration_s, connections=self.connections,
                      threads=self.wrk_threads)
        after = cpu_seconds(list(before))
        self.worker_cpu_s[name] = sum(after[pid] - before[pid] for pid in after)
        return run

    def measured(self, run: WrkRun, name: str, *, check_kinds: bool = False) -> dict[str, Any]:
        """``summarize(run)`` plus ``worker_cpu_ms_per_call``: the CPU of every worker over the
        workload ``name`` divided by its requests (workers that exited meanwhile not counted)."""
        summary = summarize(run, check_kinds=check_kinds)
        cpu_s = self.worker_cpu_s.get(name)
        summary["worker_cpu_ms_per_call"] = round(cpu_s * 1000 / run.requests, 3) if cpu_s is not None and run.requests else None
        return summary

    def seed(self) -> None:
        """Complete the replay keys; learn which features the gateway has."""
        self.replay_keys, self.features = seed_replays(self.stack.http, self.stack.url, self.stack.hs256_secret)

    def ceiling(self, duration_s: float) -> WrkRun:
        """(a) ``GET /healthz``."""
        return self._wrk("fixed", ceiling_config(), "ceiling", duration_s)

    def decide(self, duration_s: float) -> WrkRun:
        """(b) the read-only allow decision."""
        return self._wrk("mix", decide_config(self.stack.hs256_secret, threads=self.wrk_threads), "decide", duration_s)

    def mix(self, duration_s: float, *, rate: float = 0.0, timeline: bool = False, name: str = "mix") -> WrkRun:
        """(c) the mix, at full speed or paced to ``rate`` requests/s."""
        config = mix_config(self.stack.hs256_secret, self.replay_keys, rate=rate, threads=self.wrk_threads,
                            timeline=timeline)
        return self._wrk("mix", config, name, duration_s)

    def mix_until(self, decisions: int, mix_rps: float, *, max_s: float = 900.0) -> int:
        """Run the mix until the gateway counted ``decisions``; returns the count reached."""
        deadline = time.monotonic() + max_s
        count = decisions_so_far(self.stack)
        while count < decisions and time.monotonic() < deadline:
            # About 95 % of mix requests are decisions; overshoot a little rather than loop.
            needed_s = (decisions - count) / max(mix_rps * 0.9, 1.0) + 1
            self.mix(min(needed_s, 300.0, deadline - time.monotonic()), name="memory")
            count = decisions_so_far(self.stack)
        return count


def run_anchors(args: argparse.Namespace, workdir: Path, duration: float, mix: dict[str, Any],
                decide: dict[str, Any]) -> dict[str, Any]:
    """The anchors (``bench.anchors``), after the embedded gateway stopped: a bare OPA server
    asked the mix's policy queries, then the mix through a gateway with ``TOOLGATE_ENGINE=opa``
    using that server as its sidecar. ``mix`` / ``decide``: the embedded gateway's (c) and (b),
    for the ratios."""
    opa = OpaServer(workdir / "opa").start()
    try:
        script = build_script("rotate", bare_opa_config(), _workdir_for(workdir, "bare-opa"))
        before = cpu_seconds([opa.pid])
        run = run_wrk(opa.url, script, duration_s=duration, connections=args.connections, threads=args.wrk_threads)
        opa_cpu = cpu_seconds([opa.pid])[opa.pid] - before[opa.pid]
        bare = summarize(run)
        bare["opa_cpu_ms_per_call"] = round(opa_cpu * 1000 / run.requests, 3) if run.requests else None
        bare["decisions"] = {f"{status}:{decision}": n for (_, status, decision), n in run.responses.items()}
        _log(f"    bare OPA {bare['rps']} req/s; the mix with TOOLGATE_ENGINE=opa")
        stack = Stack(workdir / "sidecar-stack", workers=args.workers, threads=args.threads,
                      worker_connections=args.worker_connections,
                      extra_env={"TOOLGATE_AUDIT_SQLITE_SYNCHRONOUS": args.audit_synchronous, **sidecar_env(opa.url)}).start()
        try:
            bench = Bench(stack, workdir / "sidecar", connections=args.connections, wrk_threads=args.wrk_threads)
            (workdir / "sidecar").mkdir(exist_ok=True)
            bench.seed()
            bench.mix(min(5.0, duration), name="warmup")
            before = cpu_seconds([opa.pid])
            sidecar = bench.measured(bench.mix(duration), "mix", check_kinds=True)
            requests_n = sidecar["requests"]
            opa_cpu = cpu_seconds([opa.pid])[opa.pid] - before[opa.pid]
            sidecar["opa_cpu_ms_per_call"] = round(opa_cpu * 1000 / requests_n, 3) if requests_n else None
        finally:
            stack.stop()
    finally:
        opa.stop()

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    return {
        "bare_opa": bare,
        "sidecar_mix": sidecar,
        "ratio_sidecar_mix_to_embedded_mix": ratio(sidecar["rps"], mix["rps"]),
        "ratio_embedded_decide_to_bare_opa": ratio(decide["rps"], bare["rps"]),
        "ratio_embedded_mix_to_bare_opa": ratio(mix["rps"], bare["rps"]),
    }


@dataclass(frozen=True)
class Variant:
    """A gateway variant of ``--variant``: gthreads and workers (None: the run's) and
    environment variables of the gateway."""

    name: str
    threads: int | None
    workers: int | None
    env: dict[str, str]


def parse_variant(text: str) -> Variant:
    """``NAME:KEY=VALUE,...`` -> its ``Variant``. The keys ``threads`` and ``workers`` set gthreads
    per worker and gunicorn workers; every other key is an environment variable of the gateway
    (``TOOLGATE_ENGINE_GO_MAX_PROCS=1``). Raises ``ValueError`` for another shape."""
    name, sep, rest = text.partition(":")
    if not sep or not name:
        raise ValueError(f"variant {text!r} is not NAME:KEY=VALUE,...")
    counts: dict[str, int] = {}
    env = {}
    for pair in filter(None, rest.split(",")):
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ValueError(f"variant {text!r}: {pair!r} is not KEY=VALUE")
        if key in ("threads", "workers"):
            counts[key] = int(value)
        else:
            env[key] = value
    return Variant(name, counts.get("threads"), counts.get("workers"), env)


def run_variant(args: argparse.Namespace, workdir: Path, duration: float, text: str) -> dict[str, Any]:
    """The mix at full speed against a gateway started with the variant ``text``
    (``parse_variant``) and otherwise the run's settings; its figures, settings and the largest
    worker RSS after it (MiB)."""
    variant = parse_variant(text)
    name, threads, env = variant.name, variant.threads, variant.env
    stack = Stack(workdir / f"variant-{name}", workers=variant.workers or args.workers, threads=threads or args.threads,
                  worker_connections=args.worker_connections,
                  extra_env={"TOOLGATE_AUDIT_SQLITE_SYNCHRONOUS": args.audit_synchronous, **env}).start()
    try:
        bench = Bench(stack, _workdir_for(workdir, f"variant-{name}-wrk"), connections=args.connections,
                      wrk_threads=args.wrk_threads)
        bench.seed()
        bench.mix(min(5.0, duration), name="warmup")
        mix = bench.measured(bench.mix(duration), "mix", check_kinds=True)
        rss = worker_rss(stack)
    finally:
        stack.stop()
    return {"name": name, "threads": threads or args.threads, "workers": variant.workers or args.workers, "env": env,
            "mix": mix,
            "rss_mib": round(max(rss.values()), 1) if rss else None}


def _workdir_for(workdir: Path, name: str) -> Path:
    directory = workdir / name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def memory_decisions(duration_s: float) -> int:
    """Decisions before the last RSS sample: 100k for workloads of 30 s or more, scaled down
    (at least 10k) for shorter ones, so that a short run takes under two minutes."""
    return 100_000 if duration_s >= 30 else max(10_000, round(100_000 * duration_s / 30))


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """Run every workload (see the module docstring); returns the result document."""
    ensure_wrk()
    duration = float(args.duration)
    if args.decisions is None:
        args.decisions = memory_decisions(duration)
    workdir = Path(tempfile.mkdtemp(prefix="toolgate-bench-"))
    _log(f"work directory {workdir}")
    try:
        _log("(d) engine in-process")
        engine = run_engine_bench(min(duration, 10.0))
        stack = Stack(workdir / "stack", workers=args.workers, threads=args.threads,
                      worker_connections=args.worker_connections, extra_env={"TOOLGATE_AUDIT_SQLITE_SYNCHRONOUS": args.audit_synchronous}).start()
        try:
            bench = Bench(stack, workdir, connections=args.connections, wrk_threads=args.wrk_threads)
            bench.seed()
            _log(f"gateway up at {stack.url}, workers {stack.worker_pids()}, features {bench.features}")
            bench.mix(min(5.0, duration), name="warmup")
            _log(f"per-phase CPU of one decide call ({args.phase_calls} calls per kind, in-process)")
            phases = run_phases(stack.settings_env(), workdir / "phases", args.phase_calls)
            _log("(a) ceiling")
            ceiling = bench.measured(bench.ceiling(duration), "ceiling")
            _log(f"    {ceiling['rps']} req/s; (b) decide allow")
            decide = bench.measured(bench.decide(duration), "decide", check_kinds=True)
            _log(f"    {decide['rps']} req/s; (c) mix")
            mix = bench.measured(bench.mix(duration), "mix", check_kinds=True)
            _log(f"    {mix['rps']} req/s; (c) mix paced at {mix['rps'] / 2:.0f} req/s")
            half = bench.measured(bench.mix(duration, rate=mix["rps"] / 2, name="half"), "half", check_kinds=True)
            _log(f"    p99 {half['p99_ms']} ms; memory: mix until {args.decisions // 2} decisions")
            bench.mix_until(args.decisions // 2, mix["rps"])
            rss_50k = worker_rss(stack)
            _log(f"    RSS {rss_50k}; until {args.decisions} decisions")
            reached = bench.mix_until(args.decisions, mix["rps"])
            rss_100k = worker_rss(stack)
            _log(f"    RSS {rss_100k} at {reached} decisions")
            metrics_text = stack.metrics_text()
            extra: dict[str, Any] = {
                "decisions_total": int(metric_sum(metrics_text, "toolgate_decisions_total")),
                "error_responses_total": int(metric_sum(metrics_text, "toolgate_errors_total")),
                "decision_log_bytes": stack.audit_path.stat().st_size if stack.audit_path.exists() else None,
                "features": bench.features,
                "phases_us": phases,
            }
        finally:
            stack.stop()
        if args.variant:
            # The run's own settings once more beside the variants, so that every variant is
            # compared with a gateway measured in the same stretch of the run.
            extra["variants"] = []
            for text in ["baseline:", *args.variant]:
                _log(f"variant {text}: the mix")
                extra["variants"].append(run_variant(args, workdir, duration, text))
                _log(f"    {extra['variants'][-1]['mix']['rps']} req/s")
        if args.anchors:
            _log("anchors: a bare opa run --server, then the mix with TOOLGATE_ENGINE=opa")
            extra["anchors"] = run_anchors(args, workdir, duration, mix, decide)
        extra.update(
            duration_s=duration,
            settings={"workers": args.workers, "threads": args.threads, "connections": args.connections,
                      "wrk_threads": args.wrk_threads, "worker_connections": stack.worker_connections,
                      "engine": "embedded", "env": "production", "cpus": os.cpu_count(),
                      "audit_sqlite_synchronous": args.audit_synchronous},
            engine_evaluations=engine.evaluations,
            pacing="wrk Lua delay(): per-thread send slots 1/rate apart; latency from min(slot, send)",
        )
        return build_results(ceiling=ceiling, decide=decide, mix=mix, half=half,
                             engine={k: v for k, v in asdict(engine).items() if k != "evaluations"},
                             rss_50k=rss_50k, rss_100k=rss_100k, extra=extra)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m bench``."""
    p = argparse.ArgumentParser(prog="python -m bench", description="toolgate benchmark (DESIGN §8), loopback only.")
    p.add_argument("--duration", type=float, default=30.0, help="seconds per workload (default 30)")
    p.add_argument("--out", type=Path, help="write the results as JSON to this file")
    p.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2: one per core)")
    p.add_argument("--threads", type=int, default=4, help="gthread threads per worker (default 4)")
    p.add_argument("--worker-connections", type=int,
                   help="gunicorn worker_connections (default 1000, the gateway's default)")
    p.add_argument("--connections", type=int, default=16, help="wrk connections (default 16)")
    p.add_argument("--wrk-threads", type=int, default=1, help="wrk threads (default 1)")
    p.add_argument("--decisions", type=int,
                   help="decisions before the last RSS sample (default 100k; scaled down for --duration under 30)")
    p.add_argument("--audit-synchronous", choices=("FULL", "NORMAL"), default="FULL",
                   help="SQLite decision log durability (default FULL, the shipped default: fsync per record)")
    p.add_argument("--phase-calls", type=int, default=300,
                   help="calls per kind of the in-process per-phase CPU breakdown (default 300)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE,...",
                   help="also run the mix against a gateway with these settings (threads=N or TOOLGATE_* / Go "
                        "variables), after a baseline gateway with the run's own settings; repeatable")
    p.add_argument("--no-anchors", dest="anchors", action="store_false",
                   help="skip the anchors (a bare OPA server, the mix with TOOLGATE_ENGINE=opa)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, scripts, SQLite)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run, print the table, write ``--out``. Exit 0, or 2 when a tool is missing."""
    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop Redis, gunicorn and wrk.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        results = run_benchmark(args)
    except (RuntimeError, OSError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
        _log(f"results written to {args.out}")
    return 0
