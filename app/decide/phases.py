"""Per-phase durations of one call, for logs, metrics, trace spans and the decision record.

Phases nest (the approval step asks the policy, which admits the call against its limits), so
each phase's figure is **exclusive**: its own time less the phases timed inside it, summed over
every time the phase ran (a call with a grant asks the policy twice). The phases of one call
therefore add up to at most its ``total``, the one inclusive figure. Trace spans keep each
phase's own start and end (nested spans).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app import metrics

#: The phase that spans the whole call: inclusive, never subtracted from an enclosing phase.
TOTAL = "total"


@dataclass
class Phases:
    """Exclusive durations in ms by phase name (``metrics.PHASES``; ``total`` inclusive), and
    the spans ``(phase, start, end)`` in epoch ns for trace spans (``app.tracing``)."""

    ms: dict[str, float] = field(default_factory=dict)
    spans: list[tuple[str, int, int]] = field(default_factory=list)
    #: Seconds of the phases timed inside each open phase, innermost last.
    _inner_s: list[float] = field(default_factory=list, repr=False)
    _seconds: dict[str, float] = field(default_factory=dict, repr=False)
    #: Epoch ns less ``perf_counter`` in ns when the call began: spans from one clock read each.
    _epoch_offset_ns: int = field(default_factory=lambda: time.time_ns() - int(time.perf_counter() * 1e9), repr=False)

    def measure(self, phase: str) -> _Timer:
        """Time the ``with`` block as ``phase`` (also when it raises), less the phases timed
        inside it, and observe that in the phase's histogram."""
        return _Timer(self, phase)


class _Timer:
    """One ``Phases.measure`` block (a plain context manager: one is entered per phase of
    every call)."""

    __slots__ = ("_phase", "_phases", "_start")

    def __init__(self, phases: Phases, phase: str) -> None:
        self._phases = phases
        self._phase = phase
        self._start = 0.0

    def __enter__(self) -> None:
        self._phases._inner_s.append(0.0)
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self._start
        phases, phase = self._phases, self._phase
        inner = phases._inner_s.pop()
        own = elapsed if phase == TOTAL else max(0.0, elapsed - inner)
        if phases._inner_s and phase != TOTAL:
            phases._inner_s[-1] += elapsed
        seconds = phases._seconds[phase] = phases._seconds.get(phase, 0.0) + own
        phases.ms[phase] = round(seconds * 1000, 3)
        start_ns = phases._epoch_offset_ns + int(self._start * 1e9)
        phases.spans.append((phase, start_ns, start_ns + int(elapsed * 1e9)))
        metrics.child(metrics.PHASE_SECONDS, phase).observe(own)
