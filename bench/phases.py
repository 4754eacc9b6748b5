"""Where the CPU of one decide call goes: an in-process driver, ``python -m bench.phases``.

The driver builds the gateway worker's app (``app.wsgi``) in this process from the environment (``bench.run``
passes the bench gateway's production settings, with a decision log and a metrics directory of
the driver's own), then sends each kind of the mix (``bench.workloads``) ``--calls`` times, one
call at a time, straight to the WSGI callable (the request environment is built before the
clock starts). Around every phase of the pipeline (``app.decide.phases.Phases.measure``, the
same phases production times) it reads the request thread's CPU clock, and for the decision record the
process's (the decision log writer's group commit is done on its thread while the request
waits). Nothing of this is on in the gateway: the timer is installed here only.

Phases are exclusive (a phase's CPU without the phases inside it):

- ``auth``: bearer token verification; ``validate``: body parse and contract validation;
- ``idempotency``: the reservation check and, for an allow, its settlement (``reserve``);
- ``grant``: a presented approval; ``session``: the conversation's session (its snapshot for
  the policy, then the call's event in it); ``limits``: the session's rate limits;
- ``policy``: the policy input and reading the decision back; ``engine``: the embedded engine's
  raw evaluation inside it (the OPA call with its input going in and its result coming out);
  ``shadow``: the shadow policy's evaluation, when one is configured; ``approval``: the approval step;
- ``pipeline``: the rest of the pipeline (response model, receipt, metrics);
- ``record``: the decision record (event, canonical JSON, hash chain, group commit with fsync);
- ``respond``: Flask and the web layer outside the pipeline (request parsing, hooks, the JSON
  response, the log line, the HTTP metrics);
- ``other_threads``: CPU of the process's other threads during the call, outside the record
  phase (the Go runtime's collector and scheduler threads, mostly);
- ``request``: the whole call, every thread of the process.

gunicorn's HTTP parsing and the kernel's socket work are not in it: the gap between the
bench's worker CPU per call and ``request`` here is theirs.

Output: one JSON document on stdout, ``{"calls": n, "kinds": {kind: {phase: µs}}, "mix":
{phase: µs}}`` (mean µs of CPU per call; ``mix`` weighs the kinds as the mix does).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import budget
from bench.workloads import MIX_WEIGHTS, ROLES, decide_body, tokens

#: Report order of the phases; ``request`` is the whole call.
PHASE_ORDER = ("auth", "validate", "idempotency", "grant", "session", "limits", "policy", "engine", "shadow",
               "approval", "pipeline", "record", "respond", "other_threads", "request")
#: Production phase names -> report names (``reserve`` is the idempotency settlement, ``note``
#: the call's event in its session); a phase not in ``PHASE_ORDER`` counts as ``pipeline``.
_RENAMED = {"reserve": "idempotency", "note": "session", "log": "record", "total": "pipeline"}


def report_name(phase: str) -> str:
    """The report name of production phase ``phase``."""
    name = _RENAMED.get(phase, phase)
    return name if name in PHASE_ORDER else "pipeline"


class PhaseClock:
    """Exclusive CPU ns per phase of the current call (see the module docstring).

    Every phase is timed on this thread's clock (``time.thread_time_ns``), but the decision
    record on the process's (``time.process_time_ns``): the decision log writer thread does its
    group commit while the request thread waits. ``waiting_ns`` keeps what the record phase
    counted on other threads, so that the caller can tell the rest of the other threads' CPU
    (the Go runtime's collector, running beside whatever phase is on) from it."""

    #: The phase whose other threads' CPU belongs to it (production name).
    PROCESS_WIDE = "log"

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)
        self.waiting_ns = 0
        self._children: list[int] = []

    def reset(self) -> None:
        """Start a new call."""
        self.ns = defaultdict(int)
        self.waiting_ns = 0
        self._children = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the block's CPU as ``name``, less what nested phases count themselves."""
        self._children.append(0)
        start_thread, start_process = time.thread_time_ns(), time.process_time_ns()
        try:
            yield
        finally:
            thread = time.thread_time_ns() - start_thread
            inner = self._children.pop()
            own = thread - inner
            if name == self.PROCESS_WIDE:
                elsewhere = max(0, time.process_time_ns() - start_process - thread)
                self.waiting_ns += elsewhere
                own += elsewhere
            self.ns[report_name(name)] += own
            if self._children:
                self._children[-1] += thread


