"""The cost of the session per decide call: ``python -m bench.session [--calls N] [--out FILE.json]``.

In one process, against a private ``redis-server`` on loopback and the real embedded engine,
the decide pipeline (``app.decide.pipeline.decide``, no HTTP) runs the same calls under two
policies that differ only in their session rules:

- ``plain``: allow, reading nothing of ``input.session`` (the gateway still reads the
  session before the policy and writes the call's event after it: the fixed cost);
- ``session``: the same allow, plus a snapshot rule over ``input.session`` counts and sums, a
  count limit and a budget (``limits``, reserved atomically) and a rate limit (``rate_limits``).

The calls alternate between readFile (read-only) and processPayment with a fresh key
(mutating), one subject per policy, so each session fills up to ``TOOLGATE_SESSION_MAX_EVENTS``
events (the worst case a snapshot reads) before the timed rounds. Each round interleaves the
two policies call by call so that load from elsewhere hits both alike. Reported per call in
µs (median over rounds of the mean): the whole pipeline, and its session phases (``session``
snapshot, ``limits`` admission, ``note`` event). The decision log is SQLite at ``synchronous=NORMAL`` so that fsyncs
do not drown the difference.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.stack import PROJECT_ROOT, Stack

PLAIN = """package toolgate

import rego.v1

decision := {"decision": "allow", "reasons": ["allowed"]}
"""

WITH_SESSION = """package toolgate

import rego.v1

session := input.session

payments_today := object.get(session.subject.amounts["24h"], ["processPayment", "/amount"], 0)

deny contains "too many reads this minute" if object.get(session.conversation.calls["1m"], "readFile", 0) > 100000

deny contains "payments over budget" if payments_today > 1000000000

limits := [
	{"id": "payments.count", "scope": "subject", "window_s": 86400, "max": 1000000000},
	{"id": "payments.budget", "scope": "subject", "window_s": 86400, "max": 1000000000, "amount_field": "/amount"},
] if input.tool.name == "processPayment" else := []

decision := {"decision": "deny", "reasons": sort([r | some r in deny])} if count(deny) > 0
else := {"decision": "allow", "reasons": ["allowed"], "limits": limits,
	"rate_limits": [{"id": "subject.all", "scope": "subject", "count": 1000000, "per_s": 60}]}
"""

PHASES = ("session", "limits", "note")


def _log(message: str) -> None:
    print(f"[bench.session {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Variant:
    """One policy's pipeline: its ``Deps`` and a subject of its own."""

    def __init__(self, name: str, policy: str, workdir: Path, redis_url: str, max_events: int) -> None:
        from app import build_deps
        from app.auth.dev_tokens import mint_dev_token
        from app.settings import Settings

        policy_dir = workdir / name / "policy"
        (policy_dir / "toolgate").mkdir(parents=True)
        (policy_dir / "toolgate" / "decision.rego").write_text(policy)
        self.name = name
        values: dict[str, Any] = {
            "engine": "embedded", "policy_dir": policy_dir, "contracts_dir": PROJECT_ROOT / "contracts",
            "redis_url": redis_url, "redis_socket_timeout_ms": 2000, "session_max_events": max_events,
            "audit_dsn": str(workdir / name / "decisions.sqlite"), "audit_sqlite_synchronous": "NORMAL",
            "jwt_algorithms": ["HS256"], "log_level": "WARNING",
            "jwt_hs256_secret": "bench-session-hs256-secret-of-at-least-32-bytes",
        }
        self.settings = Settings(**values)
        self.deps = build_deps(self.settings)
        self.token = "Bearer " + mint_dev_token(self.settings, sub=f"bench-{name}", tenant="acme", roles=["admin"])
        self.calls = 0

    def call(self) -> dict[str, float]:
        """One decide call; returns its phase durations (ms), ``total`` included."""
        from app.decide.phases import Phases
        from app.decide.pipeline import decide
        from app.decide.stages import DecideCall, Progress

        self.calls += 1
        key = None
        if self.calls % 2:
            body: dict[str, Any] = {"tool": "readFile", "input": {"path": f"/srv/reports/{self.calls}.csv"}}
        else:
            key = uuid.uuid4().hex
            body = {"tool": "processPayment", "input": {"amount": 25, "currency": "EUR", "recipient": "acct_42"}}
        body["context"] = {"conversation_id": f"conv-{self.calls // 50}"}
        call = DecideCall(request_id=f"bench-{self.calls}", authorization=(self.token,), body=json.dumps(body).encode(),
                          idempotency_key=key)
        phases = Phases()
        with phases.measure("total"):
            answer = decide(self.deps, Progress(call), phases)
        if answer.decision != "allow":
            raise RuntimeError(f"{self.name}: expected allow, got {answer.decision} {answer.reasons}")
        return phases.ms

    def close(self) -> None:
        self.deps.decision_log.close()
        self.deps.redis.close()


