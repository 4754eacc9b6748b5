"""The decide path's CPU budget per phase and its check (``python -m bench.phases --check``).

``BUDGET`` is the one home of the budget: docs/performance.md shows it as a table, and a test
compares the two. Each line is a budget in µs of CPU per mix call on the reference machine (the
project's 2-core VM, idle) over one or more of ``bench.phases``' report phases.

A check must not depend on how fast or how loaded the machine is, so the figures are judged
against a **reference workload** timed in the same run, interleaved with the calls: a fixed
piece of Python work of the kinds a decide call does (JSON in and out, canonical JSON with
orjson, SHA-256 and HMAC, a regular expression, small dicts and lists; no I/O).
``REFERENCE_US`` is what one unit of it costs on the reference machine; a run on a machine
``f`` times slower (``f = measured / REFERENCE_US``) allows every line ``f`` times its budget; a
faster run is judged at the budget itself (``f`` is at least 1).
A line fails when it exceeds its scaled budget by more than ``TOLERANCE`` (50 %).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import statistics
import time
from dataclasses import dataclass

import orjson

#: Budget lines: name -> (µs of CPU per mix call on the reference machine, the report phases of
#: ``bench.phases`` it covers). ``engine`` is the raw OPA evaluation, a part of ``policy``.
BUDGET: dict[str, tuple[float, tuple[str, ...]]] = {
    "auth": (80, ("auth",)),
    "validate": (200, ("validate",)),
    "idempotency": (130, ("idempotency", "grant")),
    "session": (500, ("session", "limits")),
    "policy": (1600, ("policy", "engine", "shadow")),
    "engine": (1450, ("engine",)),
    "approval": (170, ("approval",)),
    "record": (800, ("record",)),
    "web + respond": (1150, ("pipeline", "respond")),
    "other threads": (450, ("other_threads",)),
    "whole call": (4700, ("request",)),
}

#: Where each line should get to (issue "Performance round 3"), µs on the reference machine: a
#: line's budget comes down to it as changes reach it; the check judges the budget.
TARGET: dict[str, float] = {
    "auth": 60, "validate": 120, "idempotency": 100, "session": 150, "policy": 500, "engine": 200, "approval": 60,
    "record": 250, "web + respond": 250, "other threads": 200, "whole call": 2000,
}

#: How far a line may exceed its scaled budget before the check fails: 0.5 = 50 %.
TOLERANCE = 0.5

#: µs of CPU one ``reference_unit()`` takes on the reference machine (median of three
#: ``python -m bench.budget`` runs on the idle 2-core VM: 1,454, 1,448 and 1,384 µs).
REFERENCE_US = 1400.0

_DOCUMENT = {
    "tool": "processPayment",
    "version": "1",
    "tool_call_id": "call_7",
    "input": {"amount": 1500, "currency": "EUR", "recipient": "acct_42", "memo": "invoice 2026-001 " * 4},
    "context": {"conversation_id": "conv-1", "user_prompt": "pay the March invoice of ACME GmbH"},
    "subject": {"id": "u-1", "tenant": "acme", "roles": ["admin", "approver"]},
}
_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,255}$")
_KEY = b"reference-workload-key-0123456789"


def reference_unit(rounds: int = 40) -> int:
    """One unit of the reference workload; returns a checksum so that no step is skipped."""
    checksum = 0
    for i in range(rounds):
        text = json.dumps({**_DOCUMENT, "n": i})
        parsed = json.loads(text)
        canonical = orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS)
        digest = hashlib.sha256(canonical).digest()
        mac = hmac.new(_KEY, canonical, hashlib.sha256).digest()
        fields = {f"{k}.{j}": v for k, v in parsed["input"].items() for j in range(3)}
        names = sorted(fields)
        checksum += digest[0] + mac[0] + len(names) + bool(_PATTERN.match(parsed["tool_call_id"]))
    return checksum


def time_reference_unit() -> float:
    """µs of this thread's CPU for one ``reference_unit()``."""
    start = time.thread_time_ns()
    reference_unit()
    return (time.thread_time_ns() - start) / 1000


@dataclass(frozen=True)
class Line:
    """One budget line's verdict: ``measured`` µs per mix call, ``allowed`` µs (the budget
    scaled by the run's speed factor, plus the tolerance)."""

    name: str
    measured: float
    budget: float
    allowed: float
    target: float

    @property
    def over(self) -> bool:
        return self.measured > self.allowed


def judge(mix: dict[str, float], factor: float) -> list[Line]:
    """The verdict of every budget line for ``mix`` (report phase -> µs per mix call) on a
    machine ``factor`` times slower than the reference one."""
    lines = []
    for name, (budget, phases) in BUDGET.items():
        measured = sum(mix.get(phase, 0.0) for phase in phases)
        lines.append(Line(name, round(measured, 1), budget, round(budget * factor * (1 + TOLERANCE), 1), TARGET[name]))
    return lines


def speed_factor(reference_us: list[float]) -> float:
    """The run's speed factor from its reference timings (µs each): median / ``REFERENCE_US``,
    at least 1. A faster run is judged at the reference machine's budget, never a tighter one:
    the host of this VM runs the small, cache-resident reference workload up to a third faster
    at times while the calls (system calls, the Go engine, fsync) gain far less."""
    return max(1.0, statistics.median(reference_us) / REFERENCE_US)


def format_verdict(lines: list[Line], factor: float, reference_us: list[float]) -> str:
    """The check's table: measured, budget, allowed and the verdict of each line."""
    rows = [
        f"reference workload: median {statistics.median(reference_us):.1f} µs over {len(reference_us)} units "
        f"(reference machine {REFERENCE_US:.1f} µs): speed factor {factor:.2f}",
        f"{'budget line':<16}{'µs/call':>10}{'budget':>10}{'allowed':>10}{'target':>10}  verdict",
    ]
    for line in lines:
        verdict = "OVER" if line.over else "ok"
        rows.append(f"{line.name:<16}{line.measured:>10.1f}{line.budget:>10.0f}{line.allowed:>10.1f}{line.target:>10.0f}"
                    f"  {verdict}")
    over = [line.name for line in lines if line.over]
    rows.append(f"FAILED: over budget: {', '.join(over)}" if over else "budget check passed")
    return "\n".join(rows)


def main() -> int:
    """``python -m bench.budget``: time the reference workload alone (to calibrate
    ``REFERENCE_US`` on an idle reference machine); prints the median of 200 units."""
    for _ in range(20):
        reference_unit()
    samples = [time_reference_unit() for _ in range(200)]
    print(f"reference workload: median {statistics.median(samples):.1f} µs, "
          f"min {min(samples):.1f}, max {max(samples):.1f} (200 units)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
