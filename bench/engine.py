"""The embedded policy engine alone, in-process: two workloads.

(d) ``run_engine_bench``: for the same policy inputs (the documents the mix's kinds produce),
time ``EmbeddedEngine.evaluate(input)`` (an engine lent from the pool, evaluation, strict
normalization) and the raw ``opa_bindings.OpaEngine.eval_document("toolgate.decision", input)``
on an engine loaded with the same bundle.

(f) ``run_floor_bench``: the shipped decision against the floor, a one-rule policy
(``decision := {...} if input.tool.registered == true``), on the same input, for a banking call
(send_money to a known payee within the limit) and a file call (readFile under a read root),
both through the raw engine call. ``python -m bench.engine [--duration SECONDS]`` prints it.

In both, rounds alternate between the two sides so that drift hits both alike; each figure is
the median over rounds of the mean µs of CPU time (``time.process_time``: the Go collector's
threads included) per evaluation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.stack import PROJECT_ROOT


@dataclass(frozen=True)
class EngineResult:
    """µs per evaluation: ``engine_us`` (EmbeddedEngine), ``raw_engine_us`` (OpaEngine)."""

    engine_us: float
    raw_engine_us: float
    evaluations: int

    @property
    def overhead_ratio(self) -> float:
        """``engine_us / raw_engine_us``."""
        return self.engine_us / self.raw_engine_us


def policy_inputs() -> list[dict[str, Any]]:
    """The policy input documents (DESIGN §3) of the allow, deny, approval and mutating kinds."""

    def doc(role: str, tool: str, mutating: bool, risk: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        return {
            "subject": {"id": f"bench-{role}", "tenant": "acme", "roles": [role]},
            "tool": {"name": tool, "version": "1", "registered": True, "mutating": mutating, "risk": risk},
            "call": {"id": "call-bench", "input": tool_input},
            "context": {"conversation_id": "bench-1"},
            "history": {},
            "approval": None,
            "request": {"id": "bench", "time": "2026-01-01T00:00:00.000Z"},
        }

    report = {"start_date": "2026-01-01", "end_date": "2026-03-31"}
    return [
        doc("support_agent", "exportReport", False, "medium", report),
        doc("developer", "exportReport", False, "medium", report),
        doc("admin", "processPayment", True, "high", {"amount": 5000, "currency": "EUR", "recipient": "acct_42"}),
        doc("admin", "processPayment", True, "high", {"amount": 250, "currency": "EUR", "recipient": "acct_42"}),
    ]


def _mean_us(call: Callable[[dict[str, Any]], Any], inputs: list[dict[str, Any]], n: int) -> float:
    start = time.process_time()
    for i in range(n):
        call(inputs[i % len(inputs)])
    return (time.process_time() - start) / n * 1e6


def run_engine_bench(duration_s: float = 5.0, policy_dir: Path | None = None) -> EngineResult:
    """Time both calls for about ``duration_s`` seconds in total; returns µs per evaluation.

    Raises ``opa_bindings.OpaError`` if the policies do not load.
    """
    from opa_bindings import OpaEngine

    from app.engine.embedded import EmbeddedEngine
    from app.engine.sources import DirectorySource
    from app.policy.bundle import load_bundle
    from app.settings import Settings

    policy_dir = policy_dir or PROJECT_ROOT / "policies"
    # The gateway's Go runtime settings (their defaults), before the first engine loads Go.
    defaults = Settings.model_fields
    embedded = EmbeddedEngine(
        DirectorySource(policy_dir), "toolgate/decision",
        go_gc_percent=defaults["engine_go_gc_percent"].default, go_max_procs=defaults["engine_go_max_procs"].default,
    )
    raw = OpaEngine()
    load_bundle(raw, policy_dir, include_tests=False)
    inputs = policy_inputs()

    def raw_call(doc: dict[str, Any]) -> Any:
        return raw.eval_document("toolgate.decision", doc)

    # Warm up both (first evaluations compile and cache).
    _mean_us(embedded.evaluate, inputs, 200)
    _mean_us(raw_call, inputs, 200)
    probe_us = _mean_us(raw_call, inputs, 400)
    rounds = 10
    per_round = max(100, int(duration_s * 1e6 / (2 * rounds * probe_us)))
    wrapped, bare = [], []
    for _ in range(rounds):
        wrapped.append(_mean_us(embedded.evaluate, inputs, per_round))
        bare.append(_mean_us(raw_call, inputs, per_round))
    raw.close()
    return EngineResult(statistics.median(wrapped), statistics.median(bare), 2 * rounds * per_round)


# --- (f) the shipped decision against the one-rule floor ------------------------------------

FLOOR_POLICY = (
    "package floor\n\n"
    'decision := {"decision": "allow", "reasons": ["allowed by policy"]} if input.tool.registered == true\n'
)


@dataclass(frozen=True)
class FloorCase:
    """µs per evaluation of one input: the shipped decision and the one-rule floor."""

    name: str
    decision: str
    shipped_us: float
    floor_us: float

    @property
    def ratio(self) -> float:
        """``shipped_us / floor_us`` (target: at most 2)."""
        return self.shipped_us / self.floor_us


def floor_inputs() -> dict[str, dict[str, Any]]:
    """The banking call and the file call of workload (f), as policy input documents."""

    def doc(subject: dict[str, Any], tool: str, mutating: bool, risk: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        return {
            "subject": subject,
            "tool": {"name": tool, "version": "1", "namespace": "", "registered": True, "mutating": mutating, "risk": risk},
            "call": {"id": "call-bench", "input": tool_input},
            "context": {"conversation_id": "bench-1"},
            "history": {},
            "approval": None,
            "request": {"id": "bench", "time": "2026-01-01T00:00:00.000Z"},
        }

    emma = {"id": "emma", "tenant": "bank-demo", "roles": ["account_holder"]}
    agent = {"id": "bench-agent", "tenant": "acme", "roles": ["support_agent"]}
    transfer = {"recipient": "GB29NWBK60161331926819", "amount": 100, "subject": "Rent", "date": "2022-04-01"}
    return {
        "banking send_money": doc(emma, "send_money", True, "high", transfer),
        "file readFile": doc(agent, "readFile", False, "low", {"path": "/srv/reports/q1.csv"}),
    }


def run_floor_bench(duration_s: float = 10.0, policy_dir: Path | None = None) -> list[FloorCase]:
    """Time the shipped decision and the floor for each of ``floor_inputs()``, about
    ``duration_s`` seconds in all. Raises ``opa_bindings.OpaError`` if the policies do not load."""
    from opa_bindings import OpaEngine

    from app.policy.bundle import load_bundle

    shipped = OpaEngine()
    load_bundle(shipped, policy_dir or PROJECT_ROOT / "policies", include_tests=False)
    floor = OpaEngine()
    floor.add_policy("floor.rego", FLOOR_POLICY)
    inputs = floor_inputs()
    rounds = 15
    out = []
    try:
        for name, doc in inputs.items():
            decision = shipped.eval_document("toolgate.decision", doc)["decision"]

            def shipped_call(d: dict[str, Any]) -> Any:
                return shipped.eval_document("toolgate.decision", d)

            def floor_call(d: dict[str, Any]) -> Any:
                return floor.eval_document("floor.decision", d)

            _mean_us(shipped_call, [doc], 300)
            _mean_us(floor_call, [doc], 300)
            probe_us = _mean_us(shipped_call, [doc], 300)
            per_round = max(100, int(duration_s / len(inputs) * 1e6 / (2 * rounds * probe_us)))
            shipped_us, floor_us = [], []
            for _ in range(rounds):
                shipped_us.append(_mean_us(shipped_call, [doc], per_round))
                floor_us.append(_mean_us(floor_call, [doc], per_round))
            out.append(FloorCase(name, decision, statistics.median(shipped_us), statistics.median(floor_us)))
    finally:
        shipped.close()
        floor.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.engine``: workload (f), one JSON document on stdout, a table on stderr."""
    parser = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds in all (default 10)")
    args = parser.parse_args(argv)
    cases = run_floor_bench(args.duration)
    for case in cases:
        print(f"{case.name:20s} {case.decision:6s} shipped {case.shipped_us:7.1f} us  floor {case.floor_us:6.1f} us"
              f"  ratio {case.ratio:.2f}", file=sys.stderr)
    print(json.dumps([{**asdict(c), "ratio": round(c.ratio, 2)} for c in cases]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
