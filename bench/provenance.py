"""The cost of ``input.provenance`` per decide call: ``python -m bench.provenance [--calls N] [--out FILE.json]``.

In one process, against a private ``redis-server`` on loopback and the real embedded engine,
the decide pipeline (``app.decide.pipeline.decide``, no HTTP) decides the same ``send_money``
calls (an IBAN recipient, an amount, a subject with a URL in it, a 300-character user prompt)
under two copies of the shipped policies that differ only in the banking family:

- ``plain``: as shipped: it declares no provenance, so none is built (what every call of a
  family that does not declare it pays; the session facts it declares are built in both);
- ``provenance``: it also declares ``provenance.arguments`` and ``provenance.extracted``, and
  has a rule over them.

Before the timed rounds each variant's conversation gets a reported history of 50
transactions (``get_most_recent_transactions``, completed with its reservation token: about
500 remembered values). Reported per call, in µs of the request thread's CPU
(``time.thread_time_ns``; median over rounds of the mean): the whole pipeline, and the
building of ``input.provenance`` (``app.provenance.facts.build``: the call's values, their
digests, the one HMGET and the prompt's values). As ``bench.phases --check`` does, the
budget's reference workload (``bench.budget``) is timed after every round: ``speed_factor``
says how much slower than the reference machine the run was, and ``provenance_reference_us``
is the provenance figure divided by it (the figure to hold against the 150 µs of issue 25).
The decision log is SQLite at ``synchronous=NORMAL``.
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

from bench import budget
from bench.stack import PROJECT_ROOT, Stack

_SHIPPED_READS = 'session_reads := {"session.conversation.labels", "session.conversation.trusted_counterparties"}'
_PROVENANCE_READS = _SHIPPED_READS[:-1] + ', "provenance.arguments", "provenance.extracted"}'
_PROVENANCE_RULE = """
_recipient_from_untrusted if input.provenance.arguments["/recipient"].sources[_].label == "untrusted_content"

_subject_link_untrusted if input.provenance.extracted["/subject"][_].sources[_].label == "untrusted_content"
"""
VARIANTS = ("plain", "provenance")
PROMPT = ("Please look at my recent transactions, then pay the 98.70 EUR bill from my landlord to "
          "GB29NWBK60161331926819 with the subject 'Rent December', and tell me what https://bank.example.com/help "
          "says about recurring payments. Thanks, and do not change anything else on my account today!")
HISTORY = [
    {"id": n, "sender": "DE89370400440532013000", "recipient": f"GB29NWBK601613319268{n:02d}", "amount": 10.0 + n,
     "subject": f"Invoice {n} see https://shop{n}.example.com/i/{n}", "date": "2026-11-01", "recurring": False}
    for n in range(50)
]


def _log(message: str) -> None:
    print(f"[bench.provenance {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Variant:
    """One policy's pipeline: its ``Deps``, a subject and a conversation of its own."""

    def __init__(self, name: str, workdir: Path, redis_url: str) -> None:
        from app import build_deps
        from app.auth.dev_tokens import mint_dev_token
        from app.settings import Settings

        policy_dir = workdir / name / "policies"
        shutil.copytree(PROJECT_ROOT / "policies", policy_dir)
        data = json.loads((policy_dir / "data.json").read_text())
        data["rate_limits"]["tools"]["send_money"] = {"count": 1_000_000, "per_s": 60}  # the bench sends many
        (policy_dir / "data.json").write_text(json.dumps(data))
        if name == "provenance":
            banking = policy_dir / "tools" / "banking" / "banking.rego"
            text = banking.read_text()
            if _SHIPPED_READS not in text:
                raise RuntimeError("the banking family's session_reads changed: update bench.provenance")
            banking.write_text(text.replace(_SHIPPED_READS, _PROVENANCE_READS) + _PROVENANCE_RULE)
        self.name = name
        values: dict[str, Any] = {
            "engine": "embedded", "policy_dir": policy_dir, "contracts_dir": PROJECT_ROOT / "contracts",
            "redis_url": redis_url, "redis_socket_timeout_ms": 2000, "audit_dsn": str(workdir / name / "decisions.sqlite"),
            "audit_sqlite_synchronous": "NORMAL", "jwt_algorithms": ["HS256"], "log_level": "WARNING",
            "jwt_hs256_secret": "bench-provenance-hs256-secret-of-32-bytes!",
        }
        self.settings = Settings(**values)
        self.deps = build_deps(self.settings)
        self.deps.session_reads.prime()  # the declarations verified, as a served worker does
        self.token = "Bearer " + mint_dev_token(self.settings, sub=f"bench-{name}", tenant="bank-demo",
                                                roles=["account_holder"])
        self.conversation = f"conv-{uuid.uuid4().hex[:8]}"

    def decide(self, tool: str, tool_input: dict[str, Any], key: str, prompt: str = "") -> Any:
        from app.decide.phases import Phases
        from app.decide.pipeline import decide
        from app.decide.stages import DecideCall, Progress

        body = {"tool": tool, "input": tool_input, "context": {"conversation_id": self.conversation, "user_prompt": prompt}}
        call = DecideCall(request_id=f"bench-{key}", authorization=(self.token,), body=json.dumps(body).encode(),
                          idempotency_key=key)
        answer = decide(self.deps, Progress(call), Phases())
        if answer.decision == "deny":
            raise RuntimeError(f"{self.name}: {tool} denied: {answer.reasons}")
        return answer

    def report_history(self) -> None:
        """Decide and report (with its reservation token) a history of ``HISTORY``."""
        from app.decide.events import RequestFacts
        from app.decide.reports import complete

        key = uuid.uuid4().hex
        answer = self.decide("get_most_recent_transactions", {"n": 50}, key)
        body = json.dumps({"result": HISTORY, "reservation_token": answer.idempotency.reservation_token}).encode()
        subject = self.deps.verifier.verify((self.token,))
        complete(self.deps, RequestFacts(request_id=f"bench-report-{key}", trace_id=None), subject, key, body)

    def pay(self) -> int:
        """One timed ``send_money`` decide; returns its CPU ns on this thread."""
        call = {"recipient": "GB29 NWBK 6016 1331 9268 19", "amount": 98.7,
                "subject": "Rent December, see https://shop7.example.com/i/7", "date": "2026-12-02"}
        start = time.thread_time_ns()
        self.decide("send_money", call, uuid.uuid4().hex, PROMPT)
        return time.thread_time_ns() - start

    def close(self) -> None:
        self.deps.decision_log.close()
        self.deps.redis.close()


