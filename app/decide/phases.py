"""Per-phase durations of one call, for logs, metrics, trace spans and the decision record.

Phases nest (the approval step asks the policy, which admits the call against its limits), so
each phase's figure is **exclusive**: its own time less the phases timed inside it, summed over
every time the phase ran (a call with a grant asks the policy twice). The phases of one call
therefore add up to at most its ``total``, the one inclusive figure. Trace spans keep each
phase's own start and end (nested spans).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
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

    @contextmanager
    def measure(self, phase: str) -> Iterator[None]:
        """Time the block as ``phase`` (also when it raises), less the phases timed inside it,
        and observe that in the phase's histogram."""
        start_ns = time.time_ns()
        start = time.perf_counter()
        self._inner_s.append(0.0)
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            inner = self._inner_s.pop()
            own = elapsed if phase == TOTAL else max(0.0, elapsed - inner)
            if self._inner_s and phase != TOTAL:
                self._inner_s[-1] += elapsed
            seconds = self._seconds[phase] = self._seconds.get(phase, 0.0) + own
            self.ms[phase] = round(seconds * 1000, 3)
            self.spans.append((phase, start_ns, start_ns + int(elapsed * 1e9)))
            _histogram(phase).observe(own)