def install(clock: PhaseClock) -> None:
    """Wrap ``Phases.measure`` of this process with ``clock``, and the embedded engine's raw
    evaluation (``EmbeddedEngine.evaluate_raw``: the OPA call, its input going in and its
    result coming out) as the phase ``engine`` when it runs on this thread (a shadow
    evaluation on a worker thread is not the call's)."""
    import threading

    from app.decide import phases
    from app.engine.embedded import EmbeddedEngine

    measure = phases.Phases.measure
    evaluate_raw = EmbeddedEngine.evaluate_raw
    driver_thread = threading.get_ident()

    @contextmanager
    def timed_measure(self: phases.Phases, name: str) -> Iterator[None]:
        with clock.phase(name), measure(self, name):
            yield

    def timed_evaluate_raw(self: EmbeddedEngine, policy_input: Any) -> Any:
        if threading.get_ident() != driver_thread:
            return evaluate_raw(self, policy_input)
        with clock.phase("engine"):
            return evaluate_raw(self, policy_input)

    phases.Phases.measure = timed_measure  # type: ignore[method-assign, assignment]
    EmbeddedEngine.evaluate_raw = timed_evaluate_raw  # type: ignore[method-assign]


class CollectorClock:
    """Python's cyclic collector while in the ``with`` block: collections per generation and the
    CPU they took (``gc.callbacks``), whatever phase they interrupted."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.ns = [0, 0, 0]
        self._start = 0

    def _callback(self, step: str, info: dict[str, int]) -> None:
        if step == "start":
            self._start = time.thread_time_ns()
        else:
            self.count[info["generation"]] += 1
            self.ns[info["generation"]] += time.thread_time_ns() - self._start

    def __enter__(self) -> CollectorClock:
        import gc

        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        gc.callbacks.remove(self._callback)

    def summary(self, calls: int) -> dict[str, Any]:
        """``{"collections": [gen0, gen1, gen2], "us_per_call": [...], "max_full_ms": ...}``."""
        return {"collections": list(self.count),
                "us_per_call": [round(ns / max(calls, 1) / 1000, 1) for ns in self.ns],
                "full_ms_each": round(self.ns[2] / self.count[2] / 1e6, 2) if self.count[2] else None}


class Driver:
    """Sends calls of each kind to ``app`` (a WSGI callable) and times them with ``clock``."""

    def __init__(self, app: Callable[..., Any], clock: PhaseClock, secret: str) -> None:
        self.app = app
        self.clock = clock
        self.tokens = tokens(secret)
        self.replay_keys: list[str] = []
        self.sent = 0

    def _environ(self, path: str, kind_role: str, body: str, key: str | None) -> dict[str, Any]:
        from werkzeug.test import EnvironBuilder

        headers = {"Authorization": f"Bearer {self.tokens[kind_role]}", "Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return EnvironBuilder(path=path, method="POST", headers=list(headers.items()), data=body).get_environ()

    def _call(self, environ: dict[str, Any]) -> tuple[int, bytes]:
        status: list[str] = []

        def start_response(line: str, _headers: Any, _exc: Any = None) -> None:
            status.append(line)

        chunks = self.app(environ, start_response)
        try:
            body = b"".join(chunks)
        finally:
            getattr(chunks, "close", lambda: None)()
        return int(status[0].split()[0]), body

    def send(self, kind: str) -> dict[str, int]:
        """One call of ``kind``; returns its exclusive CPU ns by phase (``request``: all of it).
        Raises ``RuntimeError`` when the answer is not what the kind expects."""
        conversation = f"phases-{self.sent // 20}"
        self.sent += 1
        key = None
        if kind in ("approval", "mutating"):
            key = f"phases-{uuid.uuid4().hex}"
        elif kind == "replay":
            key = self.replay_keys[self.sent % len(self.replay_keys)]
        environ = self._environ("/v1/decide", ROLES[kind], decide_body(kind, conversation), key)
        self.clock.reset()
        start_thread, start_process = time.thread_time_ns(), time.process_time_ns()
        status, body = self._call(environ)
        thread = time.thread_time_ns() - start_thread
        process = time.process_time_ns() - start_process
        expected = 422 if kind == "invalid" else 200
        if status != expected:
            raise RuntimeError(f"{kind}: status {status}, expected {expected}: {body[:200]!r}")
        spent = dict(self.clock.ns)
        spent["respond"] = thread + self.clock.waiting_ns - sum(spent.values())
        spent["other_threads"] = max(0, process - thread - self.clock.waiting_ns)
        spent["request"] = process
        if kind == "mutating" and json.loads(body).get("idempotency", {}).get("state") == "reserved":
            self.complete(key or "")
        return spent

    def complete(self, key: str) -> None:
        """Report the execution of a reserved key (not timed)."""
        environ = self._environ(f"/v1/executions/{key}/complete", "admin", json.dumps({"result": {"status": "paid"}}), None)
        status, body = self._call(environ)
        if status != 200:
            raise RuntimeError(f"complete: status {status}: {body[:200]!r}")

    def seed_replays(self, count: int = 10) -> None:
        """Complete ``count`` keys for the replay kind."""
        for i in range(count):
            key = f"phases-replay-{uuid.uuid4().hex[:12]}-{i}"
            environ = self._environ("/v1/decide", "admin", decide_body("replay"), key)
            status, body = self._call(environ)
            if status != 200:
                raise RuntimeError(f"replay seed: status {status}: {body[:200]!r}")
            self.complete(key)
            self.replay_keys.append(key)


def measure_kinds(
    driver: Driver, calls: int, warmup: int = 30, reference_us: list[float] | None = None
) -> dict[str, dict[str, float]]:
    """Mean µs of CPU per phase for each kind of the mix, ``calls`` calls each (after ``warmup``),
    kinds interleaved so that drift hits all alike. With ``reference_us``, one unit of the
    budget's reference workload (``bench.budget``) is timed after every round of the kinds and
    appended to it, so that it sees the same machine the calls do."""
    kinds = list(MIX_WEIGHTS)
    for _ in range(warmup):
        for kind in kinds:
            driver.send(kind)
    totals: dict[str, dict[str, int]] = {kind: defaultdict(int) for kind in kinds}
    for _ in range(calls):
        for kind in kinds:
            for phase, ns in driver.send(kind).items():
                totals[kind][phase] += ns
        if reference_us is not None:
            reference_us.append(budget.time_reference_unit())
    return {kind: {phase: round(spent.get(phase, 0) / calls / 1000, 1) for phase in PHASE_ORDER}
            for kind, spent in totals.items()}


def mix_weighted(kinds: dict[str, dict[str, float]]) -> dict[str, float]:
    """The kinds' figures weighed as the mix sends them (``MIX_WEIGHTS``)."""
    weight = sum(MIX_WEIGHTS.values())
    return {phase: round(sum(kinds[k][phase] * n for k, n in MIX_WEIGHTS.items()) / weight, 1) for phase in PHASE_ORDER}


