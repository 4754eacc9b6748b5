"""Per-phase durations of one call, for logs, metrics, trace spans and the decision record."""

from __future__ import annotations

import time
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
    #: Epoch ns minus ``perf_counter_ns`` when the call began: spans from one clock read each.
    _epoch_offset_ns: int = field(default_factory=lambda: time.time_ns() - time.perf_counter_ns(), repr=False)

    def measure(self, phase: str) -> _Timer:
        """Time the ``with`` block as ``phase`` (also when it raises) and observe it in the
        histogram."""
        return _Timer(self, phase)


class _Timer:
    """One ``Phases.measure`` block (a plain context manager: one is entered per phase of
    every call)."""

    __slots__ = ("_phase", "_phases", "_start")

    def __init__(self, phases: Phases, phase: str) -> None:
        self._phases = phases
        self._phase = phase
        self._start = 0

    def __enter__(self) -> None:
        self._start = time.perf_counter_ns()

    def __exit__(self, *exc: object) -> None:
        elapsed_ns = time.perf_counter_ns() - self._start
        phases, phase = self._phases, self._phase
        phases.ms[phase] = round(elapsed_ns / 1e6, 3)
        start_ns = phases._epoch_offset_ns + self._start
        phases.spans.append((phase, start_ns, start_ns + elapsed_ns))
        _histogram(phase).observe(elapsed_ns / 1e9)