def _round(variants: list[Variant], calls: int) -> dict[str, dict[str, float]]:
    """``calls`` calls of each variant, interleaved one by one (so that load from elsewhere hits
    both alike); mean µs per call of ``total`` and each session phase, by variant."""
    sums = {v.name: dict.fromkeys(("total", *PHASES), 0.0) for v in variants}
    for _ in range(calls):
        for variant in variants:
            ms = variant.call()
            for phase in sums[variant.name]:
                sums[variant.name][phase] += ms.get(phase, 0.0)
    return {name: {phase: total * 1000 / calls for phase, total in row.items()} for name, row in sums.items()}


def run(calls: int, rounds: int, max_events: int) -> dict[str, Any]:
    """Warm both variants up to a full session, then time ``rounds`` rounds of ``calls``
    interleaved calls each; returns the result document."""
    workdir = Path(tempfile.mkdtemp(prefix="toolgate-bench-session-"))
    stack = Stack(workdir / "stack")
    stack.workdir.mkdir(parents=True)
    stack.start_redis()
    variants: list[Variant] = []
    try:
        variants = [Variant(name, policy, workdir, stack.redis_url, max_events)
                    for name, policy in (("plain", PLAIN), ("session", WITH_SESSION))]
        _log(f"warm-up: {max_events + 100} calls per policy (a full session of {max_events} events)")
        _round(variants, max_events + 100)
        figures: dict[str, list[dict[str, float]]] = {v.name: [] for v in variants}
        for number in range(rounds):
            for name, row in _round(variants, calls).items():
                figures[name].append(row)
            _log(f"round {number + 1}/{rounds}: " + ", ".join(
                f"{name} {rows[-1]['total']:.0f} µs" for name, rows in figures.items()))
        medians = {name: {phase: round(statistics.median(r[phase] for r in rows), 1) for phase in rows[0]}
                   for name, rows in figures.items()}
        return {
            "calls_per_round": calls, "rounds": rounds, "session_max_events": max_events,
            "us_per_call": medians,
            "added_by_session_rules_us": round(medians["session"]["total"] - medians["plain"]["total"], 1),
            "session_phases_without_rules_us": round(sum(medians["plain"][p] for p in PHASES), 1),
            "session_phases_with_rules_us": round(sum(medians["session"][p] for p in PHASES), 1),
        }
    finally:
        for variant in variants:
            variant.close()
        stack.stop_redis()
        shutil.rmtree(workdir, ignore_errors=True)


def format_table(results: dict[str, Any]) -> str:
    """The results as a table (µs per decide call)."""
    lines = [f"{'policy':<10}{'total':>10}" + "".join(f"{p:>10}" for p in PHASES)]
    for name, row in results["us_per_call"].items():
        lines.append(f"{name:<10}{row['total']:>10.1f}" + "".join(f"{row[p]:>10.1f}" for p in PHASES))
    lines.append("")
    lines.append(f"session rules add {results['added_by_session_rules_us']:.1f} µs per call; the session phases cost "
                 f"{results['session_phases_without_rules_us']:.1f} µs without rules, "
                 f"{results['session_phases_with_rules_us']:.1f} µs with them")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.session", description="The session's cost per decide call.")
    parser.add_argument("--calls", type=int, default=500, help="calls per round and policy (default 500)")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds (default 6)")
    parser.add_argument("--max-events", type=int, help="TOOLGATE_SESSION_MAX_EVENTS for both policies (default: the setting's default)")
    parser.add_argument("--out", type=Path, help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    from app.settings import SessionSettings

    default_events = SessionSettings.model_fields["session_max_events"].default
    try:
        results = run(args.calls, args.rounds, args.max_events or default_events)
    except (RuntimeError, OSError) as exc:
        print(f"bench.session: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
