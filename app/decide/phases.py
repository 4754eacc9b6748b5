"""Per-phase durations of one call, for logs, metrics, trace spans and the decision record."""

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


def _histogram(phase: str) -> Histogram:
    child = _HISTOGRAMS.get(phase)
    if child is None:
        child = _HISTOGRAMS[phase] = metrics.PHASE_SECONDS.labels(phase)
    return child


@dataclass
class Phases:
    """Durations in ms by phase name (``metrics.PHASES``), and the spans ``(phase, start, end)``
    in epoch ns for trace spans (``app.tracing``)."""

    ms: dict[str, float] = field(default_factory=dict)
    spans: list[tuple[str, int, int]] = field(default_factory=list)

    @contextmanager
    def measure(self, phase: str) -> Iterator[None]:
        """Time the block as ``phase`` (also when it raises) and observe it in the histogram."""
        start_ns = time.time_ns()
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.ms[phase] = round(elapsed * 1000, 3)
            self.spans.append((phase, start_ns, start_ns + int(elapsed * 1e9)))
            _histogram(phase).observe(elapsed)
