"""A tool service's execution report (DESIGN §4), recorded like a decide call: the key is
stored only as its keyed hash; refused reports are recorded too. The record of an accepted
report names the decide call that reserved the key (``for_decision_id``): the decision id its
receipt carries. Every accepted report also settles that call's session (docs/session.md):
complete keeps its limit shares spent and adds what its result brings (with its reservation
token, the values its provenance marks name: ``input.provenance``), fail gives them back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app import metrics
from app.bodies import parse_body
from app.decide import session_step
from app.decide.deps import Deps
from app.decide.events import RequestFacts, report_event, unkeyed_failure_event
from app.idempotency.executions import report_complete, report_failure
from app.idempotency.keys import Scope
from app.idempotency.store import Report
from app.models import CompleteReport, FailReport, Subject
from app.vocabulary import EventType

_SCHEMA_MESSAGE = "report does not match its schema"


def complete(deps: Deps, request: RequestFacts, subject: Subject, key: str, body: bytes) -> Report:
    """Parse a ``CompleteReport`` from ``body`` and store its result for the call ``subject``
    reserved under ``key`` (see ``report_complete`` for the errors)."""
    reasons: list[str] = []

    def act() -> Report:
        report = parse_body(CompleteReport, body, _SCHEMA_MESSAGE)
        completed = report_complete(deps.idempotency, deps.contracts, subject, key, report)
        reasons.append(f"execution {completed.report.state}")
        session_step.settle(
            subject, completed.report, deps.sessions, contract=completed.contract, result=completed.result,
            provenance=deps.provenance, bound=report.reservation_token is not None,
        )
        return completed.report

    return _recorded("execution_complete", deps, request, subject, key, reasons, act)


def fail(deps: Deps, request: RequestFacts, subject: Subject, key: str, body: bytes) -> Report:
    """Parse a ``FailReport`` from ``body`` and record the failure of the call ``subject``
    reserved under ``key`` (see ``report_failure`` for the errors)."""
    reasons: list[str] = []

    def act() -> Report:
        report = parse_body(FailReport, body, _SCHEMA_MESSAGE)
        reasons.append(report.reason)
        outcome = report_failure(deps.idempotency, subject, key, report)
        reasons.append(f"execution {outcome.state}")
        session_step.settle(subject, outcome, deps.sessions)
        return outcome

    return _recorded("execution_fail", deps, request, subject, key, reasons, act)


def record_complete(
    deps: Deps, request: RequestFacts, subject: Subject, key: str, result: Any, *, token: str | None
) -> Report:
    """Store ``result``, already checked by the caller (the MCP gateway's upstream result), for
    the call ``subject`` reserved under ``key``; recorded as ``execution_complete``. Raises
    ``NotFound`` (404), ``Conflict`` (409), ``DependencyUnavailable`` (503), as ``complete``."""
    reasons: list[str] = []

    def act() -> Report:
        outcome = deps.idempotency.complete(Scope(subject.tenant, subject.id, key), subject.id, result, token=token)
        reasons.append(f"execution {outcome.state}")
        session_step.settle(subject, outcome, deps.sessions)
        return outcome

    return _recorded("execution_complete", deps, request, subject, key, reasons, act)


def record_failure(
    deps: Deps, request: RequestFacts, subject: Subject, key: str, *, retryable: bool, reason: str, token: str | None
) -> Report:
    """Record that the call ``subject`` reserved under ``key`` failed (``retryable`` releases
    the key, otherwise the failure is replayed); recorded as ``execution_fail``. Raises as
    ``fail``."""
    reasons: list[str] = [reason]

    def act() -> Report:
        outcome = deps.idempotency.fail(Scope(subject.tenant, subject.id, key), subject.id, retryable=retryable, reason=reason, token=token)
        reasons.append(f"execution {outcome.state}")
        session_step.settle(subject, outcome, deps.sessions)
        return outcome

    return _recorded("execution_fail", deps, request, subject, key, reasons, act)


def record_unkeyed_failure(deps: Deps, request: RequestFacts, subject: Subject, tool: str, version: str, reason: str) -> None:
    """Record the failed execution of a call that has no idempotency key (``execution_fail``,
    with the tool). Raises ``DependencyUnavailable`` (503) when the record cannot be written."""
    deps.recorder.run(lambda: None, lambda _result, _error: unkeyed_failure_event(request, subject, tool, version, reason))


def _recorded(
    event: EventType, deps: Deps, request: RequestFacts, subject: Subject, key: str, reasons: list[str],
    act: Callable[[], Report],
) -> Report:
    outcome = deps.recorder.run(
        act,
        lambda result, error: report_event(
            event, request, subject, deps.recorder.key_hash(key), reasons, error, result is not None,
            for_decision_id=result.decision_id if result is not None else None,
        ),
    )
    metrics.EXECUTION_REPORTS.labels(outcome.state).inc()
    return outcome
