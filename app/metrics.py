"""Prometheus metrics of the gateway (prometheus-client). Names carry units (``_seconds``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

DECISIONS = Counter(
    "toolgate_decisions_total", "Decisions returned by /v1/decide.", ["tool", "version", "decision"]
)
ERRORS = Counter("toolgate_errors_total", "Error responses by error code.", ["code"])
POLICY_INVALID_RESULTS = Counter(
    "toolgate_policy_invalid_results_total",
    "Engine results that were not a valid decision and were normalized to deny.",
)
ENGINE_ERRORS = Counter("toolgate_engine_errors_total", "Policy engine failures by kind.", ["kind"])
PHASE_SECONDS = Histogram(
    "toolgate_phase_seconds",
    "Duration of each decide phase in seconds.",
    ["phase"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
