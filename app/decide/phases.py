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

from prometheus_client import Histogram

from app import metrics

#: ``metrics.PHASE_SECONDS`` by phase: ``labels()`` checks and looks up its arguments under a
#: lock on every call, so each phase's child is looked up once per worker.
_HISTOGRAMS: dict[str, Histogram] = {}

#: The phase that spans the whole call: inclusive, never subtracted from an enclosing phase.
TOTAL = "total"


def _histogram(phase: str) -> Histogram:
    child = _HISTOGRAMS.get(phase)
    if child is None:
        child = _HISTOGRAMS[phase] = metrics.PHASE_SECONDS.labels(phase)
    return child


@dataclass
class Phases:
    """Exclusive durations in ms by phase name (``metrics.PHASES``; ``total`` inclusive), and
    the spans ``(phase, start, end)`` in epoch ns for trace spans (``app.tracing``)."""

    ms: dict[str, float] = field(default_factory=dict)
    spans: list[tuple[str, int, int]] = field(default_factory=list)
    #: Seconds of the phases timed inside each open phase, innermost last.
    _inner_s: list[float] = field(default_factory=list, repr=False)
    _seconds: dict[str, float] = field(default_factory=dict, repr=False)
    #: Epoch ns minus ``perf_counter_ns`` when the call began: spans from one clock read each.
    _epoch_offset_ns: int = field(default_factory=lambda: time.time_ns() - time.perf_counter_ns(), repr=False)

    def measure(self, phase: str) -> _Timer:
        """Time the ``with`` block as ``phase`` (also when it raises), less the phases timed
        inside it, and observe that in the phase's histogram."""
        return _Timer(self, phase)


class _Timer:
    """One ``Phases.measure`` block (a plain context manager: one is entered per phase of
    every call)."""

    __slots__ = ("_phase", "_phases", "_start_ns")

    def __init__(self, phases: Phases, phase: str) -> None:
        self._phases = phases
        self._phase = phase
        self._start_ns = 0

    def __enter__(self) -> None:
        self._phases._inner_s.append(0.0)
        self._start_ns = time.perf_counter_ns()

    def __exit__(self, *exc: object) -> None:
        elapsed_ns = time.perf_counter_ns() - self._start_ns
        phases, phase = self._phases, self._phase
        elapsed = elapsed_ns / 1e9
        inner = phases._inner_s.pop()
        own = elapsed if phase == TOTAL else max(0.0, elapsed - inner)
        if phases._inner_s and phase != TOTAL:
            phases._inner_s[-1] += elapsed
        seconds = phases._seconds[phase] = phases._seconds.get(phase, 0.0) + own
        phases.ms[phase] = round(seconds * 1000, 3)
        start_ns = phases._epoch_offset_ns + self._start_ns
        phases.spans.append((phase, start_ns, start_ns + elapsed_ns))
        _histogram(phase).observe(own)
