"""Prometheus metrics of the gateway (prometheus-client). Names carry units (``_seconds``).

Every metric object of the gateway is defined here; call sites import this module and use
the objects below. Under gunicorn the metrics are kept in prometheus-client's multiprocess
mode (``PROMETHEUS_MULTIPROC_DIR``, set up by gunicorn.conf.py before this module is first
imported) so that one scrape of ``GET /metrics`` sums every worker; ``render_latest`` builds
that exposition.

Label values are always from fixed sets or from the contract registry (tool names), never
raw caller input, so a caller cannot create unbounded time series.

Metrics (all counters end in ``_total``):

- ``toolgate_decisions_total{tool,version,decision}``: decisions returned by /v1/decide;
  unregistered (dynamic) tools are counted as tool=version=``_dynamic``.
- ``toolgate_errors_total{code}``: error responses by error code (DESIGN §7).
- ``toolgate_policy_invalid_results_total``: "no policy decision" normalizations.
- ``toolgate_engine_errors_total{kind}``: policy engine failures; ``kind="timeout"`` counts
  timeouts, others: connection, request, http_<status>, bad_body, evaluation, load.
- ``toolgate_phase_seconds{phase}``: histogram of decide phase durations (``PHASES``).
- ``toolgate_idempotency_reservations_total``, ``toolgate_idempotency_replays_total``,
  ``toolgate_idempotency_conflicts_total{kind}`` (in_flight, fingerprint_mismatch,
  outcome_unknown), ``toolgate_execution_reports_total{outcome}`` (completed, failed, released).
- ``toolgate_approvals_created_total``, ``toolgate_approvals_answered_total{answer}``
  (approved, rejected), ``toolgate_grants_rejected_total{reason}``.
- ``toolgate_jwks_fetches_total{outcome}`` (ok, error).
- ``toolgate_decision_log_failures_total``: decision records that could not be written.
- ``toolgate_http_requests_total{method,route,status}``: every HTTP response, by route
  template (``/v1/approvals/<approval_id>``, or ``unmatched``), never by raw path.
- ``toolgate_http_request_seconds{method,route}``: histogram of request durations.
- ``toolgate_build_info{version}``: 1, the version of the running toolgate.
- ``toolgate_policy_revision_info{revision}``: 1 for the policy revision a worker last
  decided with, 0 for the one before (per worker: ``liveall``).
- ``toolgate_audit_checkpoints_total{kind,outcome}``: signed checkpoint statements written
  (kind register, checkpoint; outcome ok, error: a sink failed, tried again at the next flush).
- ``toolgate_shadow_decisions_total{tool,active,shadow,agreement}``: decide calls whose shadow
  policy (a candidate, or the active policy's log-only families) gave a decision, by tool (as in
  ``toolgate_decisions_total``), the active policy's decision, the shadow's, and ``agree`` or
  ``disagree``.
- ``toolgate_shadow_errors_total{source,kind}``: shadow evaluations without a decision
  (source candidate, log_only; kind timeout: abandoned at the deadline, overloaded: every shadow
  worker busy, evaluation_error, unavailable, invalid_result).
- ``toolgate_shadow_reloads_total{outcome}``: candidate bundles activated (``activated``) or
  refused (signature, compile, unreadable, unavailable) by a worker's shadow engine.
- ``toolgate_redis_command_seconds``: histogram of each Redis round trip (a command, a script
  or a pipeline), timed-out ones included, from the pool checkout to the reply: what
  ``TOOLGATE_REDIS_SOCKET_TIMEOUT_MS`` is sized against (docs/operators.md#redis).
- ``toolgate_session_limits_total{outcome}`` (reserved, refused, given_back): limit shares;
  ``toolgate_rate_limited_total{scope}`` (tenant, subject): calls refused with 429.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import REGISTRY as DEFAULT_REGISTRY

#: The phases of ``toolgate_phase_seconds`` (label ``phase``), in pipeline order.
PHASES = (
    "auth", "validate", "idempotency", "grant", "session", "policy", "limits", "approval", "shadow", "reserve", "note",
    "log", "total",
)

DECISIONS = Counter(
    "toolgate_decisions_total", "Decisions returned by /v1/decide.", ["tool", "version", "decision"]
)
ERRORS = Counter("toolgate_errors_total", "Error responses by error code.", ["code"])
POLICY_INVALID_RESULTS = Counter(
    "toolgate_policy_invalid_results_total",
    "Engine results that were not a valid decision and were normalized to deny.",
)
ENGINE_ERRORS = Counter("toolgate_engine_errors_total", "Policy engine failures by kind.", ["kind"])
POLICY_RELOADS = Counter("toolgate_policy_reloads_total", "Policy bundles activated by the embedded engine.")
POLICY_RELOAD_REFUSALS = Counter(
    "toolgate_policy_reload_refusals_total",
    "Policy bundles refused by the embedded engine: signature, compile, unreadable, unavailable.", ["kind"]
)
PHASE_SECONDS = Histogram(
    "toolgate_phase_seconds",
    "Duration of each decide phase in seconds.",
    ["phase"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)

IDEMPOTENCY_RESERVATIONS = Counter(
    "toolgate_idempotency_reservations_total", "Idempotency keys reserved (state processing)."
)
IDEMPOTENCY_REPLAYS = Counter(
    "toolgate_idempotency_replays_total", "Stored results replayed for a completed idempotency key."
)
IDEMPOTENCY_CONFLICTS = Counter(
    "toolgate_idempotency_conflicts_total",
    "Idempotency conflicts by kind: in_flight (409), fingerprint_mismatch (422), outcome_unknown (409).",
    ["kind"],
)
EXECUTION_REPORTS = Counter(
    "toolgate_execution_reports_total", "Execution outcomes reported by tool services, by outcome.", ["outcome"]
)
APPROVALS_CREATED = Counter("toolgate_approvals_created_total", "Pending approvals created by user-approval decisions.")
APPROVALS_ANSWERED = Counter(
    "toolgate_approvals_answered_total", "Approvals answered by an approver, by answer: approved, rejected.", ["answer"]
)
APPROVALS_EXPIRED = Counter("toolgate_approvals_expired_total", "Pending approvals that expired unanswered.")
APPROVALS_ESCALATED = Counter("toolgate_approvals_escalated_total", "Pending approvals escalated to their escalation roles.")
SCOPED_GRANT_USES = Counter("toolgate_scoped_grant_uses_total", "Calls let through by a standing scoped grant.")
WEBHOOK_DELIVERIES = Counter(
    "toolgate_webhook_deliveries_total", "Webhook delivery attempts by outcome: ok, retry, dead.", ["outcome"]
)
WEBHOOK_DEAD_LETTERS = Counter(
    "toolgate_webhook_dead_letters_total", "Webhook events given up on (attempts exhausted, refused, or queue full)."
)
GRANTS_REJECTED = Counter("toolgate_grants_rejected_total", "Approval grants refused, by reason.", ["reason"])
JWKS_FETCHES = Counter("toolgate_jwks_fetches_total", "JWKS fetches by outcome: ok, error.", ["outcome"])
DECISION_LOG_FAILURES = Counter(
    "toolgate_decision_log_failures_total", "Decision records that could not be written (the call failed with 503)."
)
HTTP_REQUESTS = Counter(
    "toolgate_http_requests_total", "HTTP responses by method, route template and status.", ["method", "route", "status"]
)
HTTP_SECONDS = Histogram(
    "toolgate_http_request_seconds",
    "HTTP request durations in seconds, by method and route template.",
    ["method", "route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
BUILD_INFO = Gauge("toolgate_build_info", "1, labelled with the running toolgate version.", ["version"],
                   multiprocess_mode="max")
POLICY_REVISION = Gauge(
    "toolgate_policy_revision_info",
    "1 for the policy revision this worker last decided with, 0 for the one before.",
    ["revision"],
    multiprocess_mode="liveall",
)
SESSION_LIMITS = Counter(
    "toolgate_session_limits_total", "Limit shares by outcome: reserved, refused (the call was denied), given_back.", ["outcome"]
)
REDIS_SECONDS = Histogram(
    "toolgate_redis_command_seconds",
    "Duration of each Redis round trip (command, script or pipeline) in seconds, timeouts included.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5),
)
SESSION_READS_GAPS = Gauge(
    "toolgate_session_reads_gaps",
    "Session members the policy in force reads but its families' session_reads do not declare (0: verified; the"
    " gateway builds the whole session for every call while this is above 0).",
    multiprocess_mode="livemax",
)
RATE_LIMITED = Counter("toolgate_rate_limited_total", "Decide calls refused with 429 RATE_LIMITED, by the limit's scope.", ["scope"])
_revision = [""]
_CHILDREN: dict[tuple[object, tuple[str, ...]], Any] = {}


def child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once per worker: ``labels()`` checks its arguments
    under a lock on every call, and the decide path counts several series per call."""
    key = (metric, labels)
    found = _CHILDREN.get(key)
    if found is None:
        found = _CHILDREN[key] = metric.labels(*labels)
    return found