class _BuildClock:
    """The CPU ns of every ``app.provenance.facts.build`` on this thread, per call."""

    def __init__(self) -> None:
        from app.decide import session_step

        self.ns = 0
        self.calls = 0
        build = session_step.facts.build

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time_ns()
            try:
                return build(*args, **kwargs)
            finally:
                self.ns += time.thread_time_ns() - start
                self.calls += 1

        session_step.facts.build = timed


def _round(variants: list[Variant], clock: _BuildClock, calls: int) -> dict[str, dict[str, float]]:
    sums = {v.name: {"total": 0.0, "provenance": 0.0, "built": 0.0} for v in variants}
    for _ in range(calls):
        for variant in variants:
            clock.ns = clock.calls = 0
            total = variant.pay()
            row = sums[variant.name]
            row["total"] += total / 1000
            row["provenance"] += clock.ns / 1000
            row["built"] += clock.calls
    return {name: {k: v / calls for k, v in row.items()} for name, row in sums.items()}


def run(calls: int, rounds: int) -> dict[str, Any]:
    """Warm up, then time ``rounds`` rounds of ``calls`` interleaved calls per variant."""
    workdir = Path(tempfile.mkdtemp(prefix="toolgate-bench-provenance-"))
    stack = Stack(workdir / "stack")
    stack.workdir.mkdir(parents=True)
    stack.start_redis()
    variants: list[Variant] = []
    try:
        clock = _BuildClock()
        variants = [Variant(name, workdir, stack.redis_url) for name in VARIANTS]
        for variant in variants:
            variant.report_history()
        _round(variants, clock, 50)
        figures: dict[str, list[dict[str, float]]] = {v.name: [] for v in variants}
        reference_us: list[float] = []
        for number in range(rounds):
            for name, row in _round(variants, clock, calls).items():
                figures[name].append(row)
            reference_us.extend(budget.time_reference_unit() for _ in range(5))
            _log(f"round {number + 1}/{rounds}: " + ", ".join(
                f"{name} {rows[-1]['total']:.0f} µs (provenance {rows[-1]['provenance']:.0f})" for name, rows in figures.items()))
        medians = {name: {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]} for name, rows in figures.items()}
        factor = budget.speed_factor(reference_us)
        return {"calls_per_round": calls, "rounds": rounds, "remembered_values": len(HISTORY) * 10,
                "us_cpu_per_call": medians, "speed_factor": round(factor, 2),
                "provenance_reference_us": round(medians["provenance"]["provenance"] / factor, 1)}
    finally:
        for variant in variants:
            variant.close()
        stack.stop_redis()
        shutil.rmtree(workdir, ignore_errors=True)


def format_table(results: dict[str, Any]) -> str:
    """The results as a table (µs of CPU per decide call)."""
    lines = [f"{'policy':<12}{'total':>10}{'provenance':>12}{'built/call':>12}"]
    for name, row in results["us_cpu_per_call"].items():
        lines.append(f"{name:<12}{row['total']:>10.1f}{row['provenance']:>12.1f}{row['built']:>12.1f}")
    lines.append(f"speed factor {results['speed_factor']}: input.provenance costs {results['provenance_reference_us']} µs "
                 "of CPU per call on the reference machine")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.provenance", description="The cost of input.provenance per decide call.")
    parser.add_argument("--calls", type=int, default=200, help="calls per round and policy (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--out", type=Path, help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    try:
        results = run(args.calls, args.rounds)
    except (RuntimeError, OSError) as exc:
        print(f"bench.provenance: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