def run(calls: int) -> dict[str, Any]:
    """Build the worker's app (``app.wsgi``) from the environment, measure, return the result
    document."""
    clock = PhaseClock()
    install(clock)
    from app.wsgi import app  # the worker's app, built as gunicorn's worker builds it

    driver = Driver(app.wsgi_app, clock, os.environ["TOOLGATE_JWT_HS256_SECRET"])
    driver.seed_replays()
    collector = CollectorClock()
    reference_us: list[float] = []
    with collector:
        kinds = measure_kinds(driver, calls, reference_us=reference_us)
    import app as package

    return {"calls": calls, "app": str(Path(package.__file__ or "").parent),
            "clock": "thread_time_ns per phase; record and request: process_time_ns", "kinds": kinds,
            "mix": mix_weighted(kinds), "python_gc": collector.summary(calls * len(kinds)),
            "reference_us": reference_us}


def format_phases(result: dict[str, Any]) -> str:
    """A table of the per-phase µs: one row per phase, one column per kind and the mix; then
    Python's collections during the calls."""
    kinds = list(result["kinds"])
    lines = [f"{'µs CPU / call':<14}" + "".join(f"{k:>10}" for k in kinds) + f"{'mix':>10}"]
    for phase in PHASE_ORDER:
        row = "".join(f"{result['kinds'][k][phase]:>10.1f}" for k in kinds)
        lines.append(f"{phase:<14}{row}{result['mix'][phase]:>10.1f}")
    gc = result.get("python_gc")
    if gc:
        lines.append(f"Python gc: collections {gc['collections']} (gen 0/1/2), µs per call {gc['us_per_call']}, "
                     f"each full collection {gc['full_ms_each']} ms")
    return "\n".join(lines)