def note_policy_revision(revision: str) -> None:
    """Point ``toolgate_policy_revision_info`` at ``revision`` (cheap when it is unchanged)."""
    previous = _revision[0]
    if revision == previous:
        return
    if previous:
        POLICY_REVISION.labels(previous).set(0)
    POLICY_REVISION.labels(revision).set(1)
    _revision[0] = revision
SHADOW_DECISIONS = Counter(
    "toolgate_shadow_decisions_total",
    "Shadow decisions beside the active policy's, by tool, both decisions and agreement (agree, disagree).",
    ["tool", "active", "shadow", "agreement"],
)
SHADOW_ERRORS = Counter(
    "toolgate_shadow_errors_total", "Shadow evaluations without a decision, by source and kind.", ["source", "kind"]
)
SHADOW_RELOADS = Counter(
    "toolgate_shadow_reloads_total", "Candidate policy bundles activated or refused by the shadow engine.", ["outcome"]
)
AUDIT_CHECKPOINTS = Counter(
    "toolgate_audit_checkpoints_total", "Signed decision-log checkpoint statements written.", ["kind", "outcome"]
)


def multiprocess_dir() -> str | None:
    """The prometheus-client multiprocess directory in force (``PROMETHEUS_MULTIPROC_DIR``), or None."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None  # noqa: SIM112 - prometheus-client reads both


def render_latest() -> tuple[bytes, str]:
    """The text exposition of every metric and its content type.

    In multiprocess mode the values of all worker processes (live and exited) are read from
    the multiprocess directory and summed per series; otherwise this process's default
    registry is rendered. Raises ``OSError`` only if the multiprocess directory is unreadable.
    """
    directory = multiprocess_dir()
    if directory is None:
        return generate_latest(DEFAULT_REGISTRY), CONTENT_TYPE_LATEST
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return generate_latest(registry), CONTENT_TYPE_LATEST
