"""Workload (d): the embedded policy engine alone, in-process, against the raw engine call.

For the same policy inputs (the documents the mix's kinds produce), time
``EmbeddedEngine.evaluate(input)`` (thread-local engine lookup, evaluation, strict
normalization) and the raw ``opa_bindings.OpaEngine.eval_document("toolgate.decision", input)``
on an engine loaded with the same bundle. Rounds alternate between the two so that drift hits
both alike; each figure is the median over rounds of the mean µs per evaluation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    start = time.perf_counter()
    for i in range(n):
        call(inputs[i % len(inputs)])
    return (time.perf_counter() - start) / n * 1e6


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