def run_in_subprocess(settings_env: dict[str, str], workdir: Path, calls: int, timeout_s: float = 600.0, *,
                      source_root: Path | None = None, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the driver in a fresh interpreter with the gateway's ``settings_env`` (its Redis and
    secrets), a decision log, metrics and policy status directory of its own under ``workdir``
    (emptied first) and ``extra_env``; its log goes to ``workdir/phases.log``. ``source_root``:
    the checkout whose ``app`` (and policies, contracts) the driver imports, this one by
    default. Returns its result; raises ``RuntimeError`` when it fails (with the log tail)."""
    import shutil

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    (workdir / "metrics").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    # A loaded machine may hold Redis up longer than the gateway's 100 ms; the driver counts
    # CPU, not latency, and must not end on a timeout.
    env.update(settings_env, TOOLGATE_REDIS_SOCKET_TIMEOUT_MS="5000", TOOLGATE_AUDIT_DSN=str(workdir / "decisions.sqlite"),
               PROMETHEUS_MULTIPROC_DIR=str(workdir / "metrics"), TOOLGATE_POLICY_STATUS_DIR=str(workdir),
               **(extra_env or {}))
    log_path = workdir / "phases.log"
    with log_path.open("wb") as log:
        done = subprocess.run([sys.executable, "-m", "bench.phases", "--calls", str(calls)], env=env,
                              cwd=source_root or Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, stderr=log,
                              timeout=timeout_s, check=False)
    if done.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"bench.phases exited {done.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run_standalone(calls: int) -> dict[str, Any]:
    """Start a private Redis, run the driver against it with the bench gateway's settings
    (``bench.stack.Stack.settings_env``, no gunicorn), stop Redis; returns the result."""
    import shutil
    import tempfile

    from bench.stack import Stack

    workdir = Path(tempfile.mkdtemp(prefix="toolgate-phases-"))
    stack = Stack(workdir / "stack")
    try:
        stack.start_redis()
        return run_in_subprocess(stack.settings_env(), workdir / "phases", calls)
    finally:
        stack.stop_redis()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.phases [--calls N] [--standalone]``: JSON on stdout, the table on stderr.

    Without ``--standalone`` the settings come from the environment (``bench.run`` starts it
    so); with it, a private Redis and the bench gateway's settings."""
    parser = argparse.ArgumentParser(prog="python -m bench.phases", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=None, help="timed calls per kind (default 300; 40 with --check)")
    parser.add_argument("--standalone", action="store_true", help="start a private Redis and use the bench settings")
    parser.add_argument("--check", action="store_true",
                        help="judge the mix against the CPU budget (bench.budget, docs/performance.md): exit 1 when a "
                             "line is over; implies --standalone, 40 calls per kind unless --calls is given")
    args = parser.parse_args(argv)
    if args.check:
        return check(args.calls or CHECK_CALLS)
    calls = args.calls or 300
    result = run_standalone(calls) if args.standalone else run(calls)
    print(format_phases(result), file=sys.stderr)
    print(json.dumps(result))
    return 0


#: Calls per kind of ``--check`` (about 20 s on the reference machine, start-up included).
CHECK_CALLS = 40


def check(calls: int) -> int:
    """``--check``: the mix's phases of a standalone run against ``bench.budget.BUDGET``, scaled by
    the run's reference workload. Prints the breakdown and the verdict; returns 1 when a line
    is over its allowance, else 0."""
    result = run_standalone(calls)
    print(format_phases(result))
    factor = budget.speed_factor(result["reference_us"])
    lines = budget.judge(result["mix"], factor)
    print(budget.format_verdict(lines, factor, result["reference_us"]))
    return 1 if any(line.over for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
